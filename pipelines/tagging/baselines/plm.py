"""PLM fine-tuning baseline: a pre-trained encoder with a binary head over the pair
``[CLS] definition [SEP] question``, trained with the transformers ``Trainer`` on the generation
split, then applied to the evaluated pairs. Offline default: the packaged MiniLM.

As in the paper, the learning rate is tuned over ``learning_rates`` (1e-3 .. 1e-5): each is
trained on the generation split less a stratified validation part (``validation_share``), the
one with the best validation accuracy (then log loss) wins, and with ``refit`` the encoder is
trained again on the whole generation split at that rate. A split too small for a validation
part takes the first rate and says so.
"""

from __future__ import annotations

import logging
import math
import random
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field

from pipelines.config import StrictModel
from pipelines.stage import StageError
from pipelines.tagging.data import TaggingExample

log = logging.getLogger(__name__)


class PLMBaselineConfig(StrictModel):
    model: str = Field(
        "models/base/all-minilm-l6-v2",
        description="encoder + new binary head (e.g. bert-base-chinese for real runs)",
    )
    epochs: float = Field(3.0, gt=0, description="training epochs on the generation split")
    batch_size: int = Field(8, ge=1, description="per-device batch size")
    learning_rates: list[float] = Field(
        default_factory=lambda: [1e-3, 1e-4, 1e-5], min_length=1,
        description="AdamW learning rates swept (the paper: 1e-3 to 1e-5); best validation accuracy wins",
    )
    validation_share: float = Field(
        0.25, gt=0.0, lt=1.0,
        description="share of the generation split (per label) held out to pick the learning rate",
    )
    refit: bool = Field(
        True,
        description="true: retrain on the whole generation split at the chosen rate (one more training)",
    )
    max_length: int = Field(128, ge=16, description="tokens of \"definition [SEP] question\"")
    seed: int = Field(0, description="training seed")
    save_dir: str | None = Field(None, description="keep the fine-tuned encoder here (null: discard)")


def validation_split(
    rows: list[TaggingExample], share: float, *, seed: int = 0
) -> tuple[list[TaggingExample], list[TaggingExample]]:
    """(train, validation): ``share`` of each label held out (at least one per label present);
    no validation part when a label has fewer than two rows to give."""
    rng = random.Random(seed)
    train, val = [], []
    for label in (1, 0):
        group = [r for r in rows if r.label == label]
        if not group:
            continue
        if len(group) < 2:
            return list(rows), []
        rng.shuffle(group)
        n = max(1, round(share * len(group)))
        val += group[:n]
        train += group[n:]
    order = {r.id: i for i, r in enumerate(rows)}
    return sorted(train, key=lambda r: order[r.id]), sorted(val, key=lambda r: order[r.id])


def _encode(tokenizer, examples: list[TaggingExample], max_length: int) -> list[dict]:
    encoded = tokenizer(
        [e.definition for e in examples], [e.question for e in examples], truncation=True, max_length=max_length
    )
    return [{key: encoded[key][i] for key in encoded} | {"labels": examples[i].label} for i in range(len(examples))]


def _train(cfg: PLMBaselineConfig, path: Path, rows: list[TaggingExample], learning_rate: float):
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
        set_seed,
    )

    set_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path), num_labels=2)
    collator = DataCollatorWithPadding(tokenizer)
    with tempfile.TemporaryDirectory(prefix="plm-") as work:
        args = TrainingArguments(
            output_dir=work,
            num_train_epochs=cfg.epochs,
            per_device_train_batch_size=cfg.batch_size,
            learning_rate=learning_rate,
            seed=cfg.seed,
            save_strategy="no",
            logging_strategy="no",
            report_to=[],
            use_cpu=not torch.cuda.is_available(),
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model, args=args, train_dataset=_encode(tokenizer, rows, cfg.max_length), data_collator=collator
        )
        trainer.train()
    model.eval()
    return trainer, tokenizer, model, collator


def _probabilities(cfg, tokenizer, model, collator, rows: list[TaggingExample]) -> list[float]:
    import torch

    probs: list[float] = []
    with torch.no_grad():
        for start in range(0, len(rows), 32):
            batch = collator(
                [
                    {k: v for k, v in row.items() if k != "labels"}
                    for row in _encode(tokenizer, rows[start : start + 32], cfg.max_length)
                ]
            )
            batch = {k: v.to(model.device) for k, v in batch.items()}
            probs.extend(torch.softmax(model(**batch).logits, dim=-1)[:, 1].tolist())
    return probs


def train_and_predict(
    cfg: PLMBaselineConfig, train: list[TaggingExample], evaluation: list[TaggingExample]
) -> tuple[list[int], list[float], dict[str, Any]]:
    """Tune the learning rate, fine-tune on ``train`` (the generation split); returns predicted labels,
    P(label = 1) for ``evaluation`` and ``{"learning_rate", "sweep": {lr: {accuracy, log_loss}},
    "train_rows", "validation_rows", "refit"}``."""
    path = Path(cfg.model)
    if not path.exists():
        raise FileNotFoundError(f"{path}: encoder folder not found; run `dvc repro prepare_models` or set plm.model")
    if not train:
        raise StageError(
            "the PLM baseline has no training rows: the generation split is empty; lower split.evaluation_share"
        )
    fit, val = validation_split(train, cfg.validation_share, seed=cfg.seed)
    sweep: dict[str, dict[str, float]] = {}
    best, best_key, kept = cfg.learning_rates[0], None, None
    if val and len(cfg.learning_rates) > 1:
        for lr in cfg.learning_rates:
            trained = _train(cfg, path, fit, lr)
            probs = _probabilities(cfg, *trained[1:], val)
            accuracy = sum(int(p >= 0.5) == r.label for p, r in zip(probs, val, strict=True)) / len(val)
            loss = -sum(math.log(max(1e-9, p if r.label else 1 - p)) for p, r in zip(probs, val, strict=True)) / len(
                val
            )
            sweep[f"{lr:g}"] = {"accuracy": accuracy, "log_loss": loss}
            if best_key is None or (accuracy, -loss) > best_key:
                best, best_key, kept = lr, (accuracy, -loss), trained
        log.info("PLM learning-rate sweep on %d validation rows: %s; chosen %g", len(val), sweep, best)
    else:
        log.info("PLM baseline: no learning-rate sweep (%d validation rows); learning rate %g", len(val), best)
    refit = cfg.refit or kept is None
    trainer, tokenizer, model, collator = _train(cfg, path, train, best) if refit else kept
    if cfg.save_dir:
        trainer.save_model(cfg.save_dir)
        tokenizer.save_pretrained(cfg.save_dir)
    probs = _probabilities(cfg, tokenizer, model, collator, evaluation)
    info = {
        "learning_rate": best,
        "sweep": sweep,
        "train_rows": len(fit) if sweep else len(train),
        "validation_rows": len(val) if sweep else 0,
        "refit": refit,
    }
    return [int(p >= 0.5) for p in probs], probs, info
