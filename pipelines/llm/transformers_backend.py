"""Local chat model on transformers; concurrent requests share one ``generate`` call.

``TransformersBackend(spec)`` (spec: :class:`TransformersBackendConfig`) loads the causal LM and
its tokenizer from a folder on the first request (in a worker thread), optionally with a peft
LoRA adapter merged in. Each request is rendered with the tokenizer's own chat template and
queued; a :class:`MicroBatcher` gathers up to ``max_batch_size`` sequences (a request with
``n > 1`` is ``n`` sequences) waiting at most ``batch_wait_ms`` and runs ONE left-padded
``generate`` for them in a thread, or one per group of similar prompt length when that saves more
than ``split_batch_tokens`` padded prompt tokens per extra call (:func:`length_groups`; padding
costs a CPU prefill as much as real tokens). With ``scheduling: continuous`` a
:class:`pipelines.llm.continuous.ContinuousDecoder` decodes the rows instead: a row leaves when it
ends and a waiting request joins at the next step, with the same per-row rules as below (models with
a plain ``DynamicCache``; others fall back to batches). Requests in a batch may differ in every sampling setting:

- sampling is done per row by :class:`RowSampler` (temperature, top-p, and a generator seeded
  from the request's ``seed`` and choice index), so ``temperature == 0`` rows stay greedy and a
  seeded row draws from its own generator whatever it is batched with; through :class:`LLM` that
  seed is already the request's own (:mod:`pipelines.llm.seeding`: the role's seed with the
  request's key), so two prompts of one role never share a random stream;
- :class:`RowStopper` ends a row at its own ``max_tokens`` or when one of its stop strings appears;
  the text is cut before the stop string;
- attention runs with the key/value heads grouped also in padded batches
  (:mod:`pipelines.llm.grouped_attention`: sdpa's own arithmetic without copying the cache per head);
- on the CPU a ``generate`` shares the intra-op threads (``threads``, or torch's count at load)
  with the other models of the process generating at the same time
  (:mod:`pipelines.llm.cpu_threads`: alone it gets them all);
- a row whose request has ``json_schema`` is constrained by its own xgrammar matcher
  (:class:`pipelines.llm.grammar.GrammarMask`, applied before sampling): every token it picks keeps
  the text a prefix of JSON valid for the schema, and EOS is allowed only once that JSON is complete,
  so the reply is schema-valid JSON unless ``max_tokens`` cuts it (``finish_reason`` ``length``).
  Rows without a schema in the same batch are unconstrained. Grammars are compiled per schema once
  per backend (its tokenizer) in a worker thread before the request is queued; a schema that cannot
  be compiled fails that request only, with ``LLMError("json_schema cannot be compiled: ...")``.

Reproducibility: a row's logits inside a padded batch equal its logits alone up to float error
(the last bits depend on the batch's shape, the thread count and the CPU kernels torch picks), so
where two tokens are nearly tied a row's text can depend on what it was batched with. What holds:
the same requests in the same batch (same thread count, same machine) give the same text, seeded
sampling included; a request alone always decodes the same; ``max_batch_size: 1`` makes every
reply independent of concurrent requests; and the request cache makes a rerun return the recorded
replies. ``tests/llm/decoding_checks.py`` asserts the batched logits against the row alone.

Results: text without special tokens, ``finish_reason`` ``stop`` (EOS or stop string) or ``length``,
usage (prompt tokens without padding, counted once per request; generated tokens up to and
including EOS, all choices). Counters for tests and benchmarks: ``generate_calls``, ``batch_rows``,
``requests``, ``grammar_rejected`` (tokens a matcher refused; 0 in a correct run), and ``grammars``
(the :class:`SchemaGrammars` cache, once a schema was seen).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.llm.batching import MicroBatcher
from pipelines.llm.config import TransformersBackendConfig
from pipelines.llm.continuous import ContinuousDecoder, Row, draw_token, supports_continuous
from pipelines.llm.cpu_threads import GENERATES
from pipelines.llm.grammar import GrammarMask, SchemaGrammars
from pipelines.llm.grouped_attention import use_grouped_attention
from pipelines.llm.types import ChatResult, Choice, LLMError, Message, SamplingParams, Usage
from pipelines.models.chat_encoding import install_remote_code_shims, patch_left_only_pad
from pipelines.models.fingerprint import folder_fingerprint
from pipelines.models.load_lock import MODEL_LOADS
from pipelines.models.remote_code import load_remote_aware

log = logging.getLogger(__name__)


def backend_identity(spec: TransformersBackendConfig) -> str:
    """``transformers:<model>[+<adapter>]@<hash>``: the cache key of the model, adapter and dtype."""
    digest = hashlib.sha256(json.dumps({"dtype": spec.dtype, "remote": spec.trust_remote_code}).encode())
    for location in (spec.model, spec.adapter):
        if location:
            folder = Path(location)
            digest.update(folder_fingerprint(folder).encode() if folder.is_dir() else location.encode())
    name = spec.model + (f"+{spec.adapter}" if spec.adapter else "")
    return f"transformers:{name}@{digest.hexdigest()[:12]}"


def row_seed(seed: int, choice: int) -> int:
    """Generator seed of choice ``choice`` of a request seeded with ``seed``."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{choice}".encode()).digest()[:8], "little") >> 1


