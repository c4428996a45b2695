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

    name: str = Field(min_length=1, description="unique name; prefixes document ids (<name>/<file>#<record>)")
    kind: Kind = Field(description="class_records | teaching_theory | psychology | safety | literature")
    path: str = Field(description="file or folder (read recursively), relative to the project root")
    optional: bool = Field(False, description="true: left out (and reported) when the path is absent (e.g. ../shared)")
    language: Literal["auto", "en", "zh"] = Field("auto", description="auto | en | zh (auto: CJK share of characters)")
    text_fields: list[str] = Field(
        default_factory=lambda: ["text"], min_length=1,
        description=".jsonl/.csv fields joined (one per line) into the document text",
    )
    id_field: str | None = Field(None, description="field naming each record (default: row number)")
    metadata_fields: list[str] = Field(
        [],
        description="copied into chunk metadata (filterable: where={\"category\": ...})",
    )
    replace: dict[str, str] = Field(
        {},
        description="literal replacements in the text, e.g. {\"|EOM|\": \"\\n\"} (MathDial's turn separator)",
    )
    max_records: int | None = Field(None, ge=1, description="cap on rows read from the file")
    rows_per_document: int = Field(
        1, ge=1,
        description="about this many consecutive rows per document (content-defined groups); null: one row per "
        "document",
    )
    max_chunks: int | None = Field(None, ge=1, description="cap on chunks kept from this source")
    extensions: list[Literal[".txt", ".md", ".jsonl", ".csv"]] = Field(
        [".txt", ".md", ".jsonl", ".csv"],
        description="file suffixes read from a folder",
    )
    dialogue: bool = Field(False, description="one utterance per line: line breaks end sentences")

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

    size: int = Field(200, ge=20, description="max characters per chunk (RAM2C: 200)")
    overlap: int = Field(40, ge=0, description="characters of whole trailing sentences repeated in the next chunk")
    min_length: int = Field(20, ge=1, description="chunks shorter than this are dropped")

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

    kind: Literal["sentence_transformers", "bge_m3"] = Field(
        "sentence_transformers",
        description="sentence_transformers (offline default) | bge_m3 (FlagEmbedding, real runs)",
    )
    path: str = Field(
        "models/base/all-minilm-l6-v2",
        description="local model folder (bge_m3: e.g. models/base/bge-m3); never downloaded",
    )
    batch_size: int = Field(64, ge=1, description="texts per forward pass")
    device: str = Field("auto", description="auto (cuda where torch sees one, else cpu) | cpu | cuda | cuda:0 ...")
    threads: int | None = Field(
        1, ge=1, description="intra-op threads of one encode on the CPU (null: the library's default)"
    )
    backend: Literal["torch", "onnx"] = Field(
        "torch", description="torch | onnx (sentence_transformers only: ONNX Runtime, exported once to the user cache)"
    )
    max_length: int = Field(256, ge=8, description="max tokens per text")
    query_prefix: str = Field("", description="prepended to queries only (instruction-tuned embedders)")
    use_fp16: bool = Field(False, description="bge_m3 only: half precision on GPU")
    sparse: bool = Field(False, description="bge_m3 only: also store lexical weights for hybrid scoring")

    @model_validator(mode="after")
    def _onnx_for_sentence_transformers(self) -> EmbedderConfig:
        if self.backend == "onnx" and self.kind != "sentence_transformers":
            raise ValueError("backend: onnx runs sentence_transformers models only; set backend: torch for bge_m3")
        return self


class ChromaServerConfig(StrictModel):
    """Where a Chroma server listens (``chroma run --path data/kb --host 0.0.0.0 --port 8000`` on one
    host of the cluster); ``token_env`` names an environment variable holding a bearer token for a
    server behind token authentication (never the token itself)."""

    host: str = Field("127.0.0.1", description="host the Chroma server listens on")
    port: int = Field(8000, ge=1, le=65535, description="its port")
    ssl: bool = Field(False, description="connect over HTTPS")
    token_env: str | None = Field(
        None,
        description="name of an environment variable holding a bearer token (never the token itself); null: no token",
    )


