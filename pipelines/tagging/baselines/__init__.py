"""Baselines evaluated beside the team: embedding similarity and PLM fine-tuning (the single-LLM
chain-of-thought baseline is an agent: :mod:`pipelines.tagging.agents.single_llm`)."""
