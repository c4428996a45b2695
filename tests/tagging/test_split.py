"""Generation / evaluation split (issue 11, defect 7) and demonstrations: seeded or nearest by
embedding, from the generation split, and for datasets with few rows per concept (defect 1) topped
up from other concepts or a file."""

import json
import os
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipelines.tagging.data import FieldMap, TaggingDataConfig, TaggingExample, limit_examples, read_examples
from pipelines.tagging.split import (
    DemoConfig,
    EmptyEvaluationSplit,
    SplitConfig,
    build_demonstrations,
    question_key,
    split_examples,
)

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("EDUMAS_SHARED_DIR") or ROOT.parent / "shared")  # ../shared, as params name it
SHARED_CSV = SHARED / "data" / "tagging" / "mathfish_few_shot_entailment.csv"


def one_row_per_concept(n=24) -> list[TaggingExample]:
    """A MathFish-style set: one labelled question per standard, half of them positive."""
    return [
        TaggingExample(f"r{i}", f"std-{i}", f"Standard {i}: work with topic {i}.", f"Question {i}?", i % 2)
        for i in range(n)
    ]


def test_split_by_row_is_disjoint_seeded_and_keeps_label_shares():
    rows = read_examples(TaggingDataConfig(), ROOT)
    split = split_examples(rows, SplitConfig(by="row", evaluation_share=0.67, seed=1))
    gen, ev = {e.id for e in split.generation}, {e.id for e in split.evaluation}
    assert not gen & ev and len(gen) + len(ev) == 108
    assert abs(len(ev) - 0.67 * 108) <= 1  # whole question-text groups (the demo set repeats 3 rows) move together
    assert not {question_key(e.question) for e in split.generation} & {
        question_key(e.question) for e in split.evaluation
    }
    for concept in {e.concept for e in rows}:  # every concept keeps rows on both sides
        assert any(e.concept == concept for e in split.generation)
        assert any(e.concept == concept for e in split.evaluation)
    assert abs(sum(e.label for e in split.evaluation) / len(ev) - sum(e.label for e in rows) / 108) < 0.05
    assert [e.id for e in split_examples(rows, SplitConfig(seed=1)).evaluation] == [e.id for e in split.evaluation]
    assert [e.id for e in split_examples(rows, SplitConfig(seed=2)).evaluation] != [e.id for e in split.evaluation]
    record = split.record()
    assert record["by"] == "row" and record["counts"] == {"generation": len(gen), "evaluation": len(ev)}
    assert set(record["ids"]["evaluation"]) == ev


def test_split_by_concept_keeps_every_knowledge_id_on_one_side():
    rows = read_examples(TaggingDataConfig(), ROOT)
    split = split_examples(rows, SplitConfig(by="concept", evaluation_share=0.5, seed=0))
    gen_ids = {e.knowledge_id for e in split.generation}
    ev_ids = {e.knowledge_id for e in split.evaluation}
    assert gen_ids and ev_ids and not gen_ids & ev_ids  # en and zh rows of one id stay together
    assert len(ev_ids) == 3


# issue 21: split by question text, not row id
def test_rows_sharing_a_question_text_stay_on_one_side():
    rows = []
    for i in range(12):  # MathFish-style: each question paired with two standards, one aligned
        question = f"Question {i}: what is {i} + {i}?"
        rows.append(TaggingExample(f"p{i}", f"std-{i}", f"Standard {i}.", question, 1))
        rows.append(TaggingExample(f"n{i}", f"std-{i + 100}", f"Standard {i + 100}.", f"  {question.upper()} ", 0))
    rows += [TaggingExample("dup", "std-0", "Standard 0.", "Question 0: what is 0 + 0?", 1)]  # a repeated row
    for by, share in (("row", 0.84), ("row", 0.5), ("concept", 0.5)):
        split = split_examples(rows, SplitConfig(by=by, evaluation_share=share))
        held_out = {question_key(e.question) for e in split.evaluation}
        assert split.generation and split.evaluation
        assert not held_out & {question_key(e.question) for e in split.generation}, by
        if by == "concept":  # and no knowledge id on both sides
            assert not {e.knowledge_id for e in split.evaluation} & {e.knowledge_id for e in split.generation}
    split = split_examples(rows, SplitConfig(by="row", evaluation_share=0.84))
    assert len(split.evaluation) in (20, 21) and Counter(e.label for e in split.generation) == {0: 2, 1: 2}


