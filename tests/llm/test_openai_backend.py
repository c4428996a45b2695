"""OpenAIBackend against real HTTP servers on 127.0.0.1 (the fault-injecting loopback server)."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import socket
import subprocess
import sys
import threading
import time

import pytest

from pipelines.llm.client import LLMRuntime
from pipelines.llm.config import LLMConfig, OpenAIBackendConfig
from pipelines.llm.loopback import Fault, LoopbackServer
from pipelines.llm.openai_backend import OpenAIBackend
from pipelines.llm.openai_protocol import parse_retry_after, response_format
from pipelines.llm.ratelimit import RateLimiter, RateSchedule, estimate_tokens
from pipelines.llm.types import LLMError, SamplingParams

KEY_ENV = "EDUMAS_TEST_OPENAI_KEY"
KEY = "sk-test-7f3a9c1e5b2d4f60"
HELLO = [{"role": "user", "content": "hello there"}]


def run(coro):
    return asyncio.run(coro)


def backend(urls: list[str], **overrides) -> OpenAIBackend:
    """A backend with tiny backoffs so retries cost milliseconds."""
    spec = {
        "kind": "openai",
        "model": "test-model",
        "base_urls": urls,
        "api_key_env": KEY_ENV,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "timeout_s": 2.0,
        "connect_timeout_s": 1.0,
        "max_retries": 3,
    } | overrides
    return OpenAIBackend(OpenAIBackendConfig(**spec))


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_request_body_headers_and_reply_parsing():
    async def main():
        async with LoopbackServer() as srv:
            b = backend([srv.url])
            params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=17, stop=("###",), seed=5, n=2)
            result = await b.chat(HELLO, params)
            await b.close()
            return srv, b, result

    srv, b, result = run(main())
    sent = srv.requests[0]
    assert sent["authorization"] == f"Bearer {KEY}"
    assert sent["body"] == {
        "model": "test-model",
        "messages": HELLO,
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 17,
        "stop": ["###"],
        "seed": 5,
        "n": 2,
    }
    assert [c.text for c in result.choices] == ["echo: hello there", "echo: hello there"]
    assert result.finish_reason == "stop"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (2, 6)
    assert result.model == "test-model"
    assert "test-model" in b.identity and "127.0.0.1" not in b.identity and KEY not in b.identity


def test_defaults_omit_optional_fields_and_no_key_means_no_auth_header():
    async def main():
        async with LoopbackServer() as srv:
            b = backend([srv.url], api_key_env=None)
            await b.chat(HELLO, SamplingParams())
            await b.close()
            return srv

    sent = run(main()).requests[0]
    assert sent["authorization"] is None
    assert set(sent["body"]) == {"model", "messages", "temperature", "top_p", "max_tokens"}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("json_schema", {"type": "json_schema", "json_schema": {"name": "Tag_list", "schema": None}}),
        ("strict", {"type": "json_schema", "json_schema": {"name": "Tag_list", "schema": None, "strict": True}}),
        ("json_object", {"type": "json_object"}),
        ("none", None),
    ],
)
def test_json_schema_sent_as_response_format(mode, expected):
    schema = {"title": "Tag list", "type": "object", "properties": {"tags": {"type": "array"}}, "required": ["tags"]}
    if mode == "strict":  # closed objects with every property required: OpenAI's strict mode can enforce it
        schema |= {"additionalProperties": False}
        schema["properties"]["tags"]["items"] = {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        }

    async def main():
        async with LoopbackServer(reply=lambda body: '{"tags": ["fractions"]}') as srv:
            b = backend([srv.url], structured_output="json_schema" if mode == "strict" else mode)
            result = await b.chat(HELLO, SamplingParams(json_schema=schema))
            await b.close()
            return srv, result

    srv, result = run(main())
    assert result.text == '{"tags": ["fractions"]}'
    if expected is not None and mode in ("json_schema", "strict"):
        expected["json_schema"]["schema"] = schema
    assert srv.requests[0]["body"].get("response_format") == expected


def test_response_format_is_worked_out_once_per_schema_object():
    open_ = {"title": "A", "type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    closed = open_ | {"title": "B", "additionalProperties": False}
    first = response_format(closed, "json_schema")
    assert first == {"type": "json_schema", "json_schema": {"name": "B", "schema": closed, "strict": True}}
    assert response_format(closed, "json_schema") is first  # the same schema object: the same field, not rebuilt
    not_strict = {"type": "json_schema", "json_schema": {"name": "A", "schema": open_}}
    assert response_format(open_, "json_schema") == not_strict
    equal = dict(closed)  # an equal schema that is another object is worked out on its own
    assert response_format(equal, "json_schema") == first and response_format(equal, "json_schema") is not first
    assert response_format(closed, "json_object") == {"type": "json_object"}
    assert response_format(closed, "none") is None and response_format(None, "json_schema") is None


def test_retry_after_429_is_honoured():
    async def main():
        async with LoopbackServer(faults=[Fault.http(429, "slow down", retry_after="0.6")]) as srv:
            b = backend([srv.url], backoff_base_s=0.001)
            start = time.perf_counter()
            result = await b.chat(HELLO, SamplingParams())
            elapsed = time.perf_counter() - start
            await b.close()
            return srv, b, result, elapsed

    srv, b, result, elapsed = run(main())
    assert result.text == "echo: hello there"
    assert srv.count == 2 and b.retries == 1
    assert elapsed >= 0.6
    gap = srv.requests[1]["time"] - srv.requests[0]["time"]
    assert gap >= 0.6


def test_retry_after_parsing_seconds_and_http_date():
    now = 1_700_000_000.0
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.25") == 0.25
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_500_then_success():
    async def main():
        async with LoopbackServer(faults=[Fault.http(500, "boom")]) as srv:
            b = backend([srv.url])
            result = await b.chat(HELLO, SamplingParams())
            await b.close()
            return srv, b, result

    srv, b, result = run(main())
    assert result.text == "echo: hello there" and srv.count == 2 and b.retries == 1


def test_timeout_then_success():
    async def main():
        async with LoopbackServer(faults=[Fault.slow(3.0)]) as srv:
            b = backend([srv.url], timeout_s=0.3)
            start = time.perf_counter()
            result = await b.chat(HELLO, SamplingParams())
            elapsed = time.perf_counter() - start
            await b.close()
            return srv, result, elapsed

    srv, result, elapsed = run(main())
    assert result.text == "echo: hello there" and srv.count == 2
    assert 0.3 <= elapsed < 2.9  # gave up on the slow reply (3 s) and retried


def test_dropped_connection_is_retried():
    async def main():
        async with LoopbackServer(faults=[Fault.drop(), Fault.drop()]) as srv:
            b = backend([srv.url])
            result = await b.chat(HELLO, SamplingParams())
            await b.close()
            return srv, b, result

    srv, b, result = run(main())
    assert result.text == "echo: hello there" and srv.count == 3 and b.retries == 2


def test_malformed_json_gives_clear_error_after_retries():
    async def main():
        async with LoopbackServer(faults=lambda index, body: Fault.malformed()) as srv:
            b = backend([srv.url], max_retries=2)
            with pytest.raises(LLMError) as err:
                await b.chat(HELLO, SamplingParams())
            await b.close()
            return srv, str(err.value)

    srv, message = run(main())
    assert srv.count == 3
    assert "gave up after 3 attempts" in message and "malformed" in message and srv.url in message


def test_4xx_fails_at_once_with_server_message():
    async def main():
        async with LoopbackServer(faults=[Fault.http(400, "max_tokens is too large for this model")]) as srv:
            b = backend([srv.url])
            with pytest.raises(LLMError) as err:
                await b.chat(HELLO, SamplingParams())
            await b.close()
            return srv, str(err.value)

    srv, message = run(main())
    assert srv.count == 1
    assert srv.url in message and "HTTP 400" in message and "max_tokens is too large for this model" in message


def test_persistent_429_gives_up_naming_the_status():
    async def main():
        async with LoopbackServer(faults=lambda index, body: Fault.http(429, "quota exceeded")) as srv:
            b = backend([srv.url], max_retries=2)
            with pytest.raises(LLMError) as err:
                await b.chat(HELLO, SamplingParams())
            await b.close()
            return srv, str(err.value)

    srv, message = run(main())
    assert srv.count == 3 and "HTTP 429" in message and "quota exceeded" in message


def test_api_key_never_in_errors_or_logs(caplog):
    def echo_auth(index, body):
        # a careless server that echoes the request's credentials in its error messages
        return Fault.http(500 if index < 2 else 401, f"bad credentials: Bearer {KEY}")

    async def main():
        async with LoopbackServer(faults=echo_auth) as srv:
            b = backend([srv.url], max_retries=1)
            errors = []
            for _ in range(2):
                with pytest.raises(LLMError) as err:
                    await b.chat(HELLO, SamplingParams())
                errors.append(str(err.value))
            await b.close()
            return srv, errors

    with caplog.at_level(logging.DEBUG):
        srv, errors = run(main())
    assert srv.requests[0]["authorization"] == f"Bearer {KEY}"  # the key was really sent
    assert "HTTP 500" in errors[0] and "HTTP 401" in errors[1]
    for text in [*errors, caplog.text, repr(backend([srv.url]).spec)]:
        assert KEY not in text
    assert "bad credentials" in errors[1]


def test_requests_per_minute_spaces_requests():
    async def main():
        async with LoopbackServer() as srv:
            b = backend([srv.url], requests_per_minute=600)  # one request per 0.1 s
            start = time.monotonic()
            await asyncio.gather(*(b.chat(HELLO, SamplingParams()) for _ in range(6)))
            await b.close()
            return srv, start

    srv, start = run(main())
    arrivals = sorted(r["time"] - start for r in srv.requests)
    # the k-th request may not start before its slot k * 0.1 s (robust to a loaded machine delaying any of them)
    for k, arrival in enumerate(arrivals):
        assert arrival >= 0.1 * k - 0.005, arrivals


def test_tokens_per_minute_paces_by_estimate_and_settles_by_usage():
    clock = [100.0]
    schedule = RateSchedule(6000, clock=lambda: clock[0])  # 100 tokens per second
    assert schedule.reserve(200) == 0.0
    assert schedule.reserve(100) == pytest.approx(2.0)  # waits for the first 200 tokens
    schedule.refund(150)  # the first call used 50 tokens, not 200
    assert schedule.reserve(100) == pytest.approx(1.5)
    assert estimate_tokens([{"role": "user", "content": "a" * 400}], SamplingParams(max_tokens=10, n=2)) == 124
    assert estimate_tokens([{"role": "user", "content": "分数的加法"}], SamplingParams(max_tokens=1)) == 10

    async def main():
        async with LoopbackServer() as srv:
            b = backend([srv.url], tokens_per_minute=60_000)  # 1000 tokens/s; each call ~205 tokens
            start = time.perf_counter()
            await asyncio.gather(*(b.chat(HELLO, SamplingParams(max_tokens=200)) for _ in range(4)))
            await b.close()
            return srv, time.perf_counter() - start

    srv, elapsed = run(main())
    assert srv.count == 4 and elapsed >= 0.55
    assert not RateLimiter().active


def test_concurrency_bound_is_respected():
    async def main():
        async with LoopbackServer(latency_s=0.05) as srv:
            b = backend([srv.url], max_concurrency=4)
            await asyncio.gather(*(b.chat(HELLO, SamplingParams()) for _ in range(24)))
            await b.close()
            return srv

    srv = run(main())
    assert srv.count == 24 and srv.max_in_flight == 4


def test_no_limit_of_its_own_by_default_so_a_stage_concurrency_of_128_reaches_the_server():
    async def main():
        async with LoopbackServer(latency_s=0.3) as srv:
            b = backend([srv.url])  # max_concurrency left out (it was 64, capping concurrency: 128 silently)
            await asyncio.gather(*(b.chat(HELLO, SamplingParams()) for _ in range(128)))
            await b.close()
            return srv

    assert OpenAIBackendConfig(kind="openai", model="m", base_urls=["http://h/v1"]).max_concurrency is None
    srv = run(main())
    assert srv.count == 128 and srv.max_in_flight == 128


def test_a_max_concurrency_that_makes_calls_wait_is_warned_about_once(caplog):
    async def main(n: int):
        async with LoopbackServer(latency_s=0.05) as srv:
            b = OpenAIBackend(
                OpenAIBackendConfig(kind="openai", model="m", base_urls=[srv.url], api_key_env=None, max_concurrency=4),
                where="tagging.llm.roles.solver",
            )
            await asyncio.gather(*(b.chat(HELLO, SamplingParams()) for _ in range(n)))
            await b.close()

    with caplog.at_level(logging.WARNING):
        run(main(4))  # never more than the limit in flight: nothing to say
        assert "max_concurrency" not in caplog.text
        run(main(12))
    warnings = [r.getMessage() for r in caplog.records if "max_concurrency" in r.getMessage()]
    assert len(warnings) == 1
    assert "tagging.llm.roles.solver (m): max_concurrency 4" in warnings[0]
    assert "raise tagging.llm.roles.solver.max_concurrency" in warnings[0]


def test_pool_balances_load_across_two_servers():
    async def main():
        async with LoopbackServer(latency_s=0.02) as a, LoopbackServer(latency_s=0.02) as b_srv:
            b = backend([a.url, b_srv.url], max_concurrency=8)
            await asyncio.gather(*(b.chat(HELLO, SamplingParams()) for _ in range(40)))
            for _ in range(10):  # sequential traffic alternates too
                await b.chat(HELLO, SamplingParams())
            await b.close()
            return a.count, b_srv.count

    count_a, count_b = run(main())
    assert count_a + count_b == 50
    assert 20 <= count_a <= 30 and 20 <= count_b <= 30


def test_pool_survives_one_server_down():
    dead = f"http://127.0.0.1:{free_port()}/v1"

    async def main():
        async with LoopbackServer(latency_s=0.01) as alive:
            b = backend([dead, alive.url], max_concurrency=4)
            results = await asyncio.gather(*(b.chat(HELLO, SamplingParams()) for _ in range(20)))
            await b.close()
            return alive, b, results

    alive, b, results = run(main())
    assert all(r.text == "echo: hello there" for r in results)
    assert alive.count == 20
    stats = b.pool.stats()
    assert stats[dead]["requests"] == stats[dead]["failures"] <= 4  # cooled down after failing


def test_all_servers_down_names_the_server():
    dead = f"http://127.0.0.1:{free_port()}/v1"
    b = backend([dead], max_retries=1)

    async def main():
        with pytest.raises(LLMError) as err:
            await b.chat(HELLO, SamplingParams())
        await b.close()
        return str(err.value)

    message = run(main())
    assert dead in message and "connection failed" in message


def test_runtime_builds_openai_backend_and_caches(tmp_path):
    async def main():
        async with LoopbackServer() as srv:
            config = LLMConfig(
                default={"kind": "openai", "model": "test-model", "base_urls": [srv.url], "api_key_env": KEY_ENV},
                cache=str(tmp_path / "cache.sqlite"),
            )
            runtime = LLMRuntime(config)
            llm = runtime.for_role("planner")
            first = await llm.chat(HELLO)
            second = await llm.chat(HELLO)
            await runtime.close()
            return srv, runtime, first, second

    srv, runtime, first, second = run(main())
    assert isinstance(runtime.backend_for("planner"), OpenAIBackend)
    assert srv.count == 1 and not first.cached and second.cached and second.text == first.text
    assert runtime.accounting.summary()["planner"]["cache_hits"] == 1


def test_loopback_server_command_line():
    command = [sys.executable, "-m", "pipelines.llm.loopback", "--latency", "0.01", "--no-record"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = proc.stdout.readline().split()
        assert ready[0] == "READY" and ready[1].startswith("http://127.0.0.1:")

        async def main():
            b = backend([ready[1]])
            result = await b.chat(HELLO, SamplingParams())
            await b.close()
            return result

        assert run(main()).text == "echo: hello there"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "served 1 requests" in err


# -- defects of issue 13 and the structured-output fallback ------------------------------------


def test_missing_api_key_is_an_error_at_start_naming_the_variable(monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(LLMError) as err:
        backend(["https://api.example.com/v1"])
    assert str(err.value) == (
        f"environment variable {KEY_ENV} (llm.default.api_key_env) is not set; export it, "
        "or set api_key_env: null for a server without keys"
    )
    config = LLMConfig.model_validate(
        {
            "default": {"kind": "scripted", "replies": "unused.jsonl"},
            "roles": {
                "numerical_judge": {
                    "kind": "openai",
                    "model": "glm-4",
                    "base_urls": ["https://x/v4"],
                    "api_key_env": KEY_ENV,
                }
            },
            "cache": None,
        }
    )
    with pytest.raises(LLMError, match=rf"{KEY_ENV} \(llm.roles.numerical_judge.api_key_env\) is not set"):
        LLMRuntime(config).backend_for("numerical_judge")


def test_tokens_stay_charged_when_the_server_reports_no_usage():
    async def one_call(usage: bool):
        async with LoopbackServer(usage=usage) as srv:
            b = backend([srv.url], tokens_per_minute=6000)  # 100 tokens per second
            await b.chat(HELLO, SamplingParams(max_tokens=200))
            ahead = b.limiter.tokens.next_free - time.monotonic()
            await b.close()
            return ahead

    estimate = estimate_tokens(HELLO, SamplingParams(max_tokens=200))  # 207 tokens: 2.07 s of budget
    assert run(one_call(usage=False)) == pytest.approx(estimate / 100, abs=0.1)  # kept, not refunded
    assert run(one_call(usage=True)) < 0.1  # 5 tokens used: refunded


@pytest.mark.parametrize("retry_after", ["inf", "1e9", "500"])
def test_an_excessive_retry_after_fails_at_once(retry_after):
    async def main():
        async with LoopbackServer(faults=lambda i, body: Fault.http(429, "slow down", retry_after=retry_after)) as srv:
            b = backend([srv.url], max_retry_after_s=30)
            start = time.perf_counter()
            with pytest.raises(LLMError) as err:
                await b.chat(HELLO, SamplingParams())
            elapsed = time.perf_counter() - start
            await b.close()
            return srv, str(err.value), elapsed

    srv, message, elapsed = run(main())
    assert srv.count == 1 and elapsed < 2
    assert "max_retry_after_s=30" in message and "HTTP 429" in message and "Retry-After" in message


@pytest.mark.parametrize(
    ("code", "text"),
    [
        ("insufficient_quota", "You exceeded your current quota, please check your plan and billing details."),
        ("credit_balance_exhausted", "Your credit balance is exhausted."),
        ("1113", "您的账户已欠费，请充值后重试。"),
    ],
)
def test_permanent_429_quota_errors_fail_at_once(code, text):
    async def main():
        async with LoopbackServer(faults=lambda i, body: Fault.http(429, text, code=code)) as srv:
            b = backend([srv.url], max_retries=4)
            with pytest.raises(LLMError) as err:
                await b.chat(HELLO, SamplingParams())
            await b.close()
            return srv, b, str(err.value)

    srv, b, message = run(main())
    assert srv.count == 1 and b.retries == 0
    assert code in message and text in message and "retrying does not help" in message


def test_rate_limit_429_with_a_code_is_still_retried():
    faults = [Fault.http(429, "Rate limit reached", code="rate_limit_exceeded")]

    async def main():
        async with LoopbackServer(faults=faults) as srv:
            b = backend([srv.url])
            result = await b.chat(HELLO, SamplingParams())
            await b.close()
            return srv, result

    srv, result = run(main())
    assert srv.count == 2 and result.text == "echo: hello there"


def test_api_key_over_plain_http_to_a_remote_host_warns_once_per_url(caplog):
    with caplog.at_level(logging.WARNING, logger="pipelines.llm.openai_backend"):
        backend(["http://gpu07.cluster.example:8000/v1", "https://api.example.com/v1", "http://127.0.0.1:8000/v1"])
        backend(["http://gpu07.cluster.example:8000/v1", "http://localhost:9/v1", "http://[::1]:8000/v1"])
        backend(["http://gpu07.cluster.example:8000/v1"], api_key_env=None)  # no key: nothing to leak
    warnings = [r.getMessage() for r in caplog.records if "plain http://" in r.getMessage()]
    assert len(warnings) == 1 and "gpu07.cluster.example" in warnings[0] and KEY_ENV in warnings[0]
    assert KEY not in caplog.text


def test_a_backend_reused_under_a_new_event_loop_closes_the_old_session():
    async def call(b):
        await b.chat(HELLO, SamplingParams())
        return b._session

    # the server runs on its own loop in a thread, so one backend can serve two asyncio.run calls
    srv, loop, ready = LoopbackServer(), asyncio.new_event_loop(), threading.Event()

    def serve():
        loop.run_until_complete(srv.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        b = backend([srv.url])
        first = run(call(b))
        assert first.closed  # closed inside its own loop as that loop ended (no unclosed sockets left)
        second = run(call(b))
        assert first is not second and second.closed
        run(b.close())  # idempotent
        assert srv.count == 2
    finally:
        asyncio.run_coroutine_threadsafe(srv.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def refusing(*refused: str):
    """A server that answers 400 to the response_format types in ``refused`` (as some servers do)."""

    def faults(index, body):
        kind = (body.get("response_format") or {}).get("type")
        if kind in refused:
            return Fault.http(400, f"response_format type '{kind}' is not supported by this model")
        return None

    return faults


@pytest.mark.parametrize(
    ("refused", "settled"), [(("json_schema",), "json_object"), (("json_schema", "json_object"), "none")]
)
def test_refused_response_format_falls_back_once_per_server_with_one_warning(caplog, refused, settled):
    async def main():
        async with LoopbackServer(faults=refusing(*refused), reply=lambda body: '{"answer": 8}') as srv:
            b = backend([srv.url])
            params = SamplingParams(json_schema=SCHEMA)
            results = [await b.chat(HELLO, params) for _ in range(3)]
            results += await asyncio.gather(*(b.chat(HELLO, params) for _ in range(4)))
            await b.close()
            return srv, b, results

    with caplog.at_level(logging.WARNING, logger="pipelines.llm.openai_backend"):
        srv, b, results = run(main())
    assert all(r.text == '{"answer": 8}' for r in results)
    sent = [(r["body"].get("response_format") or {}).get("type") for r in srv.requests]
    first_call = [*refused, None if settled == "none" else settled]
    assert sent[: len(first_call)] == first_call  # stepped down within the first call, no retry counted
    assert sent[len(first_call) :] == [None if settled == "none" else settled] * 6  # later calls go straight there
    assert b.format_mode[srv.url] == settled and b.retries == 0
    assert len([r for r in caplog.records if "refused response_format" in r.getMessage()]) == 1


def test_other_400s_are_not_mistaken_for_a_refused_format():
    async def main():
        async with LoopbackServer(faults=[Fault.http(400, "max_tokens is too large")]) as srv:
            b = backend([srv.url])
            with pytest.raises(LLMError, match="max_tokens is too large"):
                await b.chat(HELLO, SamplingParams(json_schema=SCHEMA))
            await b.close()
            return srv, b

    srv, b = run(main())
    assert srv.count == 1 and b.format_mode[srv.url] == "json_schema"


def test_preflight_names_an_unreachable_url_within_seconds():
    dead = f"http://127.0.0.1:{free_port()}/v1"

    async def main():
        b = backend([dead], api_key_env=None)
        start = time.perf_counter()
        with pytest.raises(LLMError) as err:
            await b.preflight()
        await b.close()
        return str(err.value), time.perf_counter() - start

    message, elapsed = run(main())
    assert dead in message and "cannot reach" in message and elapsed < 5


def test_preflight_stops_when_the_server_serves_the_model_under_another_name():
    """`vllm serve /models/X` serves `/models/X`: a run asking for `X` would get 404 on every call."""

    async def main(served: list[str], model: str, **overrides):
        async with LoopbackServer(models=served) as srv:
            b = OpenAIBackend(
                OpenAIBackendConfig(kind="openai", model=model, base_urls=[srv.url], api_key_env=None, **overrides),
                where="llm.default",
            )
            try:
                await b.preflight()
                return None, srv
            except LLMError as exc:
                return str(exc), srv
            finally:
                await b.close()

    message, srv = run(main(["/models/Qwen2.5-7B-Instruct"], "Qwen2.5-7B-Instruct"))
    assert srv.count == 0 and message is not None
    assert f"{srv.url} does not serve model 'Qwen2.5-7B-Instruct' (llm.default.model)" in message
    assert "'/models/Qwen2.5-7B-Instruct'" in message and "--served-model-name Qwen2.5-7B-Instruct" in message
    assert run(main(["Qwen2.5-7B-Instruct"], "Qwen2.5-7B-Instruct"))[0] is None  # served under its name
    skipped_list = run(main(["/models/X"], "X", check_model=False))[0]  # the list unchecked: the chat call refuses
    assert "HTTP 404" in skipped_list and "fixes:" in skipped_list and "check_model: false" in skipped_list
    assert run(main(None, "anything"))[0] is None  # a server that lists no models is not checked


def test_without_the_check_every_request_to_a_misnamed_model_fails():
    async def main():
        async with LoopbackServer(models=["/models/X"]) as srv:
            b = backend([srv.url], api_key_env=None, max_retries=0, model="X")
            with pytest.raises(LLMError) as err:
                await b.chat(HELLO, SamplingParams())
            await b.close()
            return str(err.value)

    assert "HTTP 404" in run(main()) and "does not exist" in run(main())


def test_preflight_passes_a_live_pool_warns_about_a_dead_member_and_rejects_a_bad_key(caplog):
    dead = f"http://127.0.0.1:{free_port()}/v1"

    async def main():
        async with LoopbackServer() as good, LoopbackServer(require_key="another-key") as strict:
            b = backend([good.url, dead])
            await b.preflight()
            refused = backend([strict.url])
            with pytest.raises(LLMError) as err:
                await refused.preflight()
            await b.close()
            await refused.close()
            return str(err.value), good.count

    with caplog.at_level(logging.WARNING, logger="pipelines.llm.openai_backend"):
        message, chats = run(main())
    assert chats == 2  # a one-token chat call with the configured name and one schema-constrained call
    assert dead in caplog.text and "cannot reach" in caplog.text
    assert "HTTP 401" in message and KEY_ENV in message and KEY not in message


def test_runtime_preflight_checks_each_openai_endpoint(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    config = LLMConfig(
        default={"kind": "scripted", "replies": str(tmp_path / "unused.jsonl")},
        roles={"judge": {"kind": "openai", "model": "m", "base_urls": [dead], "api_key_env": None}},
        cache=None,
    )
    (tmp_path / "unused.jsonl").write_text('{"match": ".", "reply": "x"}\n')
    runtime = LLMRuntime(config)

    async def main():
        with pytest.raises(LLMError, match=dead):
            await runtime.preflight()
        await runtime.close()

    run(main())


def test_greedy_with_n_sends_one_request_for_one_choice_and_copies_it():
    async def main():
        async with LoopbackServer() as srv:
            b = backend([srv.url])
            result = await b.chat(HELLO, SamplingParams(n=3))
            await b.close()
            return srv, result

    srv, result = run(main())
    assert srv.count == 1 and "n" not in srv.requests[0]["body"]
    assert [c.text for c in result.choices] == ["echo: hello there"] * 3


def test_a_server_that_ignores_n_is_asked_again_for_the_rest():
    async def main():
        async with LoopbackServer(max_choices=1) as srv:
            b = backend([srv.url])
            result = await b.chat(HELLO, SamplingParams(temperature=0.9, n=3, seed=5))
            await b.close()
            return srv, result

    srv, result = run(main())
    assert len(result.choices) == 3 and srv.count == 3
    assert [r["body"].get("n") for r in srv.requests] == [3, 2, None]
    assert [r["body"]["seed"] for r in srv.requests] == [5, 6, 7]  # each follow-up its own sample
    assert result.usage.completion_tokens == 3 * 3 and result.usage.prompt_tokens == 3 * 2
