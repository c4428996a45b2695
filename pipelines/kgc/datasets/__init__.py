"""Dataset readers, one per official format, behind one config entry per dataset.

cfg = DatasetConfig(name="conllpp", format="conll", files=["../shared/data/kgc/conllpp_dev.txt"], sample=100)
dataset = load_dataset(cfg, root=".")       # Dataset(name, schema, sentences, files=[FileCounts...])
evaluated, pool = split_sample(dataset.sentences, cfg.sample, seed=cfg.seed)
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

from pydantic import Field

from pipelines.config import StrictModel
from pipelines.kgc.datasets.base import Dataset, FileCounts, GoldError, ReaderError, check_gold
from pipelines.kgc.datasets.bio import read_bio
from pipelines.kgc.datasets.events import read_ace_oneie, read_duee, read_duee_schema
from pipelines.kgc.datasets.relations import read_duie, read_nyt, read_tacred
from pipelines.kgc.schema import Schema, Sentence, load_schema

Format = Literal["conll", "ontonotes", "msra", "nyt11_hrl", "tacred", "duie", "ace05", "duee"]
DEFAULT_SCHEMA = {
    "conll": "conllpp",
    "ontonotes": "ontonotes5",
    "msra": "msra",
    "nyt11_hrl": "nyt11_hrl",
    "tacred": "retacred",
    "duie": "duie2",
    "ace05": "ace05",
}
FORMAT_LANGUAGE = {"conll": "en", "ontonotes": "en", "msra": "zh", "nyt11_hrl": "en", "tacred": "en", "duie": "zh",
                   "ace05": "en", "duee": "zh"}  # fmt: skip

__all__ = [
    "FORMAT_LANGUAGE",
    "Dataset",
    "DatasetConfig",
    "FileCounts",
    "GoldError",
    "ReaderError",
    "load_dataset",
    "read_file",
    "split_sample",
]


class DatasetConfig(StrictModel):
    """One dataset: its files in one official format, its schema, and how many sentences to score.

    ``schema_name``: a bundled schema name or a JSON file (default: the format's own); DuEE needs
    ``schema_file`` (its official schema file). ``sample``: sentences scored (seeded; null = all);
    the rest of the files form the demonstration pool, or ``pool_files`` when given.
    ``fallback_files`` (and ``fallback_schema_file``) are read instead when a file of ``files`` is
    missing (e.g. ``../shared`` absent: the project's demo set); ``optional`` skips the dataset
    when neither exists. ``evaluate: false`` reads a dataset only for its schema and its
    demonstration pool (the knowledge background of a team member), scoring none of it.
    """

    name: str = Field(description="unique dataset name (metrics, tables, schema_name references)")
    format: Format = Field(
        description="official file format: conll | ontonotes | msra | nyt11_hrl | tacred | duie | ace05 | duee",
    )
    files: list[str] = Field(min_length=1, description="files read (all must exist, else fallback_files)")
    schema_name: str | None = Field(None, description="a bundled schema name or a JSON file (null: the format's own)")
    schema_file: str | None = Field(None, description="the official schema file (DuEE needs one)")
    sample: int | None = Field(
        100, ge=1,
        description="sentences scored (seeded; the paper: 100; null = all); the rest is the demonstration pool. "
        "SmolLM2 on CPU takes about 70 CPU-s per sentence with 1 round",
    )
    seed: int = Field(13, description="seed of the sample")
    pool_files: list[str] = Field(
        [],
        description="files of the demonstration pool (empty: the files' unscored sentences)",
    )
    fallback_files: list[str] = Field(
        [],
        description="read instead when a file of files is missing (e.g. ../shared absent: the project's demo set)",
    )
    fallback_schema_file: str | None = Field(None, description="schema file used with fallback_files")
    optional: bool = Field(
        False,
        description="true: skip the dataset (reported as left out) when neither files nor fallback_files exist",
    )
    evaluate: bool = Field(
        True,
        description="false: read only for its schema and demonstration pool (a team member's background), scoring "
        "none",
    )

    def resolved(self, root: Path | str = ".") -> DatasetConfig | None:
        """This config, or its fallback when a file is missing; None when an optional dataset has
        neither; raises FileNotFoundError for a required one."""
        root = Path(root)
        if all((root / f).exists() for f in self.files):
            return self
        if self.fallback_files and all((root / f).exists() for f in self.fallback_files):
            schema_file = self.fallback_schema_file or self.schema_file
            return self.model_copy(
                update={"files": self.fallback_files, "schema_file": schema_file, "fallback_files": []}
            )
        if self.optional:
            return None
        missing = next(f for f in self.files if not (root / f).exists())
        raise FileNotFoundError(f"dataset {self.name}: file {root / missing} not found (and no fallback_files)")


def schema_for(cfg: DatasetConfig, root: Path | str = ".") -> Schema:
    if cfg.format == "duee":
        if not cfg.schema_file:
            raise ReaderError(f"dataset {cfg.name}: DuEE needs schema_file (the official duee_event_schema.json)")
        return read_duee_schema(Path(root) / cfg.schema_file, name=cfg.name)
    name = cfg.schema_name or DEFAULT_SCHEMA[cfg.format]
    schema = load_schema(Path(root) / name if name.endswith(".json") else name)
    return schema


def read_file(path: Path | str, fmt: Format, schema: Schema, *, dataset: str) -> tuple[list[Sentence], FileCounts]:
    """Sentences and counts of one file in ``fmt``."""
    if fmt in ("conll", "ontonotes"):
        return read_bio(path, schema, joiner=" ", dataset=dataset)
    if fmt == "msra":
        return read_bio(path, schema, joiner="", dataset=dataset)
    reader = {
        "nyt11_hrl": read_nyt,
        "tacred": read_tacred,
        "duie": read_duie,
        "ace05": read_ace_oneie,
        "duee": read_duee,
    }[fmt]
    return reader(path, schema, dataset=dataset)


def load_dataset(cfg: DatasetConfig, root: Path | str = ".", *, pool: bool = False) -> Dataset:
    """Every file of ``cfg.files`` (or of ``cfg.pool_files`` with ``pool=True``) read into one
    dataset; a file with no gold item or mostly unknown labels raises :class:`GoldError`."""
    schema = schema_for(cfg, root)
    sentences: list[Sentence] = []
    files: list[FileCounts] = []
    for name in cfg.pool_files if pool else cfg.files:
        read, counts = read_file(Path(root) / name, cfg.format, schema, dataset=cfg.name)
        check_gold(counts, schema, dataset=cfg.name, fmt=cfg.format)
        sentences.extend(read)
        files.append(counts)
    return Dataset(cfg.name, schema, sentences, files)


def split_sample(sentences: list[Sentence], size: int | None, *, seed: int) -> tuple[list[Sentence], list[Sentence]]:
    """``(sample, rest)``: ``size`` sentences drawn with ``random.Random(seed)`` (kept in file
    order), and the others, which form the demonstration pool."""
    if size is None or size >= len(sentences):
        return list(sentences), []
    chosen = set(random.Random(seed).sample(range(len(sentences)), size))
    return [s for i, s in enumerate(sentences) if i in chosen], [s for i, s in enumerate(sentences) if i not in chosen]