def test_demonstrations_never_show_a_row_its_own_question_text(tmp_path):
    rows = [
        TaggingExample("a", "k", "Def.", "Same question?", 1),
        TaggingExample("b", "k", "Def.", "same  QUESTION?", 1),  # the same text, another row
        TaggingExample("c", "k", "Def.", "Other question?", 1),
        TaggingExample("d", "k", "Def.", "A negative?", 0),
    ]
    demos = build_demonstrations(rows, DemoConfig(k=2, pool_per_concept=4))
    assert [d.id for d in demos.for_example(rows[0])] == ["c", "d"]
    assert {d.id for d in demos.own_pool(rows[1])} == {"c", "d"}
    extra = tmp_path / "demos.jsonl"  # a fallback file holding an evaluated question is filtered
    extra.write_text(
        '{"id": "f1", "definition": "D.", "question": "Held out?", "label": 1}\n'
        '{"id": "f2", "definition": "D.", "question": "Free?", "label": 1}\n'
    )
    held_out = [TaggingExample("e", "k2", "Def 2.", "held OUT?", 0)]
    cfg = DemoConfig(k=2, fallback="file", file=TaggingDataConfig(path=str(extra)))
    shown = build_demonstrations([], cfg, root=tmp_path, held_out=held_out).for_example(held_out[0])
    assert [d.id for d in shown] == ["f2"]


def test_few_rows_per_concept_take_demonstrations_from_other_concepts():
    rows = one_row_per_concept(24)
    split = split_examples(rows, SplitConfig(by="row", evaluation_share=0.84))
    assert len(split.evaluation) == 20 and len(split.generation) == 4
    assert Counter(e.label for e in split.generation) == {0: 2, 1: 2}
    demos = build_demonstrations(split.generation, DemoConfig(k=2, fallback="other_concepts"))
    for example in split.evaluation:
        shown = demos.for_example(example)
        assert len(shown) == 2 and {d.label for d in shown} == {0, 1}
        assert all(d.id not in {e.id for e in split.evaluation} for d in shown)
    for example in split.generation:  # a generation row never sees itself as a demonstration
        assert example.id not in {d.id for d in demos.for_example(example)}
    none = build_demonstrations(split.generation, DemoConfig(k=2, fallback="none"))
    assert none.for_example(split.evaluation[0]) == []


def test_concepts_with_enough_rows_keep_their_own_pool():
    rows = read_examples(TaggingDataConfig(), ROOT)
    split = split_examples(rows, SplitConfig())
    demos = build_demonstrations(split.generation, DemoConfig(k=2, pool_per_concept=3))
    for example in split.evaluation:
        shown = demos.for_example(example)
        assert len(shown) == 2 and all(d.concept == example.concept for d in shown)
        assert {d.label for d in shown} == {0, 1}


def test_demonstrations_from_a_separate_labelled_file(tmp_path):
    extra = tmp_path / "demos.jsonl"
    extra.write_text(
        '{"id": "d1", "definition": "Other standard.", "question": "Q yes?", "label": 1}\n'
        '{"id": "d2", "definition": "Other standard.", "question": "Q no?", "label": 0}\n'
    )
    rows = one_row_per_concept(4)
    cfg = DemoConfig(k=2, fallback="file", file=TaggingDataConfig(path=str(extra)))
    demos = build_demonstrations([], cfg, root=tmp_path)
    assert [d.id for d in demos.for_example(rows[0])] == ["d1", "d2"]


def test_an_empty_evaluation_split_is_a_clear_error():
    with pytest.raises(EmptyEvaluationSplit, match="split.evaluation_share"):
        split_examples(one_row_per_concept(1), SplitConfig(evaluation_share=0.3))
    with pytest.raises(EmptyEvaluationSplit, match="data.path"):
        split_examples([], SplitConfig())


def mathfish_params_from_readme() -> dict:
    """The ``tagging`` params docs/tagging.md documents for the shared MathFish CSV."""
    readme = (ROOT / "docs" / "tagging.md").read_text(encoding="utf-8")
    start = readme.index("# mathfish-params")
    block = readme[start : readme.index("```", start)]
    return yaml.safe_load(textwrap.dedent(block))["tagging"]


def test_shared_mathfish_csv_evaluates_at_least_20_pairs_by_the_documented_params():
    if not SHARED_CSV.exists():
        pytest.skip(f"shared data not found at {SHARED_CSV} (optional; only the demo set is required)")
    params = mathfish_params_from_readme()
    data = TaggingDataConfig.model_validate(params["data"])
    assert data.fields == FieldMap.model_validate(params["data"]["fields"])
    assert data.path.startswith("../shared/")
    rows = read_examples(data, root=SHARED)  # <SHARED>/../shared/... is the shared folder
    split = split_examples(rows, SplitConfig.model_validate(params["split"]))
    demos = build_demonstrations(split.generation, DemoConfig.model_validate(params["demos"]), root=ROOT)
    assert len(split.evaluation) >= 20
    assert all(len(demos.for_example(e)) == 2 for e in split.evaluation)


