"""Statistics shared by the evaluation and the report: bootstrap intervals, inter-rater agreement."""
