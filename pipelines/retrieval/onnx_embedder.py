"""A sentence-transformers model run by ONNX Runtime (``build_kb.embedder.backend: onnx``).

The model's transformer is exported once with ``torch.onnx.export`` into the user cache folder
(``$XDG_CACHE_HOME/edumas/onnx/<weights fingerprint>.onnx``, written atomically), then every
encode is tokenisation, one ``InferenceSession.run`` and the model's own pooling (mean or CLS)
and L2 normalisation in numpy. Vectors equal the torch backend's within 1e-5 (fp32 both), so the
identity is the torch backend's and a store built by one is queried by the other.

Once the file exists, a later load reads the tokenizer (``tokenizer.json``, through the
``tokenizers`` library), the pooling mode and the maximum length from the model folder's own files
(:mod:`pipelines.retrieval.st_folder`), without importing torch, transformers or
sentence-transformers (about 15 s of CPU at start-up on a loaded 2-core machine); a folder whose
files say something that path does not reproduce exactly loads the full model as before.

Queries are encoded one text at a time (no padding: about half the CPU of a padded batch of a
long query and its short rewrites) and kept in an exact per-text cache (:class:`QueryVectors`):
a text encoded alone always gives the same vector, so a repeated query (a turn's rewrites, shared
by RAM2C's three expert groups) is a look-up. Documents are encoded in padded batches as before.

Concurrent encodes are safe (``thread_safe``): ONNX Runtime sessions run concurrently, and each
thread tokenises with its own copy of the tokenizer. ``threads`` sets the session's intra-op
threads; ``device: cuda`` uses ONNX Runtime's CUDA provider where the installed build has it.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from pipelines.io import atomic_open, user_cache_dir
from pipelines.models.fingerprint import folder_fingerprint
from pipelines.retrieval.config import EmbedderConfig
from pipelines.retrieval.embedders import Encoded, _check_path, _normalise, model_identity, resolve_device
from pipelines.retrieval.loading import collector_paused
from pipelines.retrieval.st_folder import FolderTokenizer, read_folder

log = logging.getLogger(__name__)
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17


def _pooling_mode(model) -> str:
    """``mean`` or ``cls``: the model's pooling module (other poolings are not exported)."""
    pooling = model[1] if len(model) > 1 else None
    mode = getattr(pooling, "pooling_mode", None)  # sentence-transformers 6: "mean", "cls", ...
    if mode == "mean" or getattr(pooling, "pooling_mode_mean_tokens", False):
        return "mean"
    if mode == "cls" or getattr(pooling, "pooling_mode_cls_token", False):
        return "cls"
    raise ValueError(f"backend: onnx supports mean or CLS pooling; this model has {pooling}; set backend: torch")


def export(model, path: Path) -> None:
    """Write the transformer of a sentence-transformers ``model`` to ``path`` as ONNX (atomically)."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, transformer):
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.transformer(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    module = Hidden(model[0].auto_model.eval()).to("cpu")
    sample = model[0].tokenizer(["an example sentence", "two"], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "hidden")}
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            module,
            tuple(sample[name] for name in INPUTS),
            buffer,
            input_names=list(INPUTS),
            output_names=["hidden"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
    with atomic_open(path, "wb") as handle:
        handle.write(buffer.getvalue())
    log.info("exported %s to %s", model[0].auto_model.name_or_path, path)


def exported_path(folder: Path, cache: Path | None = None) -> Path:
    """Where the transformer of the model folder ``folder`` is exported (keyed by its weights)."""
    fingerprint = folder_fingerprint(folder.resolve())[:16]
    return (cache or user_cache_dir("onnx")) / f"{fingerprint}-opset{OPSET}.onnx"


def exported_identity(cfg: EmbedderConfig, *, cache: Path | None = None) -> str | None:
    """The ``identity`` an :class:`OnnxSentenceEmbedder` of ``cfg`` has, worked out without loading it
    (no ONNX Runtime, no tokenizer): where the model is exported already and the folder's
    ``sentence_bert_config.json`` names its maximum length (the length both ways of loading take);
    None otherwise (load the embedder to know it)."""
    folder = _check_path(cfg.path)
    if not exported_path(folder, cache).is_file():
        return None
    try:
        seq = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))["max_seq_length"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(seq, int) or isinstance(seq, bool) or seq <= 0:
        return None
    return model_identity("sentence_transformers", folder, dtype="float32", max_length=min(cfg.max_length, seq))


class QueryVectors:
    """The vectors of the last ``size`` query texts (least recently used out), shared by threads."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                self.hits += 1
            return vector

    def put(self, text: str, vector: np.ndarray) -> None:
        vector.setflags(write=False)
        with self._lock:
            self._vectors[text] = vector
            if len(self._vectors) > self.size:
                self._vectors.popitem(last=False)


