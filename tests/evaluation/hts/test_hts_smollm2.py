"""HTS judging end to end on the offline default model (SmolLM2-135M-Instruct, transformers):
real prompts rendered, real replies generated, each parsed or counted as failed, scored."""

import asyncio

import pytest

from pipelines.evaluation.hts.agents.pairwise_judge import make_pairwise_judge
from pipelines.evaluation.hts.judging import HTSItem, Judge, judge_items
from pipelines.evaluation.hts.scoring import hts_scores
from pipelines.llm.client import LLMRuntime
from pipelines.llm.config import LLMConfig
from pipelines.llm.types import SamplingParams
from tests.tiny_models import smollm2_dir

ITEMS = [
    HTSItem(
        "robinson-1",
        "Why does Robinson Crusoe keep a diary on the island?",
        "I think he writes so he does not feel so lonely.",
        "What a thoughtful idea! Writing can keep us company. What would you write on your first day?",
        "Correct. He keeps a diary.",
    ),
    HTSItem(
        "robinson-2",
        "What does Robinson learn from building his boat?",
        "That you have to plan before you start.",
        "Planning matters. The boat was too heavy.",
        "Yes! He learned it the hard way, like when we build something and it falls. What have you planned lately?",
    ),
]


@pytest.mark.slow
def test_two_seeded_judges_on_the_default_model(one_torch_thread):
    runtime = LLMRuntime(
        LLMConfig.model_validate(
            {"default": {"kind": "transformers", "model": str(smollm2_dir()), "max_batch_size": 8}, "cache": None}
        )
    )
    base = runtime.for_role("hts_judge").default_params
    judges = [
        Judge(f"smollm2-seed{seed}", runtime.for_role("hts_judge", SamplingParams(
            temperature=0.7, max_tokens=48, seed=seed, top_p=base.top_p)))
        for seed in (1, 2)
    ]  # fmt: skip

    async def go():
        try:
            agent = make_pairwise_judge(max_attempts=1)
            return await judge_items(ITEMS, judges, seed=0, dimensions=["teaching"], concurrency=4, agent=agent)
        finally:
            await runtime.close()

    judgments, report = asyncio.run(go())
    assert len(judgments) == 2 * 2 and report.failures == 0
    rows = report.trace_rows()
    assert len(rows) == 4 and all(r["reply"] for r in rows)  # the model really answered every call
    assert {r["judge"] for r in rows} == {"smollm2-seed1", "smollm2-seed2"}
    for j in judgments:
        assert (j.outcome is None) == (not j.ok)  # parsed and mapped back, or counted as failed
    scores = hts_scores(judgments, resamples=50)["teaching"]
    assert scores["n"] + scores["failed"] == 4
    assert scores["score"] is None or 0.0 <= scores["score"] <= 100.0
