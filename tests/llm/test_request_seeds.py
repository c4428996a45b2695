"""Per-request seeds (pipelines.llm.seeding): one role seed, a random stream per request.

A role's seed combined with the request's cache key: two requests of one role do not draw the
same random numbers, a rerun draws them again byte for byte, the cache key is the one computed
from the role's seed (so caches replay), and the seed a backend receives (the transformers
generator, vLLM's ``SamplingParams.seed``, the HTTP body's ``seed``) is the derived one.
"""

from __future__ import annotations

import asyncio

import pytest

from pipelines.llm.cache import RequestCache, request_key
from pipelines.llm.client import LLM
from pipelines.llm.config import OpenAIBackendConfig, TransformersBackendConfig
from pipelines.llm.loopback import LoopbackServer
from pipelines.llm.openai_backend import OpenAIBackend
from pipelines.llm.seeding import per_request, request_seed
from pipelines.llm.transformers_backend import TransformersBackend
from pipelines.llm.types import ChatResult, Choice, SamplingParams
from tests.tiny_models import tiny_qwen2

pytestmark = pytest.mark.usefixtures("one_torch_thread")
WARM = SamplingParams(temperature=1.0, max_tokens=12, seed=7)
KEY_ENV = "EDUMAS_TEST_SEED_KEY"


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


class Recording:
    """Wraps a backend and records the sampling parameters each call reached it with."""

    def __init__(self, backend):
        self.backend, self.identity, self.seen = backend, backend.identity, []

    async def chat(self, messages, params):
        self.seen.append(params)
        return await self.backend.chat(messages, params)

    async def close(self):
        return None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2", init_std=0.3)
    backend = TransformersBackend(TransformersBackendConfig(kind="transformers", model=str(folder), batch_wait_ms=50))
    backend.load()
    return backend


def test_request_seed_is_stable_and_depends_on_seed_and_key():
    assert request_seed(7, "abc") == request_seed(7, "abc")
    assert len({request_seed(7, "abc"), request_seed(7, "abd"), request_seed(8, "abc")}) == 3
    assert 0 <= request_seed(7, "abc") < 2**31
    assert per_request(SamplingParams(seed=None), "abc").seed is None  # unseeded stays unseeded
    assert per_request(SamplingParams(seed=3), None).seed == 3


def test_transformers_requests_of_one_role_seed_draw_their_own_streams(tiny, tmp_path):
    backend = Recording(tiny)
    llm = LLM(backend, default_params=WARM)

    async def calls(target):
        return [
            await target.chat(user("Say something about the sea."), sample_index=0),
            await target.chat(user("Say something about the sea."), sample_index=1),
            await target.chat(user("Name a colour."), sample_index=0),
        ]

    first = asyncio.run(calls(llm))
    seeds = [p.seed for p in backend.seen]
    keys = [
        request_key(tiny.identity, user("Say something about the sea."), WARM, 0),
        request_key(tiny.identity, user("Say something about the sea."), WARM, 1),
        request_key(tiny.identity, user("Name a colour."), WARM, 0),
    ]
    assert seeds == [request_seed(7, k) for k in keys] and len(set(seeds)) == 3 and 7 not in seeds
    # the same prompt at the same role seed: a second sample is a new draw, not a copy of the first
    assert first[0].text != first[1].text
    again = asyncio.run(calls(LLM(tiny, default_params=WARM)))
    assert [r.text.encode() for r in again] == [r.text.encode() for r in first]  # a rerun is byte-identical
    # the cache key is computed from the role's seed: a cache written under it replays
    cache = RequestCache(tmp_path / "c.sqlite")
    asyncio.run(calls(LLM(tiny, cache=cache, default_params=WARM)))
    assert cache.get(keys[1]).text == first[1].text
    replayed = asyncio.run(calls(LLM(tiny, cache=cache, default_params=WARM)))
    assert all(r.cached for r in replayed) and [r.text for r in replayed] == [r.text for r in first]


class Fixed:
    """A backend answering one text and recording the parameters it was sent."""

    identity = "fixed"

    def __init__(self):
        self.seen = []

    async def chat(self, messages, params):
        self.seen.append(params)
        return ChatResult([Choice("ok")])

    async def close(self):
        return None


def test_tags_and_attempts_separate_seeds_too():
    backend = Fixed()
    llm = LLM(backend, default_params=SamplingParams(temperature=0.7, seed=1))

    async def go():
        await llm.chat(user("same"), tag="hts:judge-seed1")
        await llm.chat(user("same"), tag="hts:judge-seed1")
        await llm.chat(user("same"), tag="hts:judge-seed2")
        await llm.chat(user("same"), tag="hts:judge-seed1", attempt=1)

    asyncio.run(go())
    seeds = [p.seed for p in backend.seen]
    assert seeds[0] == seeds[1] and len(set(seeds)) == 3


def test_the_http_body_carries_the_per_request_seed(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-seed")
    params = SamplingParams(temperature=0.7, max_tokens=5, seed=5)

    async def main():
        async with LoopbackServer() as srv:
            spec = OpenAIBackendConfig(kind="openai", model="test-model", base_urls=[srv.url], api_key_env=KEY_ENV)
            backend = OpenAIBackend(spec)
            llm = LLM(backend, default_params=params)
            await llm.chat(user("first prompt"))
            await llm.chat(user("second prompt"))
            await backend.close()
            return srv, backend.identity

    srv, identity = asyncio.run(main())
    expected = [request_seed(5, request_key(identity, user(t), params, 0)) for t in ("first prompt", "second prompt")]
    assert [r["body"]["seed"] for r in srv.requests] == expected and expected[0] != expected[1]