def eos_ids_of(model: Any, tokenizer: Any) -> set[int]:
    """The token ids that end a reply: the generation config's EOS ids and the tokenizer's."""
    eos = model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


def stop_window(stops: tuple[str, ...]) -> int:
    """How many of a row's last generated tokens are decoded to look for one of ``stops``."""
    return 2 * max((len(s) for s in stops), default=0) + 4


def chat_prompt_ids(tokenizer: Any, messages: list[Message], model: str) -> list[int]:
    """Token ids of ``messages`` rendered by the tokenizer's own chat template, ready to generate."""
    try:
        prompt_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    except Exception as exc:
        raise LLMError(f"chat template of {model} failed on these messages: {exc}") from exc
    if isinstance(prompt_ids, dict) or hasattr(prompt_ids, "input_ids"):
        prompt_ids = prompt_ids["input_ids"]
    return list(prompt_ids)


@dataclass
class _Request:
    """One chat call, rendered: its prompt token ids, sampling parameters and compiled grammar."""

    prompt_ids: list[int]
    params: SamplingParams
    grammar: Any = None  # xgrammar CompiledGrammar of params.json_schema, or None


class RowSampler:
    """Logits processor that samples each row with its own temperature, top-p and generator.

    Greedy rows (temperature 0) keep their logits; for a sampled row every token but the drawn
    one is masked, so the surrounding greedy ``generate`` picks the drawn token.
    """

    def __init__(self, rows: list[tuple[float, float, Any]]):
        self.rows = rows  # (temperature, top_p, torch.Generator | None) per row

    def __call__(self, input_ids, scores):
        sampled = [i for i, (temperature, _, _) in enumerate(self.rows) if temperature > 0]
        if not sampled:
            return scores
        out = scores.clone()
        for i in sampled:
            temperature, top_p, generator = self.rows[i]
            token = draw_token(scores[i], temperature, top_p, generator)
            out[i] = float("-inf")
            out[i, token] = 0.0
        return out


class RowStopper:
    """Stopping criterion ending each row at its own ``max_tokens`` or first stop string."""

    def __init__(self, tokenizer: Any, prompt_len: int, max_tokens: list[int], stops: list[tuple[str, ...]]):
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.stops = stops
        self.windows = [stop_window(stop) for stop in stops]
        self.ended_at: list[int | None] = [None] * len(max_tokens)

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        generated = input_ids.shape[1] - self.prompt_len
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool)
        for i in range(input_ids.shape[0]):
            if self.ended_at[i] is None:
                window = input_ids[i, max(self.prompt_len, input_ids.shape[1] - self.windows[i]) :]
                stopped = bool(self.stops[i]) and any(s in self.tokenizer.decode(window) for s in self.stops[i])
                if stopped or generated >= self.max_tokens[i]:
                    self.ended_at[i] = generated
            done[i] = self.ended_at[i] is not None
        return done.to(input_ids.device)


