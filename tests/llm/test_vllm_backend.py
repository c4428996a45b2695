"""The vLLM backend: a clear install error without vLLM (CPU), real generation on a GPU (marked gpu).

The GPU tests run SmolLM2-135M-Instruct (converted offline, see tests/tiny_models.py) in vLLM's
in-process engine: greedy answers, many requests in flight, n choices with a seed, stop strings,
JSON-schema structured output, a LoRA adapter per request, and two adapters both named ``final``
side by side, one rendered with its own chat template. On CPU the engine is stubbed at its
``generate`` boundary: prompt token ids, sampling parameters and LoRA requests it receives are
checked (adapter chat templates, unique LoRA names and ids, LoRA slots, LoRA only when used).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipelines.llm import vllm_backend
from pipelines.llm.cache import RequestCache, request_key
from pipelines.llm.client import LLM
from pipelines.llm.config import VLLM_LORA_RANKS, VLLMBackendConfig
from pipelines.llm.seeding import request_seed
from pipelines.llm.types import LLMError, SamplingParams
from pipelines.llm.vllm_backend import INSTALL_HINT, VLLMBackend, engine_args, lora_name, vllm_identity

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
    args = engine_args(
        spec("m", tensor_parallel_size=4, max_model_len=4096, gpu_memory_utilization=0.5, enable_lora=True), fake_vllm
    )
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
        self.prompts: list[list[int]] = []
        self.lora_requests: list = []

    async def generate(self, prompt, sampling_params, request_id, lora_request=None):
        self.requests.append(sampling_params)
        self.prompts.append(list(prompt["prompt_token_ids"]))
        self.lora_requests.append(lora_request)
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


@dataclasses.dataclass
class StubLoRARequest:
    """``vllm.lora.request.LoRARequest``'s fields in vLLM 0.31 (it compares requests by ``lora_name``)."""

    lora_name: str
    lora_int_id: int
    lora_path: str = ""

    def __post_init__(self):
        assert self.lora_int_id >= 1 and self.lora_path, "vLLM rejects ids < 1 and empty paths"


@pytest.fixture
def stub_vllm(monkeypatch):
    """A fake ``vllm`` module and engine; returns a function building a backend on it."""
    module = types.ModuleType("vllm")
    module.SamplingParams = StubSamplingParams
    module.AsyncEngineArgs = dict
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = types.SimpleNamespace(FINAL_ONLY="final_only")
    sampling.StructuredOutputsParams = lambda **kwargs: kwargs
    lora = types.ModuleType("vllm.lora.request")
    lora.LoRARequest = StubLoRARequest
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora)
    from tests.tiny_models import smollm2_dir

    def build(engine=None, error=None, model=None, **overrides):
        def start(spec_, vllm):
            if error is not None:
                raise error
            return engine

        monkeypatch.setattr(vllm_backend, "start_engine", start)
        return VLLMBackend(spec(str(model or smollm2_dir()), **overrides))

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


def test_the_engine_gets_each_requests_own_seed(stub_vllm):
    """Through LLM, vLLM's ``SamplingParams.seed`` is the role's seed combined with the request's key."""
    engine = StubEngine()
    backend = stub_vllm(engine)
    params = SamplingParams(temperature=0.7, seed=3)
    llm = LLM(backend, default_params=params)

    async def main():
        await llm.chat(HI)
        await llm.chat([{"role": "user", "content": "bye"}])

    asyncio.run(main())
    prompts = (HI, [{"role": "user", "content": "bye"}])
    expected = [request_seed(3, request_key(backend.identity, m, params, 0)) for m in prompts]
    assert [r.seed for r in engine.requests] == expected and expected[0] != expected[1]


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


# -- LoRA adapters: own chat template, unique names, slots, LoRA only when used (CPU) ---------

ADAPTER_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + ' (tutor)\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant (tutor)\\n' }}{% endif %}"
)
"""The chat template a fine-tune was trained with; it differs from the base model's Qwen template."""


def qwen_folder(dest: Path, template: str, eos: str | None = None) -> Path:
    """A copy of the real Qwen tokenizer folder with ``template`` (and optionally ``eos``) saved in the copy."""
    from transformers import AutoTokenizer

    from tests.tiny_models import qwen_tokenizer_dir

    shutil.copytree(qwen_tokenizer_dir(), dest)
    tokenizer = AutoTokenizer.from_pretrained(str(dest))
    tokenizer.chat_template = template
    if eos is not None:
        tokenizer.eos_token = eos
    tokenizer.save_pretrained(str(dest))
    return dest


