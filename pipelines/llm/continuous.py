"""Continuous batching for the local transformers backend: a row leaves the batch when it ends and a
waiting request joins at the next decoding step.

With one ``generate`` per batch every row waits for the batch's longest reply, and requests that
arrive meanwhile wait for the whole batch: in the default ``generate_kgc`` on a 2-core CPU, replies of
72 tokens on average (149 at most) each took about 200 s. :class:`ContinuousDecoder` runs its own
decoding loop in one thread instead, over one key/value cache for all live rows:

- waiting requests are admitted at a step boundary while fewer than ``max_rows`` rows are live (a
  request with ``n > 1`` is ``n`` rows; one larger than ``max_rows`` runs alone). Their prompts are
  prefilled in one left-padded forward per group of similar length (``length_groups``), and their
  caches are joined to the live rows' (the shorter side left-padded with masked zeros);
- every step forwards each live row's last token with its own position (its real tokens so far),
  then each row picks its next token: its grammar mask (:class:`GrammarMask`'s rules: EOS only
  once the JSON is complete), then greedy or its own seeded draw (:func:`draw_token`, the batch
  path's sampler), then its stop strings and ``max_tokens`` (:class:`RowStopper`'s rules);
- a row that ends is answered at once and dropped from the cache; cache columns no live row uses
  any more are trimmed.

A row's logits equal its logits alone up to float error, as in a batched ``generate`` (see
:mod:`pipelines.llm.transformers_backend` on reproducibility): a request alone decodes exactly as
alone in the batch path. Only models whose cache is transformers' plain ``DynamicCache`` (no
sliding window, no remote code) can run this way; :func:`supports_continuous` says which.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


def draw_token(scores: Any, temperature: float, top_p: float, generator: Any) -> int:
    """A token drawn from ``scores`` (one row's logits) at ``temperature`` with nucleus ``top_p``."""
    import torch

    probs = torch.softmax(scores.float().cpu() / temperature, dim=-1)
    ordered, order = probs.sort(descending=True)
    if top_p < 1.0:
        ordered = ordered * ((ordered.cumsum(0) - ordered) < top_p)
    return int(order[torch.multinomial(ordered, 1, generator=generator)])


def supports_continuous(model: Any) -> bool:
    """True when ``model`` runs on transformers' own layers with a plain ``DynamicCache``."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    try:
        cache = DynamicCache(config=model.config)
    except Exception:
        return False
    return all(type(layer) is DynamicLayer for layer in cache.layers)


@dataclass
class Row:
    """One sequence being decoded: a request's choice, its state and what it generated."""

    request: Any  # the backend's _Request
    choice: int
    generator: Any  # torch.Generator for a sampled row, None for greedy
    matcher: Any  # xgrammar GrammarMatcher, None when unconstrained (or no longer constrained)
    window: int  # generated tokens decoded to look for a stop string
    vocab: int = 0  # the grammar's vocabulary size (its token bitmask's width)
    tokens: list[int] = field(default_factory=list)
    ended_at: int | None = None  # tokens generated when a stop string or max_tokens ended it
    done: bool = False


@dataclass
class Job:
    """A queued request: its rows' results gather here until all of them are done."""

    request: Any
    future: concurrent.futures.Future
    rows: list[Row] = field(default_factory=list)
    abandoned: bool = False  # its caller stopped waiting: its rows leave at the next step, unanswered


class ContinuousDecoder:
    """Decodes the rows of many requests in one loop, joining and dropping rows between steps."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        eos_ids: set[int],
        max_rows: int,
        make_row: Callable[[Any, int], Row],
        finish: Callable[[Job], Any],
        groups: Callable[[list[Any]], list[list[int]]],
        threads: Callable[[], Any],
        wait_s: float,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.eos_ids = eos_ids
        self.max_rows = max_rows
        self.make_row = make_row
        self.finish = finish
        self.groups = groups
        self.threads = threads
        self.wait_s = wait_s
        self.pad_id = tokenizer.pad_token_id
        self.prefills = 0
        self.prefill_rows: list[int] = []
        self.steps = 0
        self.grammar_rejected = 0
        self._waiting: deque[Job] = deque()
        self._abandoned: set[concurrent.futures.Future] = set()  # running requests whose callers left
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        # the live batch: its rows, their cache, attention mask and the token each forwards next
        self._rows: list[tuple[Job, Row]] = []
        self._cache: Any = None
        self._mask: Any = None
        self._next: list[int] = []

    # -- the caller's side ----------------------------------------------------------------------
    def submit(self, request: Any) -> concurrent.futures.Future:
        """Queue ``request``; the future gets the backend's result once all its rows are done."""
        job = Job(request, concurrent.futures.Future())
        with self._wake:
            if self._closed:
                raise RuntimeError("the decoder is closed")
            self._waiting.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="continuous-decoder", daemon=True)
                self._thread.start()
            self._wake.notify()
        return job.future

    def abandon(self, future: concurrent.futures.Future) -> None:
        """The caller of ``future`` stopped waiting (its task was cancelled): a waiting request is
        cancelled; a running one's rows leave the batch before the next step instead of decoding to
        their end (its future then raises ``CancelledError``)."""
        if future.cancel() or future.done():
            return
        with self._wake:
            self._abandoned.add(future)

    def close(self) -> None:
        """Stop the loop after its current step; unanswered requests are cancelled."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # -- the loop -------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._waiting and not self._rows and not self._closed:
                    self._wake.wait()
                if self._closed:
                    break
                if not self._rows and self.wait_s > 0:  # idle: let a burst of requests arrive together
                    self._wake.wait_for(lambda: self._closed or self._waiting_rows() >= self.max_rows, self.wait_s)
            try:
                with self.threads():
                    self._run_while_busy()
            except Exception as exc:  # every request in the batch sees the failure; the loop goes on
                log.exception("continuous decoding failed")
                for job in {id(job): job for job, _ in self._rows}.values():
                    if not job.future.done():
                        job.future.set_exception(exc)
                self._rows, self._cache, self._mask, self._next = [], None, None, []
        for job in list(self._waiting) + [job for job, _ in self._rows]:
            if not job.future.cancel() and not job.future.done():  # a running one cannot be cancelled
                job.future.set_exception(RuntimeError("the local model was closed before this request ended"))

    def _waiting_rows(self) -> int:
        return sum(job.request.params.n for job in self._waiting)

    def _run_while_busy(self) -> None:
        """Admit and step until no row is live and nothing waits (on one thread-count setting)."""
        while not self._closed:
            admitted = self._take_admissible()
            if admitted:
                self._admit(admitted)
            self._drop_abandoned()
            if not self._rows:
                return
            self._step()

    def _drop_abandoned(self) -> None:
        with self._wake:
            abandoned, self._abandoned = self._abandoned, set()
        if not abandoned:
            return
        for job, row in self._rows:
            if job.future in abandoned:
                job.abandoned = row.done = True
        self._drop_finished()

    def _take_admissible(self) -> list[Job]:
        with self._wake:
            live = len(self._rows)
            jobs = []
            while self._waiting:
                size = self._waiting[0].request.params.n
                if live + size > self.max_rows and (live or jobs):
                    break
                job = self._waiting.popleft()
                if job.future.set_running_or_notify_cancel():
                    jobs.append(job)
                    live += size
        return jobs

    # -- admission: prefill the new rows and join their cache to the live rows' -------------------
    def _admit(self, jobs: list[Job]) -> None:
        try:
            for group in self.groups([job.request for job in jobs]):
                rows = []
                for index in group:
                    job = jobs[index]
                    job.rows = [self.make_row(job.request, choice) for choice in range(job.request.params.n)]
                    rows.extend((job, row) for row in job.rows)
                self._prefill(rows)
        except Exception as exc:  # the admitted requests not yet live see the failure too
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(exc)
            raise

    def _prefill(self, rows: list[tuple[Job, Row]]) -> None:
        import torch

        width = max(len(job.request.prompt_ids) for job, _ in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (job, _) in enumerate(rows):
            ids = job.request.prompt_ids
            input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            mask[i, width - len(ids) :] = 1
        device = self.model.device
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            out = self.model(
                input_ids=input_ids.to(device),
                attention_mask=mask.to(device),
                position_ids=positions.to(device),
                use_cache=True,
                logits_to_keep=1,
            )
        self.prefills += 1
        self.prefill_rows.append(len(rows))
        first = self._pick(out.logits[:, -1, :], [row for _, row in rows])
        self._join(rows, out.past_key_values, mask.to(device), first)

    def _join(self, rows: list[tuple[Job, Row]], cache: Any, mask: Any, first: list[int]) -> None:
        import torch

        if self._cache is None:
            self._rows, self._cache, self._mask, self._next = list(rows), cache, mask, list(first)
        else:
            live, new = self._mask.shape[1], mask.shape[1]
            width = max(live, new)
            for old_layer, new_layer in zip(self._cache.layers, cache.layers, strict=True):
                for name in ("keys", "values"):
                    old, added = getattr(old_layer, name), getattr(new_layer, name)
                    setattr(old_layer, name, torch.cat([_left_pad(old, width, dim=2), _left_pad(added, width, dim=2)]))
            self._mask = torch.cat([_left_pad(self._mask, width, dim=1), _left_pad(mask, width, dim=1)])
            self._rows.extend(rows)
            self._next.extend(first)
        self._drop_finished()

    # -- one decoding step ----------------------------------------------------------------------
    def _step(self) -> None:
        import torch

        device = self.model.device
        self._mask = torch.cat([self._mask, torch.ones((len(self._rows), 1), dtype=self._mask.dtype, device=device)], 1)
        positions = self._mask.sum(-1, keepdim=True) - 1
        length = self._cache.get_seq_length()
        with torch.inference_mode():
            out = self.model(
                input_ids=torch.tensor(self._next, dtype=torch.long, device=device)[:, None],
                attention_mask=self._mask,
                position_ids=positions,
                past_key_values=self._cache,
                cache_position=torch.tensor([length], dtype=torch.long, device=device),
                use_cache=True,
            )
        self.steps += 1
        self._next = self._pick(out.logits[:, -1, :], [row for _, row in self._rows])
        self._drop_finished()

    def _pick(self, logits: Any, rows: list[Row]) -> list[int]:
        """Each row's next token (grammar, then greedy or its draw), appended; ends rows that stop."""
        import torch

        scores = logits.to(dtype=torch.float32).clone()
        live = [i for i, row in enumerate(rows) if row.matcher is not None and not row.matcher.is_terminated()]
        if live:
            import xgrammar as xgr

            vocab = rows[live[0]].vocab
            bitmask = xgr.allocate_token_bitmask(len(rows), vocab)
            for i in live:
                rows[i].matcher.fill_next_token_bitmask(bitmask, i)
            xgr.apply_token_bitmask_inplace(scores, bitmask.to(scores.device), vocab_size=vocab, indices=live)
        picked = []
        for i, row in enumerate(rows):
            params = row.request.params
            if params.temperature > 0:
                token = draw_token(scores[i], params.temperature, params.top_p, row.generator)
            else:
                token = int(scores[i].argmax())
            self._record(row, token)
            picked.append(token)
        return picked

    def _record(self, row: Row, token: int) -> None:
        row.tokens.append(token)
        if row.matcher is not None and not row.matcher.is_terminated() and not row.matcher.accept_token(token):
            self.grammar_rejected += 1
            row.matcher = None
            log.warning("grammar matcher refused token %d; row left unconstrained", token)
        if token in self.eos_ids:
            row.done = True
            return
        params = row.request.params
        stops = params.stop
        generated = len(row.tokens)
        if stops:
            text = self.tokenizer.decode(row.tokens[-row.window :])
            if any(s in text for s in stops):
                row.ended_at, row.done = generated, True
                return
        if generated >= params.max_tokens:
            row.ended_at, row.done = generated, True

    def _drop_finished(self) -> None:
        """Answer the jobs whose rows are all done; keep only live rows in the cache and mask."""
        keep = [i for i, (_, row) in enumerate(self._rows) if not row.done]
        for job in {id(job): job for job, row in self._rows if row.done}.values():
            if job.future.done() or not all(row.done for row in job.rows):
                continue
            if job.abandoned:
                job.future.set_exception(concurrent.futures.CancelledError())
            else:
                job.future.set_result(self.finish(job))
        if len(keep) == len(self._rows):
            return
        if not keep:
            self._rows, self._cache, self._mask, self._next = [], None, None, []
            return
        import torch

        index = torch.tensor(keep, dtype=torch.long, device=self._mask.device)
        mask = self._mask.index_select(0, index)
        start = int((mask.sum(0) > 0).nonzero()[0])  # leading columns no live row attends to
        self._mask = mask[:, start:]
        for layer in self._cache.layers:
            layer.keys = layer.keys.index_select(0, index)[:, :, start:]
            layer.values = layer.values.index_select(0, index)[:, :, start:]
        self._rows = [self._rows[i] for i in keep]
        self._next = [self._next[i] for i in keep]


def _left_pad(tensor: Any, width: int, *, dim: int) -> Any:
    """``tensor`` left-padded with zeros to ``width`` along ``dim``."""
    import torch

    missing = width - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([torch.zeros(shape, dtype=tensor.dtype, device=tensor.device), tensor], dim=dim)
