"""The log-prob parity probe: before the first step, the trainer's scoring must equal the model's own head.

On one batch (the first training rows, collated by the trainer's own collator, no randomness) every rank
scores the trained tokens twice: through the trainer's path (``model(..., labels, fused_lm_head=True)``,
what SFT and DPO train on) and through the model's own forward (its logits, its head). It runs at
``on_train_begin``, after DeepSpeed has wrapped the model (ZeRO-3 gathers the layers as usual), in eval
mode under the trainer's autocast, and takes the largest difference over the ranks so all decide alike.

Outcome, recorded in the run's metrics and W&B config (``lm_head`` in ``metrics.json``):

- within ``tolerance`` (mean absolute difference of the per-token log-probabilities): training goes on;
- trl's fused head differs or fails: the switch moves to the model's own head (``fell_back``) and the probe
  runs again; if DPO reference log-probs were already precomputed with the fused head, it stops instead
  (they would be wrong) and says to set ``lm_head: own``;
- the model's own head differs from itself (a bug): it stops.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from transformers import TrainerCallback

from pipelines.training.lm_head import head_switch

log = logging.getLogger(__name__)

NOT_MODEL_INPUTS = {"labels", "completion_mask", "ref_chosen_logps", "ref_rejected_logps", "assistant_masks"}
# Mean |Δ log p| per trained token allowed between the two paths: fp32 differs only by summation order;
# half precision rounds the model's own logits to bf16/fp16 before the softmax (trl's fused head accumulates
# in fp32), about 2^-8 of a logit. Estimates for half precision until measured on a GPU.
DEFAULT_TOLERANCE = {"float32": 1e-3, "bfloat16": 5e-2, "float16": 5e-2}


class HeadParityError(RuntimeError):
    """The trainer's log-probabilities do not match the model's own head; the message says what to set."""


def probe_batch(trainer, rows: int) -> dict[str, Any]:
    """The first ``rows`` training rows collated as the trainer collates them, on the trainer's device."""
    dataset = trainer.train_dataset
    examples = [dataset[i] for i in range(min(rows, len(dataset)))]
    batch = trainer.data_collator(examples)
    return {k: v.to(trainer.accelerator.device) if hasattr(v, "to") else v for k, v in batch.items()}


