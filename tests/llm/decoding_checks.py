"""What the transformers backend guarantees about a row decoded inside a padded, mixed batch.

A row's logits in a batch equal its logits alone up to float error: the last bits of a padded,
batched matmul depend on the batch's shape, the thread count and the CPU kernels torch picks, so
on a model whose logits are nearly tied (a tiny model with random weights) the argmax can flip and
the batched text can differ from the text alone. These checks assert the real property instead of
text equality:

- :func:`recorded_generate` records every ``generate`` call of a backend with the requests it ran
  (their sampling parameters and compiled grammars) and the raw logits of each step (a copy taken
  by a first logits processor, before the grammar mask, which works in place, and the row sampler);
- :func:`assert_rows_decode_as_alone` re-runs each recorded row alone (its prompt without padding,
  its generated tokens teacher-forced, no batch) and asserts that the batched logits equal the
  alone logits within ``atol``, and that every greedy token was the best token the row's own
  grammar allowed, alone, within the same tolerance.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class GenerateCall:
    requests: list[Any]  # the backend's requests of this call, in row order (n rows each)
    input_ids: torch.Tensor  # (rows, width), left-padded
    attention_mask: torch.Tensor
    sequences: torch.Tensor  # (rows, width + steps)
    logits: list[torch.Tensor]  # per step: (rows, vocab), raw

    @property
    def width(self) -> int:
        return self.input_ids.shape[1]


@contextmanager
def recorded_generate(backend: Any):
    """Record the backend's ``generate`` calls (list of :class:`GenerateCall`) while inside."""
    model = backend.model
    original, original_group = model.generate, backend._generate_group
    calls: list[GenerateCall] = []
    running: list[list[Any]] = []  # the group whose generate runs (one at a time, in the batch thread)

    def generate_group(requests):
        running.append(list(requests))
        try:
            return original_group(requests)
        finally:
            running.pop()

    def generate(**kwargs):
        steps: list[torch.Tensor] = []

        def record(input_ids, scores):
            steps.append(scores.detach().float().cpu().clone())
            return scores

        kwargs["logits_processor"].insert(0, record)
        sequences = original(**kwargs)
        calls.append(
            GenerateCall(
                requests=running[-1],
                input_ids=kwargs["input_ids"].cpu(),
                attention_mask=kwargs["attention_mask"].cpu(),
                sequences=sequences.cpu(),
                logits=steps,
            )
        )
        return sequences

    model.generate, backend._generate_group = generate, generate_group
    try:
        yield calls
    finally:
        del model.generate, backend._generate_group  # the classes' own methods again


def _row_tokens(call: GenerateCall, row: int, max_tokens: int, eos_ids: set[int]) -> list[int]:
    generated = call.sequences[row, call.width :].tolist()[:max_tokens]
    end = next((i + 1 for i, token in enumerate(generated) if token in eos_ids), len(generated))
    return generated[:end]


def _alone_logits(model: Any, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """Logits of each of ``tokens`` given what precedes it, for this row alone (no padding)."""
    ids = torch.tensor([prompt + tokens[:-1]], dtype=torch.long, device=model.device)
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float().cpu()
    return logits[len(prompt) - 1 : len(prompt) - 1 + len(tokens)]


def _allowed(matcher: Any, vocab_size: int) -> torch.Tensor:
    import xgrammar as xgr

    bitmask = xgr.allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    scores = torch.zeros((1, vocab_size))
    xgr.apply_token_bitmask_inplace(scores, bitmask)
    return scores[0] == 0


def assert_rows_decode_as_alone(backend: Any, calls: list[GenerateCall], *, atol: float = 1e-3) -> int:
    """Assert every row of every call decoded as it decodes alone, within ``atol``; returns the
    number of (row, step) logit vectors compared (the tokens the rows generated).

    A greedy row (temperature 0, or a nucleus so small it keeps one token) must also have picked,
    at each step, a token within ``2 * atol`` of the best token its own grammar allowed alone."""
    import xgrammar as xgr

    model, eos_ids = backend.model, backend._eos_ids()
    compared = 0
    for call in calls:
        rows = [request for request in call.requests for _ in range(request.params.n)]
        assert len(rows) == call.input_ids.shape[0]
        for row, request in enumerate(rows):
            params = request.params
            prompt = call.input_ids[row][call.attention_mask[row].bool()].tolist()
            assert prompt == request.prompt_ids
            tokens = _row_tokens(call, row, params.max_tokens, eos_ids)
            assert tokens, f"row {row} generated nothing"
            alone = _alone_logits(model, prompt, tokens)
            batched = torch.stack([call.logits[step][row] for step in range(len(tokens))])
            torch.testing.assert_close(batched, alone, atol=atol, rtol=0, msg=lambda m, r=row: f"row {r}: {m}")
            compared += len(tokens)
            if params.temperature > 0 and params.top_p > 1e-6:
                continue  # sampled: its draws are the row sampler's (tested on fixed logits)
            matcher = xgr.GrammarMatcher(request.grammar) if request.grammar is not None else None
            for step, token in enumerate(tokens):
                scores = alone[step]
                if matcher is not None:
                    scores = scores.masked_fill(~_allowed(matcher, scores.shape[0]), float("-inf"))
                gap = float(scores.max() - scores[token])
                assert gap <= 2 * atol, f"row {row} step {step}: token {token} is {gap:.4g} below the best alone"
                if matcher is not None:
                    assert matcher.accept_token(token), f"row {row} step {step}: token {token} outside its grammar"
    return compared
