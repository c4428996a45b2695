"""What an ONNX encode of a sentence-transformers folder needs, read from the folder's own files.

:func:`read_folder` gives the maximum length (``sentence_bert_config.json``), the pooling mode
(``1_Pooling/config.json``) and a :class:`FolderTokenizer` on ``tokenizer.json`` (the ``tokenizers``
library that transformers' fast tokenizers wrap), so that a stage encodes with ONNX Runtime
without importing torch, transformers or sentence-transformers. It answers None, and the caller
loads the full model, unless the files describe exactly what this reproduces: a Transformer then
a Pooling module (mean or CLS; a Normalize after them is the caller's own normalisation), no
lower-casing by sentence-transformers, and a BERT tokenizer whose ``tokenizer.json`` normaliser
agrees with its ``tokenizer_config.json`` (transformers rebuilds the normaliser when they differ).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

log = logging.getLogger(__name__)
TRANSFORMER, POOLING, NORMALIZE = (
    f"sentence_transformers.models.{name}" for name in ("Transformer", "Pooling", "Normalize")
)
POOLINGS = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
OTHER_POOLINGS = ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                  "pooling_mode_lasttoken")  # fmt: skip
BERT_TOKENIZERS = ("BertTokenizer", "BertTokenizerFast")


class FolderTokenizer:
    """``tokenizer.json`` with truncation at ``max_length`` (special tokens included, longest first,
    from the right) and padding to the longest text on the right, as transformers' fast tokenizer
    is called by the ONNX backend: gives the model's int64 inputs."""

    def __init__(self, tokenizer: Tokenizer, *, max_length: int, pad_id: int):
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.pad_id = pad_id
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length, stride=0, strategy="longest_first", direction="right")

    def __deepcopy__(self, memo: dict) -> FolderTokenizer:
        return FolderTokenizer(
            Tokenizer.from_str(self.tokenizer.to_str()), max_length=self.max_length, pad_id=self.pad_id
        )

    def __call__(self, texts: list[str]) -> dict[str, np.ndarray]:
        encodings = self.tokenizer.encode_batch(texts) if len(texts) > 1 else [self.tokenizer.encode(texts[0])]
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(texts), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        types = np.zeros((len(texts), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = encoding.attention_mask
            types[row, :n] = encoding.type_ids
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


@dataclass
class FolderParts:
    max_length: int
    pooling: str
    tokenizer: FolderTokenizer


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _pooling(folder: Path, modules: list[dict[str, Any]]) -> str | None:
    kinds = [m.get("type") for m in modules]
    if kinds not in ([TRANSFORMER, POOLING], [TRANSFORMER, POOLING, NORMALIZE]) or modules[0].get("path") != "":
        return None
    config = _json(folder / modules[1]["path"] / "config.json")
    chosen = [mode for key, mode in POOLINGS.items() if config.get(key)]
    if len(chosen) != 1 or any(config.get(key) for key in OTHER_POOLINGS):
        return None
    return chosen[0]


def _normaliser_agrees(spec: dict[str, Any], config: dict[str, Any]) -> bool:
    normalizer = spec.get("normalizer") or {}
    return (
        config.get("tokenizer_class") in BERT_TOKENIZERS
        and normalizer.get("type") == "BertNormalizer"
        and normalizer.get("lowercase") == config.get("do_lower_case", True)
        and normalizer.get("strip_accents") == config.get("strip_accents")
        and normalizer.get("handle_chinese_chars") == config.get("tokenize_chinese_chars", True)
    )


def read_folder(folder: Path, max_length: int) -> FolderParts | None:
    """The folder's parts (module docstring), or None where only the full model load is exact."""
    try:
        modules = _json(folder / "modules.json")
        st_config = _json(folder / "sentence_bert_config.json")
        tokenizer_config = _json(folder / "tokenizer_config.json")
        spec = _json(folder / "tokenizer.json")
        pooling = _pooling(folder, modules)
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    seq = st_config.get("max_seq_length")
    pad = tokenizer_config.get("pad_token")
    if pooling is None or not isinstance(seq, int) or st_config.get("do_lower_case") or not isinstance(pad, str):
        return None
    if not _normaliser_agrees(spec, tokenizer_config):
        return None
    tokenizer = Tokenizer.from_str(json.dumps(spec))
    pad_id = tokenizer.token_to_id(pad)
    if pad_id is None:
        return None
    length = min(max_length, seq)
    return FolderParts(length, pooling, FolderTokenizer(tokenizer, max_length=length, pad_id=pad_id))
