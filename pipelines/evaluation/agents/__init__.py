"""The evaluation's agents (prompt templates beside their module)."""
