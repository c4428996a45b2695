"""The log-prob parity probe: before the first step, the trainer's scoring must equal the model's plain forward.

On the first training rows (up to ``rows``, 8 by default, collated by the trainer's own collator in micro-batches
of the training shape, no randomness) every rank scores the trained tokens twice: through the trainer's path
(``model(..., labels, fused_lm_head=True)``, what SFT and DPO train on, through edumas' head switch) and through
the model's plain forward as it was before trl patched it (:attr:`HeadSwitch.plain_forward`: no trl head, no
switch), whose log-probabilities the probe computes itself from the logits. It runs at ``on_train_begin``, after
DeepSpeed has wrapped the model (ZeRO-3 gathers the layers as usual), in eval mode under the trainer's autocast,
and takes the largest differences over the ranks so all decide alike.

Outcome, recorded in the run's metrics and W&B config (``lm_head`` in ``metrics.json``: mean and max |Δ log p|,
tokens and rows scored):

- the mean absolute difference of the per-token log-probabilities within ``tolerance`` and the largest one
  within ``MAX_TOLERANCE_FACTOR`` times it: training goes on;
- trl's fused head differs or fails: the switch moves to the model's own head (``fell_back``) and the probe
  runs again; if DPO reference log-probs were already precomputed with the fused head, it stops instead
  (they would be wrong) and says to set ``lm_head: own``;
- the model's own head, through the trainer, differs from the plain forward (a bug): it stops.
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
# The largest |Δ log p| of any one token allowed, as a multiple of the mean's tolerance (a single token far off
# means a misaligned or wrongly scaled head even when the mean is small).
MAX_TOLERANCE_FACTOR = 20


class HeadParityError(RuntimeError):
    """The trainer's log-probabilities do not match the model's own head; the message says what to set."""


def probe_batches(trainer, rows: int, batch_size: int) -> list[dict[str, Any]]:
    """The first ``rows`` training rows collated as the trainer collates them, in micro-batches of
    ``batch_size`` (the training shape), on the trainer's device."""
    dataset = trainer.train_dataset
    examples = [dataset[i] for i in range(min(rows, len(dataset)))]
    batches = [trainer.data_collator(examples[i : i + batch_size]) for i in range(0, len(examples), batch_size)]
    device = trainer.accelerator.device
    return [{k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items()} for batch in batches]


def token_differences(model, plain_forward, batch: dict[str, Any], *, autocast):
    """``(|Δ log p| per labelled token, own log p per labelled token)``: the trainer's path
    (``model(..., labels, fused_lm_head=True)``, what SFT and DPO train on) against the model's plain forward
    from before trl patched it, its log-probs computed here from its logits."""
    import torch

    labels = batch.get("labels")
    if labels is None:
        labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, -100)
    inputs = {k: v for k, v in batch.items() if k not in NOT_MODEL_INPUTS} | {"use_cache": False}
    with torch.no_grad(), autocast():
        trainer_log_probs = model(**inputs, labels=labels, fused_lm_head=True).log_probs
        result = plain_forward(**inputs)
    logits = result.logits if hasattr(result, "logits") else result[0]
    targets = labels[:, 1:].to(logits.device)
    mask = targets != -100
    own = logits[:, :-1].float().log_softmax(-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    diff = (trainer_log_probs[:, -targets.shape[1] :].float() - own).abs()[mask]
    return diff, own[mask]


def score_both_ways(model, plain_forward, batches: list[dict[str, Any]], *, autocast) -> dict[str, float]:
    """Mean and largest |Δ log p| over the labelled tokens of ``batches`` (:func:`token_differences`)."""
    import torch

    pairs = [token_differences(model, plain_forward, batch, autocast=autocast) for batch in batches]
    diff = torch.cat([d for d, _ in pairs]) if pairs else torch.zeros(0)
    own = torch.cat([o for _, o in pairs]) if pairs else torch.zeros(0)
    return {
        "mean_abs_diff": float(diff.mean()) if diff.numel() else 0.0,
        "max_abs_diff": float(diff.max()) if diff.numel() else 0.0,
        "tokens": int(diff.numel()),
        "mean_log_prob": float(own.mean()) if own.numel() else 0.0,
    }


class HeadParityProbe(TrainerCallback):
    """Runs the probe at ``on_train_begin`` on every rank; ``result`` holds what it found (see module docstring)."""

    def __init__(self, trainer, *, tolerance: float, family: str, rows: int = 8, batch_size: int = 1):
        self.trainer = trainer
        self.tolerance = tolerance
        self.max_tolerance = MAX_TOLERANCE_FACTOR * tolerance
        self.family = family
        self.rows = rows
        self.batch_size = batch_size
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
            batches = probe_batches(trainer, self.rows, self.batch_size)
            plain = self.switches()[0].plain_forward
            scores = score_both_ways(model, plain, batches, autocast=trainer.accelerator.autocast)
            scores["rows"] = min(self.rows, len(trainer.train_dataset))  # training rows (DPO: pairs)
            failure = ""
        except Exception as exc:  # a head that cannot run at all (ChatGLM3 under trl's fused head) is a mismatch
            scores = {"mean_abs_diff": float("inf"), "max_abs_diff": float("inf"), "tokens": 0, "rows": 0,
                      "mean_log_prob": 0.0}  # fmt: skip
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
                                  "tolerance": self.tolerance, "max_tolerance": self.max_tolerance,
                                  "fell_back": False}  # fmt: skip
        if self.within(first):
            self.result = result | _public(first) | {"passed": True, "seconds": time.perf_counter() - started}
            self._log()
            return control
        if initial == "own":
            raise HeadParityError(
                f"the model's own head, through the trainer, scored the probe rows differently from the model's "
                f"plain forward (mean |Δ log p| {first['mean_abs_diff']:.3g}, max {first['max_abs_diff']:.3g}; "
                f"tolerance {self.tolerance:g}, max {self.max_tolerance:g}) {first['error']}; this is a bug in "
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
        if not self.within(second):
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

    def within(self, scores: dict[str, Any]) -> bool:
        return scores["mean_abs_diff"] <= self.tolerance and scores["max_abs_diff"] <= self.max_tolerance

    def _log(self) -> None:
        r = self.result
        log.info(
            "lm-head probe: %s head, mean |Δ log p| %.2e (max %.2e) over %d tokens of %d rows, tolerance %.0e (%.1f s)",
            r["path"], r["mean_abs_diff"], r["max_abs_diff"], r["tokens"], r["rows"], r["tolerance"], r["seconds"],
        )  # fmt: skip


def _public(scores: dict[str, Any]) -> dict[str, Any]:
    return {k: scores[k] for k in ("mean_abs_diff", "max_abs_diff", "tokens", "rows", "mean_log_prob")}
