"""The simulated server over HTTP, through the project's own OpenAI-compatible backend: schema-valid
replies with usage, prefix caching, cut replies, several choices, faults at set rates (retried),
the request log, several servers in a process of their own, and a team's stage run against it."""

from __future__ import annotations

import asyncio
import json
import textwrap
import urllib.request
from pathlib import Path

from pipelines.llm.config import OpenAIBackendConfig
from pipelines.llm.openai_backend import OpenAIBackend
from pipelines.llm.types import SamplingParams
from pipelines.ram2c.agents.analyst import analysed_revision_output
from tests.support.simserver import EngineModel, Faults, SimCluster, SimServer
from tests.support.simserver.text import count_tokens

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = {"role": "system", "content": "You are a literature teacher. " * 40}
SCHEMA = analysed_revision_output(240).model_json_schema()


def spec(url: str, **overrides) -> OpenAIBackendConfig:
    fields = {"kind": "openai", "model": "qwen", "base_urls": [url], "api_key_env": None, "max_concurrency": 64}
    return OpenAIBackendConfig(**(fields | overrides))


async def _with_server(body, *, faults: Faults | None = None, log_path: Path | None = None, **backend):
    async with SimServer(EngineModel(compression=200), faults=faults, log_path=log_path) as server:
        client = OpenAIBackend(spec(server.url, **backend))
        try:
            return await body(client, server)
        finally:
            await client.close()


def test_schema_replies_with_usage_and_prefix_caching():
    async def body(client, server):
        params = SamplingParams(max_tokens=512, json_schema=SCHEMA)
        first = await client.chat([SYSTEM, {"role": "user", "content": "Student: he felt lonely."}], params)
        second = await client.chat([SYSTEM, {"role": "user", "content": "Student: he was brave."}], params)
        return first, second, server.stats()

    first, second, stats = asyncio.run(_with_server(body))
    reply = json.loads(first.text)
    assert set(reply) == {"analysis", "reply"} and 1 <= len(reply["analysis"]) <= 240
    assert first.finish_reason == "stop" and first.usage.completion_tokens == count_tokens([first.text])[0]
    system_tokens = count_tokens([SYSTEM["content"]])[0] + 5
    assert first.usage.prompt_tokens > system_tokens
    engine = stats["engine"]
    assert engine["requests"] == 2 and engine["cached_tokens"] == system_tokens  # the shared system prompt
    assert engine["prompt_tokens"] == first.usage.prompt_tokens + second.usage.prompt_tokens


def test_long_replies_are_cut_at_max_tokens_and_n_gives_distinct_choices():
    async def body(client, server):
        messages = [{"role": "user", "content": "Tell me about the island."}]
        cut = await client.chat(messages, SamplingParams(max_tokens=5))
        several = await client.chat(messages, SamplingParams(max_tokens=200, n=3, temperature=0.7))
        again = await client.chat(messages, SamplingParams(max_tokens=200, n=3, temperature=0.7))
        return cut, several, again

    cut, several, again = asyncio.run(_with_server(body))
    assert cut.finish_reason == "length" and cut.usage.completion_tokens == 5
    assert len({c.text for c in several.choices}) == 3
    assert [c.text for c in again.choices] == [c.text for c in several.choices]  # a request's reply is fixed


def test_faults_at_set_rates_are_retried_and_logged(tmp_path):
    log = tmp_path / "requests.jsonl"
    faults = Faults(rate_429=0.2, rate_5xx=0.1, retry_after_s=0.0, seed=3)

    async def body(client, server):
        params = SamplingParams(max_tokens=20)
        results = await asyncio.gather(
            *(client.chat([{"role": "user", "content": f"question {i}"}], params) for i in range(60))
        )
        return results, client.retries, dict(server.counts)

    results, retries, counts = asyncio.run(
        _with_server(body, faults=faults, log_path=log, max_retries=8, backoff_base_s=0.01, backoff_max_s=0.05)
    )
    assert len(results) == 60 and all(r.text for r in results)
    refused = counts["refused_429"] + counts["refused_5xx"]
    assert counts["refused_429"] > 0 and counts["refused_5xx"] > 0 and retries == refused
    assert counts["answered"] == 60 and counts["requests"] == 60 + refused
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) == 60 + refused and sum(r["status"] == 200 for r in rows) == 60
    assert {r["status"] for r in rows} >= {200, 429} and all(r["hash"] for r in rows)


