"""The vLLM backend: a clear install error without vLLM (CPU), real generation on a GPU (marked gpu).

The GPU tests run SmolLM2-135M-Instruct (converted offline, see tests/tiny_models.py) in vLLM's
in-process engine: greedy answers, many requests in flight, n choices with a seed, stop strings,
JSON-schema structured output, and a LoRA adapter per request.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipelines.llm import vllm_backend
from pipelines.llm.cache import RequestCache
from pipelines.llm.client import LLM
from pipelines.llm.config import VLLM_LORA_RANKS, VLLMBackendConfig
from pipelines.llm.types import LLMError, SamplingParams
from pipelines.llm.vllm_backend import INSTALL_HINT, VLLMBackend, engine_args, vllm_identity

ROOT = Path(__file__).resolve().parents[2]


def spec(model: str, **overrides) -> VLLMBackendConfig:
    return VLLMBackendConfig(kind="vllm", model=model, **overrides)


def test_module_imports_without_vllm_and_construction_says_how_to_install(monkeypatch, tmp_path):
    code = "import sys, pipelines.llm.vllm_backend; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    monkeypatch.setitem(sys.modules, "vllm", None)  # as if vLLM were not installed
    with pytest.raises(LLMError) as exc:
        VLLMBackend(spec(str(tmp_path)))
    assert 'pip install -e ".[gpu]"' in str(exc.value) and INSTALL_HINT in str(exc.value)


def test_engine_args_follow_the_spec_and_identity_names_the_adapter(tmp_path):
    fake_vllm = types.SimpleNamespace(AsyncEngineArgs=dict)
    args = engine_args(spec("m", tensor_parallel_size=4, max_model_len=4096, gpu_memory_utilization=0.5), fake_vllm)
    assert args["tensor_parallel_size"] == 4 and args["max_model_len"] == 4096
    assert args["gpu_memory_utilization"] == 0.5 and args["enable_lora"] and args["max_lora_rank"] == 64
    (tmp_path / "adapter_config.json").write_text("{}")
    base = vllm_identity(spec("m"), None)
    assert base.startswith("vllm:m@") and vllm_identity(spec("m"), str(tmp_path)) != base
    assert vllm_identity(spec("m", dtype="bfloat16"), None) != base


# -- the engine stubbed at its ``generate`` boundary (CPU) ------------------------------------


class StubSamplingParams:
    """Stands in for ``vllm.SamplingParams`` and makes the checks vLLM 0.31 makes on construction."""

    def __init__(self, **kwargs):
        if kwargs["n"] > 1 and kwargs["temperature"] == 0:
            raise ValueError(f"n must be 1 when using greedy sampling, got {kwargs['n']}")
        if kwargs["stop"] is not None and "" in kwargs["stop"]:
            raise ValueError("stop cannot contain an empty string")
        self.__dict__.update(kwargs)


class StubEngine:
    """``generate`` yields one final output per request; ``finish`` sets every choice's finish reason."""

    def __init__(self, finish: str = "stop"):
        self.finish = finish
        self.requests: list[StubSamplingParams] = []

    async def generate(self, prompt, sampling_params, request_id, lora_request=None):
        self.requests.append(sampling_params)
        schema = (getattr(sampling_params, "structured_outputs", None) or {}).get("json") or {}
        if schema.get("type") == "bogus":  # as vLLM's structured-output backend rejects a schema
            raise ValueError("The provided JSON schema contains features not supported by xgrammar.")
        outputs = [
            types.SimpleNamespace(index=i, text=f"reply {i}", token_ids=[1, 2, 3], finish_reason=self.finish)
            for i in range(sampling_params.n)
        ]
        yield types.SimpleNamespace(outputs=outputs, prompt_token_ids=prompt["prompt_token_ids"])

    def shutdown(self):
        return None


@pytest.fixture
def stub_vllm(monkeypatch):
    """A fake ``vllm`` module and engine; returns a function building a backend on it."""
    module = types.ModuleType("vllm")
    module.SamplingParams = StubSamplingParams
    module.AsyncEngineArgs = dict
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = types.SimpleNamespace(FINAL_ONLY="final_only")
    sampling.StructuredOutputsParams = lambda **kwargs: kwargs
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    from tests.tiny_models import smollm2_dir

    def build(engine=None, error=None, **overrides):
        def start(spec_, vllm):
            if error is not None:
                raise error
            return engine

        monkeypatch.setattr(vllm_backend, "start_engine", start)
        return VLLMBackend(spec(str(smollm2_dir()), **overrides))

    return build


