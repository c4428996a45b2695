"""The papers' ablations as one queued ``dvc exp`` set, and their tables."""