class StoreConfig(StrictModel):
    """The knowledge base: one Chroma collection per kind named ``<prefix><kind>``.

    ``backend: persistent`` opens the folder ``path`` in this process (one machine); ``backend:
    server`` talks to a Chroma server over HTTP (``server``), so many generation shards share one
    knowledge base without SQLite locking over a network filesystem. ``path`` is then where the
    server keeps its files (``chroma run --path <path>``) and where build_kb writes the manifest.
    """

    path: str = Field(
        "data/kb",
        description="Chroma PersistentClient folder (DVC out); backend server: the server's --path",
    )
    collection_prefix: str = Field("edumas_", description="collections are <prefix><kind>")
    backend: Literal["persistent", "server"] = Field(
        "persistent",
        description="persistent (this folder, one machine) | server (a Chroma server shared by many shards)",
    )
    server: ChromaServerConfig = Field(
        ChromaServerConfig(),
        description="backend server: `chroma run --path data/kb --host 0.0.0.0 --port 8000`; token_env names a "
        "bearer-token variable",
    )


class QualityConfig(StrictModel):
    """Labelled query set scored by recall@k and MRR (dense only vs. multi-query RRF)."""

    enabled: bool = Field(True, description="score retrieval on the labelled queries after the build")
    queries: str = Field(
        "data/kb_eval/queries.jsonl",
        description="labelled queries JSONL: {\"id\", \"query\", \"group\"|\"kinds\", \"relevant\": [doc ids]}",
    )
    ks: list[int] = Field(
        default_factory=lambda: [1, 3, 5], min_length=1,
        description="recall@k cut-offs (MRR is over the top max(ks))",
    )
    llm: LLMConfig | None = Field(
        None,
        description="LLM of the multi-query rewrites (role query_rewriter): {} = the top-level llm; null: no "
        "rewrites",
    )


class BuildKBConfig(StrictModel):
    """The ``build_kb`` section."""

    sources: list[SourceConfig] = Field(
        min_length=1,
        description="every input of the knowledge bases; one kind per source",
    )
    chunking: ChunkingConfig = Field(ChunkingConfig(), description="how documents are cut into chunks")
    embedder: EmbedderConfig = Field(EmbedderConfig(), description="the embedding model of the chunks and queries")
    store: StoreConfig = Field(StoreConfig(), description="the Chroma store")
    quality: QualityConfig = Field(
        QualityConfig(),
        description="retrieval quality scored on labelled queries after the build",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> BuildKBConfig:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return self


class RerankConfig(StrictModel):
    """Optional cross-encoder rerank of the fused candidates (FlagReranker)."""

    enabled: bool = Field(False, description="cross-encoder rerank of the fused candidates (FlagReranker)")
    model: str = Field(
        "models/base/bge-reranker-v2-m3",
        description="local folder of the cross-encoder (real runs: bge-reranker-v2-m3)",
    )
    batch_size: int = Field(16, ge=1, description="pairs per forward pass")
    max_length: int = Field(512, ge=8, description="max tokens per (query, passage) pair")
    device: str = Field("cpu", description="cpu | cuda")
    use_fp16: bool = Field(False, description="half precision on GPU")
    candidates: int = Field(20, ge=1, description="fused candidates passed to the reranker")


def _default_groups() -> dict[str, list[str]]:
    return {
        "teacher": ["teaching_theory", "class_records", "literature"],
        "psychologist": ["psychology"],
        "ethics": ["safety"],
    }


class RetrievalConfig(StrictModel):
    """The ``retrieval`` section: how expert groups query the knowledge bases."""

    groups: dict[str, list[Kind]] = Field(
        default_factory=_default_groups,
        description="which kinds each expert group reads",
    )
    top_k: int = Field(5, ge=1, description="results returned per retrieval")
    per_query_k: int = Field(10, ge=1, description="candidates per query (original and each rewrite) before fusion")
    n_rewrites: int = Field(2, ge=0, description="LLM rewrites per query (0: dense single query)")
    rrf_k: int = Field(60, ge=1, description="reciprocal-rank-fusion constant k in 1/(k + rank)")
    original_weight: float = Field(
        1.0, gt=0.0,
        description="RRF weight of the original query's list (rewrites weigh 1)",
    )
    sparse_weight: float = Field(0.0, ge=0.0, description=">0 with bge_m3 sparse: score = dense + w * lexical")
    rewrite_language: Literal["auto", "en", "zh"] = Field(
        "auto",
        description="prompt language for rewrites: auto | en | zh",
    )
    rewrite_max_tokens: int = Field(96, ge=8, description="max tokens of one rewrite reply")
    rewrite_temperature: float = Field(0.0, ge=0.0, le=2.0, description="sampling temperature of the rewriter")
    rewrite_output_mode: Literal["text", "json"] = Field(
        "text",
        description="json: the reply is constrained to {\"rewrites\": [...]}; text: numbered lines",
    )
    rerank: RerankConfig = Field(RerankConfig(), description="cross-encoder reranking of the fused candidates")
