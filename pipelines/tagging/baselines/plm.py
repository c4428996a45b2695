"""PLM fine-tuning baseline: a pre-trained encoder with a binary head over the pair
``[CLS] definition [SEP] question``, trained with the transformers ``Trainer`` on the held-out
demonstration pools, then applied to the evaluated pairs. Offline default: the packaged MiniLM.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from pydantic import Field

from pipelines.config import StrictModel
from pipelines.tagging.data import TaggingExample

log = logging.getLogger(__name__)


class PLMBaselineConfig(StrictModel):
    model: str = "models/base/all-minilm-l6-v2"
    epochs: float = Field(10.0, gt=0)
    batch_size: int = Field(8, ge=1)
    learning_rate: float = Field(5e-5, gt=0)
    max_length: int = Field(128, ge=16)
    seed: int = 0
    save_dir: str | None = None


def _encode(tokenizer, examples: list[TaggingExample], max_length: int) -> list[dict]:
    encoded = tokenizer(
        [e.definition for e in examples], [e.question for e in examples], truncation=True, max_length=max_length
    )
    return [{key: encoded[key][i] for key in encoded} | {"labels": examples[i].label} for i in range(len(examples))]


def train_and_predict(
    cfg: PLMBaselineConfig, train: list[TaggingExample], evaluation: list[TaggingExample]
) -> tuple[list[int], list[float]]:
    """Fine-tune on ``train``; returns predicted labels and P(label = 1) for ``evaluation``."""
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
        set_seed,
    )

    path = Path(cfg.model)
    if not path.exists():
        raise FileNotFoundError(f"{path}: encoder folder not found; run `dvc repro prepare_models` or set plm.model")
    set_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path), num_labels=2)
    collator = DataCollatorWithPadding(tokenizer)
    with tempfile.TemporaryDirectory(prefix="plm-") as work:
        args = TrainingArguments(
            output_dir=work,
            num_train_epochs=cfg.epochs,
            per_device_train_batch_size=cfg.batch_size,
            learning_rate=cfg.learning_rate,
            seed=cfg.seed,
            save_strategy="no",
            logging_strategy="no",
            report_to=[],
            use_cpu=not torch.cuda.is_available(),
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model, args=args, train_dataset=_encode(tokenizer, train, cfg.max_length), data_collator=collator
        )
        trainer.train()
    if cfg.save_dir:
        trainer.save_model(cfg.save_dir)
        tokenizer.save_pretrained(cfg.save_dir)
    model.eval()
    probs: list[float] = []
    with torch.no_grad():
        for start in range(0, len(evaluation), 32):
            batch = collator(
                [
                    {k: v for k, v in row.items() if k != "labels"}
                    for row in _encode(tokenizer, evaluation[start : start + 32], cfg.max_length)
                ]
            )
            batch = {k: v.to(model.device) for k, v in batch.items()}
            probs.extend(torch.softmax(model(**batch).logits, dim=-1)[:, 1].tolist())
    return [int(p >= 0.5) for p in probs], probs
