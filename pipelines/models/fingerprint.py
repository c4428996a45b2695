"""A cheap content fingerprint of a model folder, for cache keys and resume decisions."""

from __future__ import annotations

import hashlib
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
FINGERPRINT_FILES = ("config.json", "adapter_config.json", "generation_config.json", "tokenizer_config.json")


def folder_fingerprint(path: Path, sample_bytes: int = 1 << 20) -> str:
    """Cheap content fingerprint of a model folder: config files, weight names, sizes, head and tail bytes."""
    digest = hashlib.sha256()
    for name in FINGERPRINT_FILES + ("chat_template.jinja",):
        file = path / name
        if file.is_file():
            digest.update(name.encode() + file.read_bytes())
    for file in sorted(p for p in path.iterdir() if p.name.endswith(WEIGHT_SUFFIXES)):
        size = file.stat().st_size
        digest.update(f"{file.name}:{size}".encode())
        with open(file, "rb") as handle:
            digest.update(handle.read(sample_bytes))
            handle.seek(max(0, size - sample_bytes))
            digest.update(handle.read(sample_bytes))
    return digest.hexdigest()