def score_both_ways(model, batch: dict[str, Any], *, autocast) -> dict[str, float]:
    """Per-token log-probs of the labelled tokens through the trainer's path and through the own forward."""
    import torch

    labels = batch.get("labels")
    if labels is None:
        labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, -100)
    inputs = {k: v for k, v in batch.items() if k not in NOT_MODEL_INPUTS} | {"use_cache": False}
    with torch.no_grad(), autocast():
        trainer_log_probs = model(**inputs, labels=labels, fused_lm_head=True).log_probs
        logits = model(**inputs).logits
    targets = labels[:, 1:].to(logits.device)
    mask = targets != -100
    own = logits[:, :-1].float().log_softmax(-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    diff = (trainer_log_probs[:, -targets.shape[1] :].float() - own).abs()[mask]
    return {
        "mean_abs_diff": float(diff.mean()) if diff.numel() else 0.0,
        "max_abs_diff": float(diff.max()) if diff.numel() else 0.0,
        "tokens": int(mask.sum()),
        "mean_log_prob": float(own[mask].mean()) if diff.numel() else 0.0,
    }


class HeadParityProbe(TrainerCallback):
    """Runs the probe at ``on_train_begin`` on every rank; ``result`` holds what it found (see module docstring)."""

    def __init__(self, trainer, *, tolerance: float, family: str, rows: int = 2):
        self.trainer = trainer
        self.tolerance = tolerance
        self.family = family
        self.rows = rows
        self.result: dict[str, Any] | None = None

    def switches(self):
        found = [head_switch(self.trainer.model), head_switch(getattr(self.trainer, "ref_model", None) or object())]
        return [s for s in found if s is not None]

    def measure(self) -> dict[str, Any]:
        import torch

        trainer = self.trainer
        model = trainer.model
        was_training = model.training
        model.eval()
        try:
            scores = score_both_ways(model, probe_batch(trainer, self.rows), autocast=trainer.accelerator.autocast)
            failure = ""
        except Exception as exc:  # a head that cannot run at all (ChatGLM3 under trl's fused head) is a mismatch
            scores = {"mean_abs_diff": float("inf"), "max_abs_diff": float("inf"), "tokens": 0, "mean_log_prob": 0.0}
            failure = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            model.train(was_training)
        worst = torch.tensor([scores["mean_abs_diff"], scores["max_abs_diff"]], device=trainer.accelerator.device)
        worst = trainer.accelerator.gather(worst.unsqueeze(0)).reshape(-1, 2).max(dim=0).values
        scores["mean_abs_diff"], scores["max_abs_diff"] = float(worst[0]), float(worst[1])
        return scores | {"error": failure}

    def on_train_begin(self, args, state, control, **kwargs):
        started = time.perf_counter()
        switches = self.switches()
        if not switches:
            raise HeadParityError("the trainer's model has no edumas head switch: build it with build_trainer")
        initial = switches[0].path
        first = self.measure()
        result: dict[str, Any] = {"family": self.family, "initial_path": initial, "path": initial,
                                  "tolerance": self.tolerance, "fell_back": False}  # fmt: skip
        if first["mean_abs_diff"] <= self.tolerance:
            self.result = result | _public(first) | {"passed": True, "seconds": time.perf_counter() - started}
            self._log()
            return control
        if initial == "own":
            raise HeadParityError(
                f"the model's own head scored the probe batch differently twice (mean |Δ log p| "
                f"{first['mean_abs_diff']:.3g}, tolerance {self.tolerance:g}) {first['error']}; this is a bug in "
                "pipelines/training/lm_head.py or a nondeterministic model: report it with the model's folder"
            )
        result["fused_mean_abs_diff"] = None if first["error"] else first["mean_abs_diff"]  # no inf in JSON
        result["fused_error"] = first["error"]
        if "ref_chosen_logps" in (self.trainer.train_dataset.column_names or []):
            raise HeadParityError(
                f"trl's fused LM head disagrees with the model's own head for family {self.family} (mean |Δ log p| "
                f"{first['mean_abs_diff']:.3g} > {self.tolerance:g}{'; ' + first['error'] if first['error'] else ''}) "
                "and the DPO reference log-probs were precomputed with it; set lm_head: own in the train params "
                "and rerun"
            )
        for switch in switches:
            switch.path = "own"
        second = self.measure()
        if second["mean_abs_diff"] > self.tolerance:
            raise HeadParityError(
                f"neither trl's fused head nor the model's own head match the model's forward for family "
                f"{self.family} (own: mean |Δ log p| {second['mean_abs_diff']:.3g}); report it with the model folder"
            )
        log.warning(
            "trl's fused LM head disagrees with the model's own head for family %s (mean |Δ log p| %.3g%s): "
            "training on the model's own head; set lm_head: own to skip this check's fallback",
            self.family, first["mean_abs_diff"], f"; {first['error']}" if first["error"] else "",
        )  # fmt: skip
        self.result = result | _public(second) | {"path": "own", "fell_back": True, "passed": True,
                                                  "seconds": time.perf_counter() - started}  # fmt: skip
        self._log()
        return control

    def _log(self) -> None:
        r = self.result
        log.info(
            "lm-head probe: %s head, mean |Δ log p| %.2e (max %.2e) over %d tokens, tolerance %.0e (%.1f s)",
            r["path"], r["mean_abs_diff"], r["max_abs_diff"], r["tokens"], r["tolerance"], r["seconds"],
        )  # fmt: skip


def _public(scores: dict[str, Any]) -> dict[str, Any]:
    return {k: scores[k] for k in ("mean_abs_diff", "max_abs_diff", "tokens", "mean_log_prob")}
