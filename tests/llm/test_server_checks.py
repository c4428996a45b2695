"""A real third-party server's failure modes (issues 36.10 and 37): the preflight's chat and schema
checks, a model list the server does not answer, the circuit breaker on a dead server, and the
adaptive limit on an overloaded one."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import pytest
from aiohttp import web

from pipelines.llm.config import OpenAIBackendConfig
from pipelines.llm.loopback import LoopbackServer, plain_echo, smallest_instance
from pipelines.llm.openai_backend import OpenAIBackend
from pipelines.llm.ratelimit import AdaptiveLimit
from pipelines.llm.types import LLMError, SamplingParams

HELLO = [{"role": "user", "content": "hello"}]


def backend(urls: list[str], **overrides) -> OpenAIBackend:
    spec = {"kind": "openai", "model": "m", "base_urls": urls, "api_key_env": None, "timeout_s": 2.0} | overrides
    return OpenAIBackend(OpenAIBackendConfig(**spec), where="llm.default")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def preflight(b: OpenAIBackend, **kwargs) -> str | None:
    try:
        await b.preflight(**kwargs)
        return None
    except LLMError as exc:
        return str(exc)
    finally:
        await b.close()


def test_a_server_that_ignores_the_schema_is_refused_before_the_run():
    async def main():
        async with LoopbackServer(reply=plain_echo) as ignoring, LoopbackServer() as guided:
            return (
                await preflight(backend([ignoring.url])),
                await preflight(backend([ignoring.url]), schema=False),  # a text-mode run sends no schema
                await preflight(backend([ignoring.url], structured_output="none")),
                await preflight(backend([guided.url])),
                ignoring.url,
            )

    refused, text_mode, prompt_only, guided, url = asyncio.run(main())
    assert refused is not None and url in refused and "answered outside the JSON schema" in refused
    assert "guided decoding" in refused and "llm.default.structured_output: none" in refused
    assert "output_mode: text" in refused
    assert text_mode is None and prompt_only is None and guided is None


class UnlistedServer(LoopbackServer):
    """`transformers serve`: /v1/models answers HTTP 500, chat refuses any name but the pinned one."""

    async def _models(self, request: web.Request) -> web.Response:
        return web.Response(status=500, text="Internal Server Error")


def test_a_model_list_that_fails_is_a_warning_and_the_chat_call_catches_a_wrong_name(caplog):
    async def main():
        async with UnlistedServer(models=["/models/SmolLM2"]) as srv:
            wrong = await preflight(backend([srv.url], model="HuggingFaceTB/SmolLM2-135M-Instruct"))
            right = await preflight(backend([srv.url], model="/models/SmolLM2"))
            return wrong, right, srv.url

    with caplog.at_level(logging.WARNING, logger="pipelines.llm.openai_backend"):
        wrong, right, url = asyncio.run(main())
    assert "HTTP 500" in caplog.text and "model name not checked" in caplog.text
    assert wrong is not None and url in wrong and "HTTP 404" in wrong
    assert "transformers serve" in wrong and "--served-model-name" in wrong and "check_model: false" in wrong
    assert right is None


def test_a_killed_server_fails_every_pending_call_within_seconds():
    dead = f"http://127.0.0.1:{free_port()}/v1"

    async def main():
        b = backend([dead], breaker_failures=4, backoff_base_s=0.5, backoff_max_s=60.0, max_retries=6)
        start = time.perf_counter()
        results = await asyncio.gather(*(b.chat(HELLO, SamplingParams()) for _ in range(13)), return_exceptions=True)
        elapsed = time.perf_counter() - start
        await b.close()
        return results, elapsed

    results, elapsed = asyncio.run(main())
    assert all(isinstance(r, LLMError) for r in results)
    assert elapsed < 5.0  # before: each call ran its 7 attempts with backoff (tens of seconds)
    stopped = [str(r) for r in results if "stopped sending" in str(r)]
    assert len(stopped) >= 9 and dead in stopped[0] and "4 attempts in a row got no answer" in stopped[0]
    assert "llm.default.breaker_failures=4" in stopped[0]


def test_an_answer_resets_the_breaker():
    async def main():
        from pipelines.llm.loopback import Fault

        faults = [Fault.drop(), Fault.drop(), None, Fault.drop(), Fault.drop(), None]
        async with LoopbackServer(faults=faults) as srv:
            b = backend([srv.url], breaker_failures=3, backoff_base_s=0.01, backoff_max_s=0.02)
            first = await b.chat(HELLO, SamplingParams())
            second = await b.chat(HELLO, SamplingParams())
            await b.close()
            return first.text, second.text

    assert asyncio.run(main()) == ("echo: hello", "echo: hello")


def test_a_timeout_halves_the_requests_in_flight_once_per_flood():
    async def main():
        limit = AdaptiveLimit()
        limit.bind()
        slots = [await limit.acquire() for _ in range(16)]
        cuts = [await limit.release(slot, timed_out=True) for slot in slots]  # a flood queued in the server
        after_flood = limit.limit
        held = [await limit.acquire() for _ in range(8)]
        blocked = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0.01)
        waiting = not blocked.done()
        await limit.release(held[0])  # a reply in time frees a slot (and grows the limit a little)
        await asyncio.wait_for(blocked, 1.0)
        return cuts, after_flood, waiting, limit.limit

    cuts, after_flood, waiting, grown = asyncio.run(main())
    assert cuts == [True] + [False] * 15 and after_flood == 8.0
    assert waiting and grown == pytest.approx(8.125)


class SerialServer(LoopbackServer):
    """A server that generates one request at a time (``transformers serve``), ``seconds`` each."""

    seconds = 0.2

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not hasattr(self, "_one"):
            self._one = asyncio.Lock()
        async with self._one:
            await asyncio.sleep(self.seconds)
            return await super()._chat(request)


def test_an_overloaded_server_is_not_flooded_with_resends():
    """8 calls on a server that answers one at a time in 0.2 s, timeout 0.5 s: after the first wave
    times out the resends go out under a cut limit instead of all 8 again and again."""

    async def main():
        async with SerialServer() as srv:
            b = backend([srv.url], timeout_s=0.5, backoff_base_s=0.01, backoff_max_s=0.05, max_retries=20)
            results = await asyncio.gather(*(b.chat(HELLO, SamplingParams()) for _ in range(8)))
            await b.close()
            return results, b.gate.limit, srv.count

    results, limit, sent = asyncio.run(main())
    assert len(results) == 8 and limit is not None and limit < 8
    assert sent < 30, sent


def test_the_loopback_answers_schemas_with_their_smallest_instance():
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"type": "array", "items": {"type": "integer"}, "minItems": 2}},
        "required": ["a", "b"],
        "$defs": {"A": {"enum": ["x", "y"]}},
    }
    assert smallest_instance(schema, schema) == {"a": "x", "b": [0, 0]}


class Greedy:
    """A server that answers every request with the same text, whatever the temperature."""

    identity = "greedy-server"
    watch_reasks = True

    def __init__(self):
        self.calls = 0

    async def chat(self, messages, params):
        from pipelines.llm.types import ChatResult, Choice, Usage

        self.calls += 1
        return ChatResult([Choice("not json at all")], Usage(5, 3))

    async def close(self):
        pass


def test_re_asks_a_greedy_server_answers_byte_identically_are_skipped_and_counted(caplog):
    """Issue 37.6: 17 of 17 re-asks of unparseable replies came back byte-identical, each a call."""
    from pipelines.llm.client import LLM

    backend_ = Greedy()
    llm = LLM(backend_, role="r")

    async def main():
        for i in range(6):
            messages = [{"role": "user", "content": f"question {i}"}]
            first = await llm.chat(messages, attempt=0)
            again = await llm.chat(messages, SamplingParams(temperature=0.7), attempt=1)
            assert again.text == first.text

    with caplog.at_level(logging.WARNING, logger="pipelines.llm.client"):
        asyncio.run(main())
    assert backend_.calls == 6 + 3  # three re-asks sent, found identical; the other three skipped
    assert llm.reasks.skipped == {"greedy-server": 3} and "re-asks are skipped" in caplog.text


def test_n_copies_from_a_server_that_does_not_sample_are_noticed(caplog):
    async def main():
        async with LoopbackServer() as srv:
            b = backend([srv.url])
            result = await b.chat(HELLO, SamplingParams(temperature=0.8, n=3))
            await b.close()
            return result, b.identical_choices

    with caplog.at_level(logging.WARNING, logger="pipelines.llm.openai_backend"):
        result, copies = asyncio.run(main())
    assert [c.text for c in result.choices] == ["echo: hello"] * 3
    assert copies == 1 and "3 identical choices at temperature 0.8" in caplog.text


def test_the_preflight_calls_are_counted_in_the_usage(tmp_path):
    from pipelines.llm.client import LLMRuntime
    from pipelines.llm.config import LLMConfig

    async def main():
        async with LoopbackServer() as srv:
            spec = {"kind": "openai", "model": "m", "base_urls": [srv.url], "api_key_env": None}
            runtime = LLMRuntime(LLMConfig(default=spec, cache=None))
            await runtime.preflight()
            await runtime.close()
            return runtime.accounting.summary(), srv.count

    summary, sent = asyncio.run(main())
    assert sent == 2 and summary["preflight"]["calls"] == 2  # the one-token chat call and the schema check