class OnnxSentenceEmbedder:
    """A local sentence-transformers folder, its transformer run by ONNX Runtime (dense only)."""

    thread_safe = True

    def __init__(self, cfg: EmbedderConfig, *, cache: Path | None = None):
        with collector_paused():
            self._open(cfg, cache)

    def _open(self, cfg: EmbedderConfig, cache: Path | None) -> None:
        import onnxruntime as ort

        folder = _check_path(cfg.path)
        self.cfg = cfg
        self._local = threading.local()
        self.queries = QueryVectors()
        self.path = exported_path(folder, cache)
        light = read_folder(folder, cfg.max_length) if self.path.is_file() else None
        if light is not None:  # the exported file and the folder's files: no torch
            self.max_length, self.pooling = light.max_length, light.pooling
            self.tokenizer = light.tokenizer
        else:
            self._load_model(folder)
        self.identity = model_identity("sentence_transformers", folder, dtype="float32", max_length=self.max_length)
        options = ort.SessionOptions()
        options.intra_op_num_threads = cfg.threads or 0
        options.inter_op_num_threads = 1
        providers = ["CPUExecutionProvider"]
        cuda = "CUDAExecutionProvider" in ort.get_available_providers()
        # auto asks torch for a GPU only where this build could use one (no torch import on a CPU build)
        if (cfg.device != "auto" or cuda) and resolve_device(cfg.device).startswith("cuda"):
            if cuda:
                providers.insert(0, "CUDAExecutionProvider")
            else:
                log.warning("this onnxruntime build has no CUDA provider (install onnxruntime-gpu): encoding on CPU")
        self.session = ort.InferenceSession(str(self.path), options, providers=providers)
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def _load_model(self, folder: Path) -> None:
        """The full load (sentence-transformers, torch): the tokenizer and pooling, and the export
        when the file is missing."""
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        self.max_length = min(self.cfg.max_length, model.max_seq_length or self.cfg.max_length)
        self.pooling = _pooling_mode(model)
        self.tokenizer = model[0].tokenizer
        if not self.path.is_file():
            export(model, self.path)

    def _tokenizer(self):
        """This thread's copy of the tokenizer (a fast tokenizer is not safe to share)."""
        tokenizer = getattr(self._local, "tokenizer", None)
        if tokenizer is None:
            tokenizer = self._local.tokenizer = copy.deepcopy(self.tokenizer)
        return tokenizer

    def _tokens(self, texts: list[str]) -> dict[str, np.ndarray]:
        tokenizer = self._tokenizer()
        if isinstance(tokenizer, FolderTokenizer):
            return tokenizer(texts)
        tokens = tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np")
        return {name: np.asarray(tokens[name], dtype=np.int64) for name in INPUTS if name in tokens}

    def _batch(self, texts: list[str]) -> np.ndarray:
        feeds = self._tokens(texts)
        if "token_type_ids" not in feeds:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        hidden = self.session.run(None, feeds)[0]
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        return (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)

    def _encode(self, texts: list[str]) -> Encoded:
        if not texts:
            return Encoded(np.zeros((0, self.dim), dtype=np.float32))
        size = self.cfg.batch_size
        vectors = np.concatenate([self._batch(texts[i : i + size]) for i in range(0, len(texts), size)])
        return Encoded(_normalise(vectors))  # as the torch backend (normalize_embeddings=True)

    def encode_documents(self, texts: list[str]) -> Encoded:
        return self._encode(texts)

    def encode_queries(self, texts: list[str]) -> Encoded:
        """Each text alone (no padding), from the per-text cache when it was encoded before."""
        if not texts:
            return Encoded(np.zeros((0, self.dim), dtype=np.float32))
        rows = []
        for text in texts:
            text = self.cfg.query_prefix + text
            vector = self.queries.get(text)
            if vector is None:
                vector = _normalise(self._batch([text]))[0]
                self.queries.put(text, vector)
            rows.append(vector)
        return Encoded(np.stack(rows))
