"""Typed params of the knowledge bases: ``build_kb`` (sources, chunking, embedder, store, quality
evaluation) and ``retrieval`` (multi-query fusion, reranking, which kinds each expert group reads).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from pipelines.config import StrictModel
from pipelines.llm.config import LLMConfig

KINDS = ("class_records", "teaching_theory", "psychology", "safety", "literature")
Kind = Literal["class_records", "teaching_theory", "psychology", "safety", "literature"]

# chunk metadata written by the build itself; a source field of the same name would overwrite it
RESERVED_METADATA = ("kind", "group", "file", "doc", "position", "language", "sparse")

SAFETY_CATEGORIES = (
    "crimes_and_illegal_activities",
    "ethics_and_morality",
    "insult",
    "mental_health",
    "physical_harm",
    "privacy_and_property",
    "unfairness_and_discrimination",
)


class SourceConfig(StrictModel):
    """One input: a file or a folder (read recursively) whose documents all have one ``kind``.

    ``.jsonl`` and ``.csv`` rows become documents through the field mapping: ``text_fields`` are
    joined (one per line) into the text, ``id_field`` names the record, ``metadata_fields`` are
    copied into chunk metadata (e.g. the safety ``category``). ``.txt``/``.md`` files are one document.
    ``rows_per_document`` joins consecutive short rows (single utterances) into documents of about
    that many rows (at most twice as many): a group ends after a row whose content hash says so, so
    inserting one row changes only its own group. ``dialogue: true`` makes every line break end a
    sentence (one utterance per line, often without end punctuation). ``max_records`` caps the rows
    read and ``max_chunks`` the chunks kept (in file order). Metadata field names may not be one of
    the internal keys (:data:`RESERVED_METADATA`) nor start with ``_`` or ``chroma:``.
    """

    name: str = Field(min_length=1)
    kind: Kind
    path: str
    optional: bool = False
    language: Literal["auto", "en", "zh"] = "auto"
    text_fields: list[str] = Field(default_factory=lambda: ["text"], min_length=1)
    id_field: str | None = None
    metadata_fields: list[str] = []
    replace: dict[str, str] = {}
    max_records: int | None = Field(None, ge=1)
    rows_per_document: int = Field(1, ge=1)
    max_chunks: int | None = Field(None, ge=1)
    extensions: list[Literal[".txt", ".md", ".jsonl", ".csv"]] = [".txt", ".md", ".jsonl", ".csv"]
    dialogue: bool = False

    @field_validator("metadata_fields")
    @classmethod
    def _no_reserved_names(cls, fields: list[str]) -> list[str]:
        taken = [f for f in fields if f in RESERVED_METADATA or f.startswith(("_", "chroma:"))]
        if taken:
            raise ValueError(
                f"metadata field(s) {taken} clash with the knowledge base's own chunk metadata "
                f"({', '.join(RESERVED_METADATA)}; names starting with '_' or 'chroma:'); "
                "remove them from metadata_fields or rename the field in the source file"
            )
        return fields


class ChunkingConfig(StrictModel):
    """Sentence-aware chunking by characters (Chinese 。！？； and English . ! ? ; end sentences)."""

    size: int = Field(200, ge=20)
    overlap: int = Field(40, ge=0)
    min_length: int = Field(20, ge=1)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class EmbedderConfig(StrictModel):
    """``sentence_transformers``: a local folder (offline default); ``bge_m3``: FlagEmbedding BGE-M3.

    ``device: auto``: ``cuda`` where torch sees one, else ``cpu``. ``threads``: intra-op threads of
    an encode on the CPU (1: a generation stage's queries are single sentences, and a second thread
    mostly spins; ``null``: the library's default). ``backend: onnx`` (sentence_transformers only):
    the model exported once to ONNX (user cache folder) and run by ONNX Runtime, vectors equal to
    torch's within 1e-5, thread-safe (no lock between concurrent encodes)."""

    kind: Literal["sentence_transformers", "bge_m3"] = "sentence_transformers"
    path: str = "models/base/all-minilm-l6-v2"
    batch_size: int = Field(64, ge=1)
    device: str = "auto"
    threads: int | None = Field(1, ge=1)
    backend: Literal["torch", "onnx"] = "torch"
    max_length: int = Field(256, ge=8)
    query_prefix: str = ""
    use_fp16: bool = False
    sparse: bool = False

    @model_validator(mode="after")
    def _onnx_for_sentence_transformers(self) -> EmbedderConfig:
        if self.backend == "onnx" and self.kind != "sentence_transformers":
            raise ValueError("backend: onnx runs sentence_transformers models only; set backend: torch for bge_m3")
        return self


class ChromaServerConfig(StrictModel):
    """Where a Chroma server listens (``chroma run --path data/kb --host 0.0.0.0 --port 8000`` on one
    host of the cluster); ``token_env`` names an environment variable holding a bearer token for a
    server behind token authentication (never the token itself)."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    ssl: bool = False
    token_env: str | None = None


class StoreConfig(StrictModel):
    """The knowledge base: one Chroma collection per kind named ``<prefix><kind>``.

    ``backend: persistent`` opens the folder ``path`` in this process (one machine); ``backend:
    server`` talks to a Chroma server over HTTP (``server``), so many generation shards share one
    knowledge base without SQLite locking over a network filesystem. ``path`` is then where the
    server keeps its files (``chroma run --path <path>``) and where build_kb writes the manifest.
    """

    path: str = "data/kb"
    collection_prefix: str = "edumas_"
    backend: Literal["persistent", "server"] = "persistent"
    server: ChromaServerConfig = ChromaServerConfig()


class QualityConfig(StrictModel):
    """Labelled query set scored by recall@k and MRR (dense only vs. multi-query RRF)."""

    enabled: bool = True
    queries: str = "data/kb_eval/queries.jsonl"
    ks: list[int] = Field(default_factory=lambda: [1, 3, 5], min_length=1)
    llm: LLMConfig | None = None


class BuildKBConfig(StrictModel):
    """The ``build_kb`` section."""

    sources: list[SourceConfig] = Field(min_length=1)
    chunking: ChunkingConfig = ChunkingConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    store: StoreConfig = StoreConfig()
    quality: QualityConfig = QualityConfig()

    @model_validator(mode="after")
    def _unique_names(self) -> BuildKBConfig:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return self


class RerankConfig(StrictModel):
    """Optional cross-encoder rerank of the fused candidates (FlagReranker)."""

    enabled: bool = False
    model: str = "models/base/bge-reranker-v2-m3"
    batch_size: int = Field(16, ge=1)
    max_length: int = Field(512, ge=8)
    device: str = "cpu"
    use_fp16: bool = False
    candidates: int = Field(20, ge=1)


def _default_groups() -> dict[str, list[str]]:
    return {
        "teacher": ["teaching_theory", "class_records", "literature"],
        "psychologist": ["psychology"],
        "ethics": ["safety"],
    }


class RetrievalConfig(StrictModel):
    """The ``retrieval`` section: how expert groups query the knowledge bases."""

    groups: dict[str, list[Kind]] = Field(default_factory=_default_groups)
    top_k: int = Field(5, ge=1)
    per_query_k: int = Field(10, ge=1)
    n_rewrites: int = Field(2, ge=0)
    rrf_k: int = Field(60, ge=1)
    original_weight: float = Field(1.0, gt=0.0)
    sparse_weight: float = Field(0.0, ge=0.0)
    rewrite_language: Literal["auto", "en", "zh"] = "auto"
    rewrite_max_tokens: int = Field(96, ge=8)
    rewrite_temperature: float = Field(0.0, ge=0.0, le=2.0)
    rewrite_output_mode: Literal["text", "json"] = "text"
    rerank: RerankConfig = RerankConfig()
