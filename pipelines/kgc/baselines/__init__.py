"""Baselines on the same data and scorer: AutoKG single call, ChatIE two-stage, CoT-ER three-stage,
self-consistency voting over k samples of one expert."""