def test_a_full_waiting_queue_answers_429():
    faults = Faults(max_waiting=2)

    async def body(client, server):
        params = SamplingParams(max_tokens=100)
        return await asyncio.gather(
            *(client.chat([{"role": "user", "content": f"q{i}"}], params) for i in range(8)), return_exceptions=True
        ), dict(server.counts)

    async def run():
        async with SimServer(EngineModel(compression=20, max_num_seqs=1), faults=faults) as server:
            client = OpenAIBackend(spec(server.url, max_retries=0))
            try:
                return await body(client, server)
            finally:
                await client.close()

    results, counts = asyncio.run(run())
    failed = [r for r in results if isinstance(r, Exception)]
    assert counts["refused_429"] == len(failed) >= 1 and "overloaded" in str(failed[0])


def test_servers_in_their_own_process_and_a_team_stage_against_them(tmp_path, monkeypatch):
    from stages.generate_kgc import main

    demo = ROOT / "data/kgc"
    with SimCluster(servers=2, compression=100, log_dir=tmp_path / "logs", served_model_name=["qwen"]) as cluster:
        assert len(cluster.urls) == 2
        stats = json.loads(urllib.request.urlopen(cluster.urls[1].removesuffix("/v1") + "/sim/stats").read())
        assert stats["name"] == "sim-1" and stats["model"]["compression"] == 100
        params = tmp_path / "params.yaml"
        params.write_text(
            textwrap.dedent(f"""\
            kgc:
              datasets:
                - {{name: conllpp, format: conll, files: [{demo / "ner_en.conll"}], sample: 2}}
                - {{name: duie2, format: duie, files: [{demo / "re_zh.duie.jsonl"}], sample: 2}}
                - {{name: duee1, format: duee, files: [{demo / "ee_zh.duee.jsonl"}],
                   schema_file: {demo / "ee_zh.duee_schema.jsonl"}, sample: 2}}
              systems: [cooperkgc, chatie]
              output_mode: json
              spans: sentence
              concurrency: 16
              progress: false
              llm:
                default: {{kind: openai, model: qwen, base_urls: {json.dumps(cluster.urls)}, api_key_env: null}}
                cache: null
                sampling: {{max_tokens: 512}}
              team: {{rounds: 1}}
            """)
        )
        monkeypatch.chdir(tmp_path)
        assert main(["--params", str(params)]) == 0
    served = sum(s["counts"]["answered"] for s in cluster.stats)
    assert all(s["counts"]["answered"] > 0 for s in cluster.stats)  # the pool used both servers
    usage = json.loads((tmp_path / "reports/generate_kgc/usage.json").read_text())
    assert usage["total"]["calls"] == served and usage["total"]["prompt_tokens"] == sum(
        s["engine"]["prompt_tokens"] for s in cluster.stats
    )
    traces = [json.loads(line) for line in (tmp_path / "data/generated/kgc/traces.jsonl").read_text().splitlines()]
    calls = [t for t in traces if t.get("prompt")]
    team = [t for t in calls if t["system"] == "cooperkgc@0shot"]
    assert len(team) == 6 * 3 * 2 and all(t["ok"] for t in team)  # every schema-valid reply parsed
    assert sum(t.get("unparseable", 0) for t in team) == 0
    logged = sum(len((tmp_path / "logs" / f"server-{i}.jsonl").read_text().splitlines()) for i in range(2))
    assert logged == served
