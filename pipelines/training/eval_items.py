"""The evaluation items ``evaluate`` can score, read with the readers the generation and evaluation
stages use (decontamination's reference set; :mod:`pipelines.training.decontamination`).

- tagging: the questions of the evaluation split (``tagging.data`` split by ``tagging.split``, as
  ``generate_tagging`` does; ``evaluate`` draws its items from it);
- kgc: the sentences of every evaluated ``kgc.datasets`` entry except those that gave a KGC SFT row
  of ``generate_kgc`` (``evaluate`` samples from exactly these);
- tutoring: computed inside ``make_datasets`` (the DPO prompts not in the train split).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from pipelines.config import load_section
from pipelines.kgc.config import KGCConfig
from pipelines.kgc.datasets import load_dataset
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.data import read_examples
from pipelines.tagging.split import split_examples
from pipelines.training.decontamination import EvalItem
from pipelines.training.trained_rows import sft_sentence_ids

log = logging.getLogger(__name__)


def tagging_items(tagging: TaggingConfig, root: Path | str = ".") -> list[EvalItem]:
    split = split_examples(read_examples(tagging.data, root), tagging.split)
    return [EvalItem("tagging", example.id, example.question) for example in split.evaluation]


def kgc_items(kgc: KGCConfig, root: Path | str = ".") -> list[EvalItem]:
    root = Path(root)
    folder = root / kgc.outputs.generated_dir
    # the folder holds no saved dataset, so only generate_kgc's own SFT rows count as trained
    trained = sft_sentence_ids(kgc, root, folder) if (folder / "sft.jsonl").is_file() else set()
    items = []
    for entry in kgc.datasets:
        resolved = entry.resolved(root)
        if resolved is None or not resolved.evaluate:
            continue
        items += [EvalItem("kgc", s.id, s.text) for s in load_dataset(resolved, root).sentences if s.id not in trained]
    return items


def system_items(
    systems: Iterable[str], params_path: Path | str, root: Path | str = "."
) -> tuple[list[EvalItem], list[str]]:
    """``(items, notes)`` of the tagging and KGC evaluation sets named in ``systems``; a set whose data
    is missing is left out with a note (``evaluate`` cannot run on it either)."""
    readers = {"tagging": (TaggingConfig, tagging_items), "kgc": (KGCConfig, kgc_items)}
    items: list[EvalItem] = []
    notes: list[str] = []
    for system in (s for s in systems if s in readers):
        model, reader = readers[system]
        try:
            items += reader(load_section(system, model, params_path), root)
        except FileNotFoundError as exc:
            notes.append(f"{system}: {exc}")
            log.warning("make_datasets: %s evaluation items not checked: %s", system, exc)
    return items, notes
