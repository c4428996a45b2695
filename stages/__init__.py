"""One thin module per DVC stage, run as ``python -m stages.<name> [--params params.yaml]``."""
