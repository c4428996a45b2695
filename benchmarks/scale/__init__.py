"""The papers' scale on one machine: the parts of ``benchmarks/paper_scale.py`` (docs/scale.md)."""