def _stage_prompts(tmp_path: Path, params: dict) -> tuple[dict, list[dict]]:
    """Run the stage (team + single LLM, scripted text replies) on ``params``; (split.json, traces)."""
    from pipelines.llm.client import LLMRuntime, backend_key
    from pipelines.llm.scripted import ScriptedBackend
    from pipelines.tagging.config import TaggingConfig
    from pipelines.tagging.run import generate_tagging
    from tests.tagging.scripted import STAGE_REPLIES

    chinese = ["任务规划者", "解题者", "语义判断者", "第一步", "第二步", "数学老师"]  # the same agents in Chinese
    replies = [(f"{r['match']}|{zh}", r["reply"]) for r, zh in zip(STAGE_REPLIES, chinese, strict=True)]
    base = {"systems": ["team", "single_llm"], "output_mode": "text", "progress": False,
            "llm": {"default": {"kind": "scripted", "replies": "unused"}, "cache": None}}  # fmt: skip
    cfg = TaggingConfig.model_validate({**base, **params})
    runtime = LLMRuntime(cfg.llm, backends={backend_key(cfg.llm.default): ScriptedBackend(replies)})
    generate_tagging(cfg, root=tmp_path, runtime=runtime)
    generated = tmp_path / cfg.outputs.generated_dir
    traces = [json.loads(line) for line in (generated / "traces.jsonl").read_text(encoding="utf-8").splitlines()]
    return json.loads((generated / "split.json").read_text(encoding="utf-8")), traces


def _assert_no_question_leaks(rows: list[TaggingExample], split: dict, traces: list[dict]) -> int:
    by_id = {r.id: r for r in rows}
    generation = {question_key(by_id[i].question) for i in split["ids"]["generation"]}
    evaluation = [by_id[i] for i in split["ids"]["evaluation"]]
    assert not {question_key(e.question) for e in evaluation} & generation  # not in the generation split
    shown = 0
    for row in traces:  # nor among its own demonstrations: its text is in each prompt once, as the question
        if row["agent"] in ("single_llm", "semantic_judge"):
            text = " ".join(m["content"] for m in row["prompt"])
            assert text.count(by_id[row["sample_id"]].question) == 1, (row["agent"], row["sample_id"])
            shown += 1
    return shown


# issue 21: no evaluated question text sits in the generation split or among its own demonstrations
def test_no_question_text_leaks_on_the_shipped_data(tmp_path):
    rows = read_examples(TaggingDataConfig(), ROOT)
    params = {"data": {"path": str(ROOT / "data/tagging/demo.jsonl"), "limit": 24}, "split": {"generation_limit": 12}}
    split, traces = _stage_prompts(tmp_path, params)
    assert _assert_no_question_leaks(rows, split, traces) >= 24 + 36


def test_no_question_text_leaks_on_mathfish(tmp_path):
    if not SHARED_CSV.exists():
        pytest.skip(f"shared data not found at {SHARED_CSV} (optional; only the demo set is required)")
    params = mathfish_params_from_readme()
    params["data"] = {**params["data"], "path": str(SHARED_CSV)}
    rows = read_examples(TaggingDataConfig.model_validate(params["data"]))
    assert len({question_key(r.question) for r in rows}) < len(rows)  # MathFish pairs one question with two standards
    split, traces = _stage_prompts(tmp_path, params)
    assert len(split["ids"]["evaluation"]) >= 20
    assert _assert_no_question_leaks(rows, split, traces) >= 2 * 20


def test_demonstrations_come_from_the_generation_split_and_are_seeded():
    rows = read_examples(TaggingDataConfig(), ROOT)
    split = split_examples(rows, SplitConfig())
    evaluated = {e.id for e in split.evaluation}
    demos = build_demonstrations(split.generation, DemoConfig(pool_per_concept=3, k=2, seed=1))
    shown = {e.concept: [d.id for d in demos.for_example(e)] for e in split.evaluation}
    assert not {d for ids in shown.values() for d in ids} & evaluated
    again = build_demonstrations(split.generation, DemoConfig(pool_per_concept=3, k=2, seed=1))
    assert shown == {e.concept: [d.id for d in again.for_example(e)] for e in split.evaluation}
    other = build_demonstrations(split.generation, DemoConfig(pool_per_concept=3, k=2, seed=2))
    assert shown != {e.concept: [d.id for d in other.for_example(e)] for e in split.evaluation}
    evaluation = split.evaluation
    picked = limit_examples(evaluation, 12, seed=0)
    assert len(picked) == 12 and len({e.knowledge_id for e in picked}) == 6
    six = limit_examples(evaluation, 6, seed=0)
    assert len({e.knowledge_id for e in six}) == 6 and {e.label for e in six} == {0, 1}
    assert {e.language for e in six} == {"en", "zh"}


def test_nearest_strategy_ranks_by_embedding():
    rows = read_examples(TaggingDataConfig(), ROOT)
    split = split_examples(rows, SplitConfig())

    def embed(texts):  # definition first; questions scored by their length (a stand-in embedding)
        return np.array([[1.0, 0.0]] + [[1.0, len(t) / 100] for t in texts[1:]])

    demos = build_demonstrations(split.generation, DemoConfig(strategy="nearest", pool_per_concept=4, k=2), embed=embed)
    for example in split.evaluation:
        shown = demos.for_example(example)
        positives = sorted((p for p in demos.pools[example.concept] if p.label == 1), key=lambda p: len(p.question))
        assert shown[0] is positives[0]  # the closest (shortest) positive comes first