HI = [{"role": "user", "content": "hi"}]


def test_greedy_with_n_asks_for_one_choice_and_copies_it(stub_vllm):
    engine = StubEngine()
    backend = stub_vllm(engine)

    async def main():
        greedy = await backend.chat(HI, SamplingParams(n=3))
        sampled = await backend.chat(HI, SamplingParams(n=3, temperature=0.7, seed=1))
        return greedy, sampled

    greedy, sampled = asyncio.run(main())
    assert [r.n for r in engine.requests] == [1, 3]
    assert (
        [c.text for c in greedy.choices] == ["reply 0"] * 3
        and greedy.usage.completion_tokens == 3
        and [c.text for c in sampled.choices] == ["reply 0", "reply 1", "reply 2"]
    )


def test_empty_stop_strings_never_reach_the_engine(stub_vllm):
    engine = StubEngine()
    backend = stub_vllm(engine)

    async def main():
        await backend.chat(HI, SamplingParams(stop=("", "###", "")))
        await backend.chat(HI, SamplingParams(stop=[""]))

    asyncio.run(main())
    assert [r.stop for r in engine.requests] == [["###"], None]
    assert SamplingParams(stop="###").stop == ("###",)  # one string is one stop string


@pytest.mark.parametrize("reason", ["abort", "error"])
def test_aborted_or_failed_requests_raise_and_are_not_cached(stub_vllm, tmp_path, reason):
    backend = stub_vllm(StubEngine(finish=reason))
    llm = LLM(backend, cache=RequestCache(tmp_path / "c.sqlite"), role="solver")
    with pytest.raises(LLMError, match=f"finish reason {reason}"):
        asyncio.run(llm.chat(HI))
    assert len(llm.cache) == 0 and llm.accounting.summary()["solver"]["errors"] == 1


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "lower gpu_memory_utilization (now 0.9)"),
        (
            ValueError("No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"),
            "lower gpu_memory_utilization",
        ),
        (ValueError("max_model_len (100000) is greater than the derived max_model_len"), "rejected these engine"),
    ],
)
def test_engine_start_failures_are_llm_errors_with_the_fix(stub_vllm, error, expected):
    with pytest.raises(LLMError) as err:
        stub_vllm(error=error)
    message = str(err.value)
    assert expected in message and str(error) in message and "failed to start" in message


def test_a_schema_the_engine_cannot_compile_is_a_clear_error(stub_vllm):
    engine = StubEngine()
    backend = stub_vllm(engine)

    async def main():
        ok = await backend.chat(HI, SamplingParams(json_schema={"type": "object"}))
        with pytest.raises(LLMError, match="^json_schema cannot be compiled: ValueError: The provided JSON schema"):
            await backend.chat(HI, SamplingParams(json_schema={"type": "bogus"}))
        return ok

    assert asyncio.run(main()).text == "reply 0"
    assert engine.requests[0].structured_outputs == {"json": {"type": "object"}}


