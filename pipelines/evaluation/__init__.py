"""Evaluation: HTS pairwise judging (LLM judges and human raters), agreement, bootstrap intervals,
report tables and plots, and the static trace browser."""
