"""The evaluation arms: the tuned model inside each system (tagging, KGC, tutoring) against its baselines."""