def test_a_missing_model_folder_is_an_llm_error(stub_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(LLMError, match="cannot load the tokenizer of .*must be a local model folder"):
        VLLMBackend(spec(str(tmp_path / "no-such-model")))


def test_max_lora_rank_must_be_one_vllm_accepts():
    assert VLLM_LORA_RANKS == (1, 8, 16, 32, 64, 128, 256, 320, 512)
    assert spec("m", max_lora_rank=320).max_lora_rank == 320
    with pytest.raises(ValidationError, match="vLLM accepts max_lora_rank 1, 8, 16, 32, 64, 128, 256, 320, 512"):
        spec("m", max_lora_rank=48)


def test_a_call_from_another_event_loop_raises_instead_of_hanging(stub_vllm):
    async def build_and_call():
        backend = stub_vllm(StubEngine())  # built inside a running loop: the engine serves that loop
        return backend

    backend = asyncio.run(build_and_call())

    async def from_another_loop():
        return await asyncio.wait_for(backend.chat(HI, SamplingParams()), timeout=5)

    with pytest.raises(LLMError, match="serves the event loop"):
        asyncio.run(from_another_loop())


# -- GPU ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loop():
    """One event loop for the module: the vLLM engine serves the loop of its first request."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def smol_dir():
    from tests.tiny_models import smollm2_dir

    return smollm2_dir()


@pytest.fixture(scope="module")
def backend(smol_dir, loop):
    pytest.importorskip("vllm")
    backend = VLLMBackend(spec(str(smol_dir), gpu_memory_utilization=0.3, max_model_len=2048, max_lora_rank=16))
    yield backend
    loop.run_until_complete(backend.close())


def ask(loop, backend, prompt: str, params: SamplingParams):
    return loop.run_until_complete(backend.chat([{"role": "user", "content": prompt}], params))


@pytest.mark.gpu
def test_greedy_answer_finish_reason_and_usage(backend, loop):
    result = ask(loop, backend, "What is 2+2?", SamplingParams(max_tokens=32))
    assert "4" in result.text and result.finish_reason == "stop"
    assert result.usage.prompt_tokens > 10 and 0 < result.usage.completion_tokens < 32
    cut = ask(loop, backend, "What is 2+2?", SamplingParams(max_tokens=3))
    assert cut.finish_reason == "length" and cut.usage.completion_tokens == 3


@pytest.mark.gpu
def test_many_requests_in_flight_all_answer(backend, loop):
    prompts = [f"Give one word that rhymes with {w}." for w in ("cat", "dog", "sun", "tree", "blue", "ring")] * 4

    async def go():
        params = SamplingParams(max_tokens=12)
        return await asyncio.gather(*(backend.chat([{"role": "user", "content": p}], params) for p in prompts))

    results = loop.run_until_complete(go())
    assert len(results) == 24 and all(r.text.strip() for r in results)
    assert all(0 < r.usage.completion_tokens <= 12 for r in results)


@pytest.mark.gpu
def test_seeded_n_choices_are_reproducible_and_stop_strings_cut(backend, loop):
    params = SamplingParams(temperature=1.0, max_tokens=16, n=3, seed=11)
    first = ask(loop, backend, "Tell me a short fact about the sea.", params)
    again = ask(loop, backend, "Tell me a short fact about the sea.", params)
    assert len(first.choices) == 3 and [c.text for c in first.choices] == [c.text for c in again.choices]
    full = ask(loop, backend, "Count from 1 to 10 separated by commas.", SamplingParams(max_tokens=40)).text
    cut = ask(loop, backend, "Count from 1 to 10 separated by commas.", SamplingParams(max_tokens=40, stop=("5",)))
    assert "5" in full and cut.text == full[: full.find("5")] and cut.finish_reason == "stop"


@pytest.mark.gpu
def test_json_schema_gives_structured_output(backend, loop):
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}, "unit": {"type": "string"}},
        "required": ["answer", "unit"],
        "additionalProperties": False,
    }
    result = ask(
        loop, backend, "How many legs has a spider? Reply in JSON.", SamplingParams(max_tokens=64, json_schema=schema)
    )
    data = json.loads(result.text)
    assert isinstance(data["answer"], int) and isinstance(data["unit"], str)


@pytest.mark.gpu
def test_lora_adapter_per_request_changes_replies_and_identity(backend, loop, smol_dir, tmp_path_factory):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    adapter_dir = tmp_path_factory.mktemp("lora") / "adapter"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(smol_dir))
    config = LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(adapter_dir)
    tuned = backend.with_adapter(str(adapter_dir))
    assert tuned.identity != backend.identity and str(adapter_dir) in tuned.identity
    params = SamplingParams(max_tokens=16)
    base = ask(loop, backend, "Name three colours.", params).text
    adapted = ask(loop, tuned, "Name three colours.", params).text
    assert adapted != base
    assert ask(loop, backend.with_adapter(None), "Name three colours.", params).text == base


@pytest.mark.gpu
def test_greedy_n_and_empty_stop_strings_on_the_real_engine(backend, loop):
    result = ask(loop, backend, "What is 2+2?", SamplingParams(max_tokens=16, n=3, stop=("",)))
    assert len(result.choices) == 3 and len({c.text for c in result.choices}) == 1 and result.text.strip()
