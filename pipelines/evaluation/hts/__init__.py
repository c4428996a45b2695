"""HTS pairwise judging (the RAM2C paper's human-touch score): judges, judging, scores."""