def length_groups(lengths: list[int], rows: list[int], overhead: int | None) -> list[list[int]]:
    """Indices of requests (prompt ``lengths``, ``rows`` sequences each) in groups of similar
    length, longest first, minimising the padded prompt area (sum of rows x longest prompt per
    group) plus ``overhead`` per group; ``overhead=None`` keeps one group. Left padding costs a
    CPU prefill as much as real tokens, so one long prompt in a batch of short ones multiplies
    its cost; each extra group costs its own decode steps, which ``overhead`` stands for."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if overhead is None or len(order) < 2:
        return [order] if order else []
    best, cut = [0.0] + [float("inf")] * len(order), [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        count = 0
        for start in range(end - 1, -1, -1):  # group order[start:end]; its longest is order[start]
            count += rows[order[start]]
            cost = best[start] + count * lengths[order[start]] + overhead
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], len(order)
    while end > 0:
        groups.append(order[cut[end] : end])
        end = cut[end]
    return groups[::-1]


class TransformersBackend:
    """A local causal LM behind the :class:`Backend` protocol, with dynamic micro-batching."""

    def __init__(self, spec: TransformersBackendConfig):
        self.spec = spec
        if spec.model.startswith(("/", ".", "models/")) and not Path(spec.model).is_dir():
            raise LLMError(f"model folder {spec.model} does not exist; run `dvc repro prepare_models` or fix the path")
        if spec.adapter and not Path(spec.adapter).is_dir():
            raise LLMError(f"adapter folder {spec.adapter} does not exist; train it first or fix `adapter`")
        self.identity = backend_identity(spec)
        self.generate_calls = 0
        self.batch_rows: list[int] = []
        self.requests = 0
        self.model: Any = None
        self.tokenizer: Any = None
        self.grammars: SchemaGrammars | None = None
        self.grammar_rejected = 0
        self.thread_budget = 1  # intra-op threads of a generate alone (set at load; shared while others run)
        self.decoder: ContinuousDecoder | None = None  # scheduling: continuous, once loaded
        self._load_lock = threading.Lock()
        self._grammar_lock = threading.Lock()
        self._batcher: MicroBatcher[_Request, ChatResult] = MicroBatcher(
            self._generate_batch,
            max_batch_size=spec.max_batch_size,
            max_wait_s=spec.batch_wait_ms / 1000.0,
            size_of=lambda request: request.params.n,
        )

    # -- loading -------------------------------------------------------------------------------
    def load(self) -> None:
        """Load tokenizer, model and adapter once (thread-safe); called by the first request."""
        with self._load_lock, MODEL_LOADS:  # one load per process at a time (see load_lock)
            if self.model is not None:
                return
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            spec = self.spec
            if spec.threads is not None:
                torch.set_num_threads(spec.threads)  # process-wide; fewer threads win on a busy CPU
            self.thread_budget = spec.threads or torch.get_num_threads()
            dtype = "auto" if spec.dtype == "auto" else getattr(torch, spec.dtype)
            tokenizer_source = spec.model
            if spec.adapter and (Path(spec.adapter) / "tokenizer_config.json").exists():
                tokenizer_source = spec.adapter  # a fine-tune may ship its own chat template
            if spec.trust_remote_code:  # names transformers 5 removed that remote code (MiniCPM) imports
                install_remote_code_shims()
            tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, trust_remote_code=spec.trust_remote_code)
            if spec.trust_remote_code:  # ChatGLM3's remote _pad takes no padding_side (it pads left, as here)
                patch_left_only_pad(tokenizer)
            if not tokenizer.chat_template:
                raise LLMError(f"tokenizer of {tokenizer_source} has no chat template; use an instruct model")
            tokenizer.padding_side = "left"
            if tokenizer.pad_token_id is None:
                tokenizer.pad_token = tokenizer.eos_token
            if spec.trust_remote_code:  # remote code adapted to transformers 5 as training loads it (MiniCPM's
                # rotary buffers recomputed, ChatGLM3's post_init, GenerationMixin on every load)
                model = load_remote_aware(spec.model, trust_remote_code=True, dtype=dtype)
            else:
                model = AutoModelForCausalLM.from_pretrained(spec.model, dtype=dtype)
            if spec.adapter:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, spec.adapter).merge_and_unload()
            model.to(spec.device).eval()
            if not spec.trust_remote_code and use_grouped_attention(model):
                log.debug("%s: sdpa attention with grouped key/value heads (no repeat_kv copy)", self.identity)
            self.tokenizer = tokenizer
            if spec.scheduling == "continuous":
                if spec.trust_remote_code or not supports_continuous(model):
                    log.warning("%s: its cache cannot be joined row by row; scheduling: batch", self.identity)
                else:
                    self.decoder = self._continuous_decoder(model, tokenizer)
            self.model = model
            log.info("loaded %s on %s (%s)", self.identity, spec.device, spec.dtype)

    def _continuous_decoder(self, model: Any, tokenizer: Any) -> ContinuousDecoder:
        eos_ids = eos_ids_of(model, tokenizer)
        cpu = model.device.type == "cpu"
        return ContinuousDecoder(
            model,
            tokenizer,
            eos_ids=eos_ids,
            max_rows=self.spec.max_batch_size,
            make_row=self._row,
            finish=lambda job: self._result(job.request, [self._finish(r.tokens, r.ended_at, r.request.params, eos_ids)
                                                          for r in job.rows]),
            groups=lambda requests: length_groups(
                [len(r.prompt_ids) for r in requests], [r.params.n for r in requests], self.spec.split_batch_tokens
            ),
            threads=lambda: GENERATES.threads(self.thread_budget) if cpu else contextlib.nullcontext(),
            wait_s=self.spec.batch_wait_ms / 1000.0,
        )

    def _row(self, request: _Request, choice: int) -> Row:
        """A continuous-decoding row of ``request``'s choice ``choice``, with its own matcher and generator."""
        matcher, vocab = None, 0
        if request.grammar is not None:
            import xgrammar as xgr

            matcher, vocab = xgr.GrammarMatcher(request.grammar), request.grammar.tokenizer_info.vocab_size
        window = stop_window(request.params.stop)
        return Row(request, choice, self._generator(request, choice), matcher, window, vocab=vocab)

    def _eos_ids(self) -> set[int]:
        return eos_ids_of(self.model, self.tokenizer)

    def compile_schema(self, schema: dict[str, Any]) -> Any:
        """Compiled grammar of ``schema`` for this model's tokenizer (cached); LLMError if it cannot compile."""
        if self.grammars is None:
            with self._grammar_lock:
                if self.grammars is None:
                    self.load()
                    head = self.model.get_output_embeddings()
                    vocab_size = head.weight.shape[0] if head is not None else self.model.config.vocab_size
                    self.grammars = SchemaGrammars(
                        self.tokenizer, vocab_size=vocab_size, stop_token_ids=self._eos_ids(), threads=2
                    )
        return self.grammars.compile(schema)

    # -- requests ------------------------------------------------------------------------------
    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResult:
        """Answer ``messages`` (rendered with the tokenizer's chat template), batched with concurrent calls."""
        if self.model is None:
            await asyncio.to_thread(self.load)
        grammar = None
        if params.json_schema is not None:
            grammar = await asyncio.to_thread(self.compile_schema, params.json_schema)
        prompt_ids = chat_prompt_ids(self.tokenizer, messages, self.spec.model)
        self.requests += 1
        request = _Request(list(prompt_ids), params, grammar)
        decoder = self.decoder
        if decoder is not None:
            future = decoder.submit(request)
            try:
                return await asyncio.wrap_future(future)
            except asyncio.CancelledError:  # the caller left: its rows stop decoding
                decoder.abandon(future)
                raise
        return await self._batcher.submit(request)

    def _generate_batch(self, requests: list[_Request]) -> list[ChatResult]:
        """The batch's requests in groups of similar prompt length (:func:`length_groups`), one
        ``generate`` per group, results in request order."""
        lengths = [len(r.prompt_ids) for r in requests]
        results: list[ChatResult | None] = [None] * len(requests)
        for group in length_groups(lengths, [r.params.n for r in requests], self.spec.split_batch_tokens):
            for index, result in zip(group, self._generate_group([requests[i] for i in group]), strict=True):
                results[index] = result
        return results  # type: ignore[return-value]

    def _generate_group(self, requests: list[_Request]) -> list[ChatResult]:
        """Run ONE ``generate`` for all rows of ``requests``; split the output back per request."""
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        rows = [(r, choice) for r in requests for choice in range(r.params.n)]
        pad_id = self.tokenizer.pad_token_id
        width = max(len(r.prompt_ids) for r in requests)
        input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (request, _) in enumerate(rows):
            ids = request.prompt_ids
            input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[i, width - len(ids) :] = 1
        sampler = RowSampler([(r.params.temperature, r.params.top_p, self._generator(r, c)) for r, c in rows])
        stopper = RowStopper(
            self.tokenizer, width, [r.params.max_tokens for r, _ in rows], [r.params.stop for r, _ in rows]
        )
        mask = GrammarMask([r.grammar for r, _ in rows], stopper.ended_at)
        processors = [mask, sampler] if mask else [sampler]  # mask first: sampling sees only allowed tokens
        eos_ids = self._eos_ids()
        device = self.model.device
        threads = GENERATES.threads(self.thread_budget) if device.type == "cpu" else contextlib.nullcontext()
        with threads, torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                max_new_tokens=max(r.params.max_tokens for r in requests),
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                logits_processor=LogitsProcessorList(processors),
                stopping_criteria=StoppingCriteriaList([stopper]),
                eos_token_id=sorted(eos_ids),
                pad_token_id=pad_id,
            )
        self.generate_calls += 1
        self.batch_rows.append(len(rows))
        self.grammar_rejected += mask.rejected
        generated = output[:, width:].cpu().tolist()
        choices = [self._finish(generated[i], stopper.ended_at[i], r.params, eos_ids) for i, (r, _) in enumerate(rows)]
        results, start = [], 0
        for request in requests:
            results.append(self._result(request, choices[start : start + request.params.n]))
            start += request.params.n
        return results

    def _result(self, request: _Request, choices: list[tuple[Choice, int]]) -> ChatResult:
        """``request``'s result from its choices and the tokens each really generated."""
        usage = Usage(prompt_tokens=len(request.prompt_ids), completion_tokens=sum(n for _, n in choices))
        return ChatResult(choices=[c for c, _ in choices], usage=usage, model=self.identity)

    def _generator(self, request: _Request, choice: int) -> Any:
        import torch

        if request.params.temperature == 0:
            return None
        seed = row_seed(request.params.seed, choice) if request.params.seed is not None else secrets.randbits(63)
        return torch.Generator().manual_seed(seed)

    def _finish(
        self, tokens: list[int], ended_at: int | None, params: SamplingParams, eos_ids: set[int]
    ) -> tuple[Choice, int]:
        """Text and finish reason of one row, and how many tokens it really generated."""
        eos_at = next((i for i, t in enumerate(tokens) if t in eos_ids), None)
        if eos_at is not None and (ended_at is None or eos_at < ended_at):
            kept, used, reason = tokens[:eos_at], eos_at + 1, "stop"
        else:
            used = ended_at if ended_at is not None else len(tokens)
            kept, reason = tokens[:used], "length"
        text = self.tokenizer.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        hits = [text.find(s) for s in params.stop if s and s in text]
        if hits:
            text, reason = text[: min(hits)], "stop"
        return Choice(text=text, finish_reason=reason), used

    async def close(self) -> None:
        """Stop the batching worker (or the continuous decoder) and release the model."""
        if self.decoder is not None:
            await asyncio.to_thread(self.decoder.close)
            self.decoder = None
        try:
            await self._batcher.close()
        except RuntimeError:
            pass
        self.model = None
        self.tokenizer = None
