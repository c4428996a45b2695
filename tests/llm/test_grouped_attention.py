"""Grouped-query attention in padded batches (pipelines/llm/grouped_attention.py): the same logits and
greedy tokens as transformers' ``sdpa`` (which copies the key/value heads when a mask is given), on a
tiny Qwen2 with 4 query and 2 key/value heads; the backend switches native models to it."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.llm.config import TransformersBackendConfig
from pipelines.llm.grouped_attention import NAME, grouped_sdpa_attention, use_grouped_attention
from pipelines.llm.transformers_backend import TransformersBackend
from pipelines.llm.types import SamplingParams
from tests.tiny_models import tiny_qwen2

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PROMPTS = ["What is 2+2? Think step by step and explain each step.", "Hi", "Name three red fruits and a green one."]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return tiny_qwen2(tmp_path_factory.mktemp("gqa") / "qwen2", init_std=0.3)


def _model(folder, attention: str):
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation=attention).eval()
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped heads to keep
    return model


def _batch(folder):
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    tokenizer.padding_side = "left"
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
             for p in PROMPTS]  # fmt: skip
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert not batch["attention_mask"].all()  # padded: the path that used to copy the heads
    return batch


def test_padded_batch_gives_sdpas_logits_and_greedy_tokens(tiny_dir):
    batch = _batch(tiny_dir)
    stock, grouped = _model(tiny_dir, "sdpa"), _model(tiny_dir, "sdpa")
    assert use_grouped_attention(grouped) and grouped.config._attn_implementation == NAME
    with torch.inference_mode():
        real = batch["attention_mask"].bool()
        ours, theirs = grouped(**batch).logits[real], stock(**batch).logits[real]
        assert torch.allclose(ours, theirs, atol=1e-5, rtol=1e-5), (ours - theirs).abs().max()
        steps = {"max_new_tokens": 12, "do_sample": False}
        assert torch.equal(grouped.generate(**batch, **steps), stock.generate(**batch, **steps))


def test_the_masked_call_really_keeps_the_heads_grouped(monkeypatch):
    """The masked path must not fall back to sdpa's copying function (else nothing is saved)."""
    import transformers.integrations.sdpa_attention as sdpa

    def copying(*args, **kwargs):
        raise AssertionError("the masked call went through repeat_kv")

    monkeypatch.setattr(sdpa, "repeat_kv", copying)
    module = type("Attention", (), {"num_key_value_groups": 2, "training": False})()
    query, key, value = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    mask = torch.ones(2, 1, 3, 5, dtype=torch.bool)
    mask[0, ..., :2] = False
    out, _ = grouped_sdpa_attention(module, query, key, value, mask)
    wide = torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1), attn_mask=mask
    )
    assert out.shape == (2, 3, 4, 8) and torch.allclose(out, wide.transpose(1, 2), atol=1e-6)


def test_other_attention_implementations_are_left_alone(tiny_dir):
    eager = _model(tiny_dir, "eager")
    assert use_grouped_attention(eager) is False and eager.config._attn_implementation == "eager"


def test_the_backend_runs_native_models_with_grouped_attention(tiny_dir):
    backend = TransformersBackend(TransformersBackendConfig(kind="transformers", model=str(tiny_dir), max_batch_size=4))

    async def ask():
        params = SamplingParams(max_tokens=4, temperature=0.0)
        return await asyncio.gather(*(backend.chat([{"role": "user", "content": p}], params) for p in PROMPTS))

    replies = asyncio.run(ask())
    assert len(replies) == len(PROMPTS) and backend.model.config._attn_implementation == NAME