def template_ids(folder: Path, messages) -> list[int]:
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(folder)).apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def test_an_adapter_request_is_rendered_with_the_adapters_own_chat_template(stub_vllm, tmp_path):
    from tests.tiny_models import QWEN_CHAT_TEMPLATE

    base = qwen_folder(tmp_path / "base", QWEN_CHAT_TEMPLATE, eos="<|endoftext|>")
    tuned = qwen_folder(tmp_path / "sft" / "final", ADAPTER_TEMPLATE, eos="<|im_end|>")
    bare = tmp_path / "dpo" / "final"  # an adapter folder without a tokenizer: the base template renders it
    bare.mkdir(parents=True)
    engine = StubEngine()
    backend = stub_vllm(engine, model=base, enable_lora=True)

    async def main():
        for view in (backend, backend.with_adapter(str(tuned)), backend.with_adapter(str(bare))):
            await view.chat(HI, SamplingParams())

    asyncio.run(main())
    base_ids, tuned_ids = template_ids(base, HI), template_ids(tuned, HI)
    assert base_ids != tuned_ids
    assert engine.prompts == [base_ids, tuned_ids, base_ids]
    assert "(tutor)" in backend._core.tokenizer_for(str(tuned)).decode(engine.prompts[1])
    # the fine-tune's template ends turns with <|im_end|>, the base tokenizer's EOS is <|endoftext|>
    im_end = backend._core.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert [getattr(r, "stop_token_ids", None) for r in engine.requests] == [None, [im_end], None]


def test_an_adapter_tokenizer_without_chat_template_is_a_clear_error(stub_vllm, tmp_path):
    from tests.tiny_models import QWEN_CHAT_TEMPLATE, qwen_tokenizer_dir

    base = qwen_folder(tmp_path / "base", QWEN_CHAT_TEMPLATE)
    broken = tmp_path / "sft" / "final"
    shutil.copytree(qwen_tokenizer_dir(), broken)
    config = json.loads((broken / "tokenizer_config.json").read_text())
    config.pop("chat_template")  # the copy has no chat template at all
    (broken / "tokenizer_config.json").write_text(json.dumps(config))
    backend = stub_vllm(StubEngine(), model=base, enable_lora=True)
    with pytest.raises(LLMError, match=f"tokenizer of {broken} has no chat template"):
        backend.with_adapter(str(broken))


def test_adapters_with_the_same_folder_name_get_different_lora_names_and_ids(stub_vllm, tmp_path):
    sft, dpo = tmp_path / "sft" / "final", tmp_path / "dpo" / "final"
    sft.mkdir(parents=True)
    dpo.mkdir(parents=True)
    engine = StubEngine()
    backend = stub_vllm(engine, adapter=str(sft))
    same_sft = tmp_path / "dpo" / ".." / "sft" / "final"  # another spelling of the same folder

    async def main():
        for view in (backend, backend.with_adapter(str(dpo)), backend.with_adapter(str(same_sft))):
            await view.chat(HI, SamplingParams())
        await backend.with_adapter(None).chat(HI, SamplingParams())

    asyncio.run(main())
    first, second, again, none = engine.lora_requests
    assert none is None
    assert first.lora_name != second.lora_name and first.lora_int_id != second.lora_int_id
    assert (again.lora_name, again.lora_int_id) == (first.lora_name, first.lora_int_id) and first == again
    assert [first.lora_int_id, second.lora_int_id] == [1, 2]
    assert first.lora_name.startswith("sft-final-") and second.lora_name.startswith("dpo-final-")
    assert first.lora_path == str(sft.resolve()) and again.lora_path == str(sft.resolve())
    assert lora_name(str(same_sft)) == lora_name(str(sft)) == first.lora_name
    assert len(first.lora_name) == len("sft-final-") + 8


