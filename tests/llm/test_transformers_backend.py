"""The transformers backend on real models, and the micro-batcher under it.

A tiny random Qwen2 on the real Qwen tokenizer (``init_std=0.3`` so replies depend on the prompt)
covers batching, sampling, stop, usage and LoRA quickly; SmolLM2-135M-Instruct checks the key
property on a real instruct model: concurrent greedy requests share fewer ``generate`` calls and
each row decodes as it decodes alone, up to float error (:mod:`tests.llm.decoding_checks`: a
padded batch changes the last bits of the logits, so texts are compared only where the
computation is the same: the same request alone, or the same batch again).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time

import pytest

from pipelines.llm.batching import MicroBatcher
from pipelines.llm.client import LLMRuntime
from pipelines.llm.config import LLMConfig, TransformersBackendConfig
from pipelines.llm.transformers_backend import TransformersBackend, row_seed
from pipelines.llm.types import LLMError, SamplingParams
from tests.llm.decoding_checks import assert_rows_decode_as_alone, recorded_generate
from tests.tiny_models import smollm2_dir, tiny_qwen2

torch = pytest.importorskip("torch")

PROMPTS = [
    "What is 2+2?",
    "Name a colour.",
    "Say hello in French.",
    "What is the capital of Italy?",
    "Count to five.",
    "What is water made of?",
    "Who wrote Hamlet?",
    "Give me a fruit, please, one that is red and sweet.",
]
GREEDY = SamplingParams(max_tokens=12)

pytestmark = pytest.mark.usefixtures("each_torch_thread_count")


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def concurrently(backend, requests):
    """Send ``(prompt, params)`` requests at once; results in order."""

    async def go():
        return await asyncio.gather(*(backend.chat(user(p), params) for p, params in requests))

    return asyncio.run(go())


def one_by_one(backend, requests):
    async def go():
        return [await backend.chat(user(p), params) for p, params in requests]

    return asyncio.run(go())


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2", init_std=0.3)


def make_backend(model, **overrides) -> TransformersBackend:
    spec = TransformersBackendConfig(kind="transformers", model=str(model), batch_wait_ms=100, **overrides)
    backend = TransformersBackend(spec)
    backend.load()
    return backend


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return make_backend(tiny_dir, max_batch_size=8)


# -- micro-batcher -----------------------------------------------------------------------------


def test_batcher_groups_concurrent_items_in_a_worker_thread_and_keeps_order():
    seen: list[list[int]] = []
    threads: set[int] = set()

    def process(items):
        seen.append(list(items))
        threads.add(threading.get_ident())
        return [i * 10 for i in items]

    batcher = MicroBatcher(process, max_batch_size=4, max_wait_s=0.2)

    async def go():
        return await asyncio.gather(*(batcher.submit(i) for i in range(10)))

    assert asyncio.run(go()) == [i * 10 for i in range(10)]
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert threading.get_ident() not in threads
    assert asyncio.run(go()) == [i * 10 for i in range(10)]  # a second event loop works too


def test_batcher_leaves_the_event_loop_free_while_a_batch_runs():
    batcher = MicroBatcher(lambda items: (time.sleep(0.4), items)[1], max_batch_size=2, max_wait_s=0.0)

    async def go():
        pending, ticks = asyncio.ensure_future(batcher.submit("x")), 0
        while not pending.done():  # a batch run on the loop itself would freeze this for 0.4 s
            await asyncio.sleep(0.01)
            ticks += 1
        return pending.result(), ticks

    result, ticks = asyncio.run(go())
    assert result == "x" and ticks >= 10


def test_batcher_waits_at_most_max_wait_and_sizes_items():
    sizes: list[int] = []
    batcher = MicroBatcher(
        lambda items: (sizes.append(sum(items)), items)[1], max_batch_size=4, max_wait_s=0.05, size_of=lambda n: n
    )

    async def go():
        first = asyncio.ensure_future(batcher.submit(1))
        await asyncio.sleep(0.3)  # longer than max_wait: the first batch has left alone
        return await asyncio.gather(first, batcher.submit(3), batcher.submit(3), batcher.submit(1))

    assert asyncio.run(go()) == [1, 3, 3, 1]
    assert sizes == [1, 3, 4]  # 3 then 3+1: an item never overflows the batch size


def test_batcher_raises_a_failed_batch_to_its_callers_and_goes_on():
    def process(items):
        if "bad" in items:
            raise ValueError("boom")
        return items

    batcher = MicroBatcher(process, max_batch_size=2, max_wait_s=0.05)

    async def go():
        failed = await asyncio.gather(batcher.submit("bad"), batcher.submit("ok"), return_exceptions=True)
        return failed, await batcher.submit("fine")

    failed, fine = asyncio.run(go())
    assert [type(f) for f in failed] == [ValueError, ValueError] and fine == "fine"


# -- tiny Qwen2 --------------------------------------------------------------------------------


def test_concurrent_greedy_requests_share_generate_calls_and_decode_as_alone(tiny):
    requests = [(p, GREEDY) for p in PROMPTS]
    calls = tiny.generate_calls
    with recorded_generate(tiny) as recorded:
        batched = concurrently(tiny, requests)
    assert tiny.generate_calls - calls == len(recorded) < len(PROMPTS) and max(tiny.batch_rows) >= 4
    assert assert_rows_decode_as_alone(tiny, recorded) == 12 * len(PROMPTS)
    assert len({r.text for r in batched}) == len(PROMPTS)  # replies depend on the prompt
    assert all(r.finish_reason == "length" and r.usage.completion_tokens == 12 for r in batched)


def test_each_request_keeps_its_own_max_tokens_inside_one_batch(tiny):
    requests = [(PROMPTS[0], SamplingParams(max_tokens=k)) for k in (3, 7, 12)]
    calls = tiny.generate_calls
    with recorded_generate(tiny) as recorded:
        batched = concurrently(tiny, requests)
    assert tiny.generate_calls - calls == len(recorded) == 1
    assert [r.usage.completion_tokens for r in batched] == [3, 7, 12]
    assert assert_rows_decode_as_alone(tiny, recorded) == 3 + 7 + 12
    alone = [r.text for r in one_by_one(tiny, requests)]  # batches of one: each a prefix of the longest
    assert alone[2].startswith(alone[1]) and alone[1].startswith(alone[0]) and len(alone[0]) < len(alone[2])


def test_usage_counts_prompt_without_padding_and_completion_tokens(tiny):
    short, long = concurrently(tiny, [(PROMPTS[0], GREEDY), (PROMPTS[-1], SamplingParams(max_tokens=5, n=2))])
    for result, prompt in ((short, PROMPTS[0]), (long, PROMPTS[-1])):
        ids = tiny.tokenizer.apply_chat_template(user(prompt), add_generation_prompt=True, return_dict=True)
        assert result.usage.prompt_tokens == len(ids["input_ids"])  # padding not counted, prompt once for n=2
    assert short.usage.completion_tokens == 12 and long.usage.completion_tokens == 10
    assert long.usage.prompt_tokens > short.usage.prompt_tokens


def test_stop_string_cuts_the_text_and_ends_generation_early(tiny):
    full = one_by_one(tiny, [(PROMPTS[2], GREEDY)])[0].text
    stop = full[len(full) // 3 : len(full) // 3 + 2]
    cut, never = one_by_one(
        tiny,
        [
            (PROMPTS[2], SamplingParams(max_tokens=12, stop=(stop,))),
            (PROMPTS[2], SamplingParams(max_tokens=12, stop=("@@never@@",))),
        ],
    )
    assert cut.text == full[: full.find(stop)] and cut.finish_reason == "stop"
    assert cut.usage.completion_tokens < 12
    assert never.text == full and never.finish_reason == "length"


def test_eos_token_ends_a_reply_with_finish_reason_stop(tiny, tiny_dir, tmp_path):
    prompt = tiny.tokenizer.apply_chat_template(
        user(PROMPTS[1]), add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.inference_mode():
        out = tiny.model.generate(
            **prompt, max_new_tokens=12, do_sample=False, pad_token_id=tiny.tokenizer.pad_token_id
        )
    ids = out[0, prompt["input_ids"].shape[1] :].tolist()
    position = next(i for i, t in enumerate(ids) if i >= 2 and ids.index(t) == i)
    model_dir = shutil.copytree(tiny_dir, tmp_path / "eos")
    config = json.loads((model_dir / "generation_config.json").read_text())
    config["eos_token_id"] = [config["eos_token_id"], ids[position]]  # that token now ends a reply
    (model_dir / "generation_config.json").write_text(json.dumps(config))
    result = one_by_one(make_backend(model_dir), [(PROMPTS[1], GREEDY)])[0]
    assert result.finish_reason == "stop"
    assert result.usage.completion_tokens == position + 1
    assert result.text == tiny.tokenizer.decode(ids[:position], skip_special_tokens=True)


def test_seeded_sampling_repeats_in_the_same_batch_and_n_gives_choices(tiny):
    seeded = SamplingParams(temperature=1.0, max_tokens=8, seed=7, n=3)
    alone = one_by_one(tiny, [(PROMPTS[3], seeded)])[0]
    texts = [c.text for c in alone.choices]
    assert len(texts) == 3 and len(set(texts)) >= 2
    assert [c.text for c in one_by_one(tiny, [(PROMPTS[3], seeded)])[0].choices] == texts  # alone again
    other_seed = one_by_one(tiny, [(PROMPTS[3], SamplingParams(temperature=1.0, max_tokens=8, seed=8, n=3))])[0]
    assert [c.text for c in other_seed.choices] != texts
    assert alone.usage.completion_tokens == 24
    assert row_seed(7, 0) != row_seed(7, 1)
    warm = SamplingParams(temperature=0.7, max_tokens=4, seed=3)
    crowd = [(PROMPTS[0], GREEDY), (PROMPTS[3], seeded), (PROMPTS[4], warm)]
    with recorded_generate(tiny) as recorded:
        first = concurrently(tiny, crowd)
        again = concurrently(tiny, crowd)
    assert len(recorded) == 2  # one generate each: the same batch twice
    assert [[c.text for c in r.choices] for r in again] == [[c.text for c in r.choices] for r in first]
    assert assert_rows_decode_as_alone(tiny, recorded[:1]) == 12 + 24 + 4


def test_a_seeded_row_draws_the_same_tokens_whatever_rows_share_its_batch():
    from pipelines.llm.transformers_backend import RowSampler

    def generator(seed):
        return torch.Generator().manual_seed(row_seed(seed, 0))

    torch.manual_seed(0)
    steps = [torch.randn(4, 50) for _ in range(6)]  # the same row logits at each step, in two batches
    rows = [(0.0, 1.0, None), (1.0, 0.9, generator(7)), (0.7, 1.0, generator(3)), (1.0, 1.0, generator(9))]
    crowded = RowSampler(rows)
    alone = RowSampler([(1.0, 0.9, generator(7))])
    drawn_crowded = [int(crowded(None, scores)[1].argmax()) for scores in steps]
    drawn_alone = [int(alone(None, scores[1:2])[0].argmax()) for scores in steps]
    assert drawn_crowded == drawn_alone and len(set(drawn_alone)) >= 3
    other = RowSampler([(1.0, 0.9, generator(8))])
    assert [int(other(None, scores[1:2])[0].argmax()) for scores in steps] != drawn_alone
    assert [int(crowded(None, scores)[0].argmax()) for scores in steps] == [int(s[0].argmax()) for s in steps]


def test_greedy_n_repeats_the_greedy_reply_and_tiny_top_p_is_greedy(tiny):
    greedy = one_by_one(tiny, [(PROMPTS[5], SamplingParams(max_tokens=8))])[0].text
    nucleus = one_by_one(tiny, [(PROMPTS[5], SamplingParams(temperature=1.5, top_p=1e-9, max_tokens=8))])[0]
    assert nucleus.text == greedy  # the same computation alone: the nucleus of one token is the argmax
    requests = [(PROMPTS[5], SamplingParams(max_tokens=8, n=2))]
    with recorded_generate(tiny) as recorded:
        (two,) = one_by_one(tiny, requests)
    assert len(two.choices) == 2 and two.usage.completion_tokens == 16
    assert assert_rows_decode_as_alone(tiny, recorded) == 16


def test_identity_names_model_and_adapter_and_follows_the_weights(tiny_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    model = shutil.copytree(tiny_dir, tmp_path / "m")
    spec = TransformersBackendConfig(kind="transformers", model=str(model))
    first = TransformersBackend(spec).identity
    assert first == TransformersBackend(spec).identity and str(model) in first
    assert TransformersBackend(spec.model_copy(update={"dtype": "bfloat16"})).identity != first
    weights = load_file(model / "model.safetensors")
    save_file({name: tensor * 1.01 for name, tensor in weights.items()}, model / "model.safetensors")
    assert TransformersBackend(spec).identity != first  # retrained weights at the same path: new cache key


def test_missing_model_or_adapter_folder_is_a_clear_error(tmp_path):
    with pytest.raises(LLMError, match="prepare_models"):
        TransformersBackend(TransformersBackendConfig(kind="transformers", model=str(tmp_path / "nope")))
    with pytest.raises(LLMError, match="adapter"):
        TransformersBackend(
            TransformersBackendConfig(kind="transformers", model=str(tmp_path), adapter=str(tmp_path / "none"))
        )


def test_peft_lora_adapter_loads_merged_and_changes_the_replies(tiny, tiny_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    torch.manual_seed(1)  # init_lora_weights=False: random A and B, so the adapter changes the model
    config = LoraConfig(r=8, lora_alpha=32, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(tmp_path / "adapter")
    adapted = make_backend(tiny_dir, adapter=str(tmp_path / "adapter"))
    assert adapted.identity.startswith(f"transformers:{tiny_dir}+{tmp_path / 'adapter'}@")
    merged, plain = dict(adapted.model.named_parameters()), dict(tiny.model.named_parameters())
    assert not any("lora" in name for name in merged)
    changed = {name.split(".")[-2] for name in plain if not torch.equal(plain[name], merged[name])}
    assert changed == {"q_proj", "v_proj"}
    requests = [(p, GREEDY) for p in PROMPTS[:3]]
    assert [r.text for r in concurrently(adapted, requests)] != [r.text for r in concurrently(tiny, requests)]


def test_runtime_builds_the_backend_from_config_and_caches_replies(tiny_dir, tmp_path):
    config = LLMConfig(
        default={"kind": "transformers", "model": str(tiny_dir), "batch_wait_ms": 0}, cache=str(tmp_path / "c.sqlite")
    )

    async def go():
        runtime = LLMRuntime(config)
        llm = runtime.for_role("solver", SamplingParams(max_tokens=4, json_schema={"type": "object"}))
        first = await llm.chat(user("hi"))
        again = await llm.chat(user("hi"))
        calls = llm.backend.generate_calls
        await runtime.close()
        return first, again, calls

    first, again, calls = asyncio.run(go())
    assert calls == 1 and again.cached and again.text == first.text
    assert first.model.startswith(f"transformers:{tiny_dir}")


# -- SmolLM2-135M-Instruct ---------------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_batched_greedy_decodes_as_alone_in_fewer_generate_calls():
    backend = make_backend(smollm2_dir(), max_batch_size=8)
    requests = [(p, SamplingParams(max_tokens=8)) for p in PROMPTS]
    with recorded_generate(backend) as recorded:
        batched = concurrently(backend, requests)
    assert backend.generate_calls == len(recorded) < len(PROMPTS)
    assert assert_rows_decode_as_alone(backend, recorded, atol=5e-3) == sum(r.usage.completion_tokens for r in batched)
    assert len({r.text for r in batched}) == len(PROMPTS) and all(r.text.strip() for r in batched)
    for result in batched:
        assert (result.finish_reason == "length") == (result.usage.completion_tokens == 8)


def test_a_remote_code_model_loads_with_the_training_adaptations(tmp_path):
    """A tuned (or base) model of a remote-code family loads as training loads it
    (``pipelines.models.remote_code``): MiniCPM's rotary tables are recomputed after loading, where a
    plain ``from_pretrained`` under transformers 5 leaves them as uninitialised memory."""
    import torch

    from tests.standins import _minicpm_modeling_with_shims, tiny_minicpm

    backend = make_backend(tiny_minicpm(tmp_path / "minicpm"), trust_remote_code=True, max_batch_size=2)
    reference = _minicpm_modeling_with_shims().MiniCPMRotaryEmbedding(16, 512, 10000.0)  # head_dim 64 / 4 heads
    rotary = backend.model.model.layers[0].self_attn.rotary_emb
    for name in ("inv_freq", "cos_cached", "sin_cached"):
        assert torch.equal(getattr(rotary, name), getattr(reference, name)), name
    assert backend.model.generation_config is not None and backend.model.can_generate()