def test_max_loras_and_max_cpu_loras_come_from_params_and_reach_the_engine(tmp_path):
    fake_vllm = types.SimpleNamespace(AsyncEngineArgs=dict)
    args = engine_args(spec("m", adapter=str(tmp_path), max_loras=3, max_cpu_loras=6, max_lora_rank=16), fake_vllm)
    assert (args["enable_lora"], args["max_loras"], args["max_cpu_loras"], args["max_lora_rank"]) == (True, 3, 6, 16)
    defaults = engine_args(spec("m", enable_lora=True), fake_vllm)
    assert (defaults["max_loras"], defaults["max_cpu_loras"]) == (2, None)  # None: vLLM caches max_loras
    assert spec("m", max_loras=4, max_cpu_loras=4).max_cpu_loras == 4
    with pytest.raises(ValidationError, match=r"max_cpu_loras \(2\) must be at least max_loras \(3\)"):
        spec("m", max_loras=3, max_cpu_loras=2)
    for bad in ({"max_loras": 0}, {"max_cpu_loras": 0}, {"max_loras": "2"}, {"max_loras": 1.5}, {"max_loras": True}):
        with pytest.raises(ValidationError):
            spec("m", **bad)


def test_lora_is_enabled_only_when_an_adapter_is_used(stub_vllm, tmp_path):
    fake_vllm = types.SimpleNamespace(AsyncEngineArgs=dict)
    plain = engine_args(spec("m"), fake_vllm)
    assert plain["enable_lora"] is False and "max_loras" not in plain and "max_lora_rank" not in plain
    assert engine_args(spec("m", adapter=str(tmp_path)), fake_vllm)["enable_lora"] is True
    assert engine_args(spec("m", enable_lora=True), fake_vllm)["enable_lora"] is True
    assert engine_args(spec("m", enable_lora=False), fake_vllm)["enable_lora"] is False
    with pytest.raises(ValidationError, match="needs LoRA; remove `enable_lora: false`"):
        spec("m", adapter=str(tmp_path), enable_lora=False)
    backend = stub_vllm(StubEngine())
    assert backend.with_adapter(None).adapter == ""  # the base model needs no LoRA
    with pytest.raises(LLMError, match="started without LoRA.*set `enable_lora: true`"):
        backend.with_adapter(str(tmp_path))


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
    backend = VLLMBackend(
        spec(str(smol_dir), gpu_memory_utilization=0.3, max_model_len=2048, enable_lora=True, max_lora_rank=16)
    )
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
    adapter_dir = random_lora(smol_dir, tmp_path_factory.mktemp("lora") / "adapter", seed=0)
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


def random_lora(smol_dir: Path, dest: Path, *, seed: int) -> Path:
    """A LoRA adapter of SmolLM2 with random (non-zero) weights, so it changes replies."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(smol_dir))
    config = LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(dest)
    return dest


@pytest.mark.gpu
def test_two_adapters_named_final_run_side_by_side_with_their_own_templates(backend, loop, smol_dir, tmp_path_factory):
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("finetunes")
    sft = random_lora(smol_dir, root / "sft" / "final", seed=1)
    dpo = random_lora(smol_dir, root / "dpo" / "final", seed=2)
    tokenizer = AutoTokenizer.from_pretrained(str(smol_dir))
    tokenizer.chat_template = ADAPTER_TEMPLATE  # the template the SFT run "trained" with
    tokenizer.save_pretrained(str(sft))
    views = [backend, backend.with_adapter(str(sft)), backend.with_adapter(str(dpo))]
    messages = [{"role": "user", "content": "Name three colours."}]
    params = SamplingParams(max_tokens=16)
    alone = [loop.run_until_complete(view.chat(messages, params)) for view in views]

    async def side_by_side():
        return await asyncio.gather(*(view.chat(messages, params) for view in views for _ in range(4)))

    together = loop.run_until_complete(side_by_side())
    assert [r.text for r in together] == [r.text for r in alone for _ in range(4)]
    base, tuned, other = (r.text for r in alone)
    assert len({base, tuned, other}) == 3  # two adapters named "final" are two different adapters
    sft_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    sft_ids = sft_ids["input_ids"] if hasattr(sft_ids, "keys") else sft_ids
    assert alone[1].usage.prompt_tokens == len(sft_ids) != alone[0].usage.prompt_tokens


@pytest.mark.gpu
def test_an_engine_without_lora_refuses_adapters(smol_dir, loop, tmp_path):
    pytest.importorskip("vllm")
    plain = VLLMBackend(spec(str(smol_dir), gpu_memory_utilization=0.2, max_model_len=1024))
    try:
        assert ask(loop, plain, "What is 2+2?", SamplingParams(max_tokens=8)).text.strip()
        with pytest.raises(LLMError, match="set `enable_lora: true`"):
            plain.with_adapter(str(tmp_path))
    finally:
        loop.run_until_complete(plain.close())
