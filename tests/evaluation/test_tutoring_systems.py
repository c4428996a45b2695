"""Tutoring baselines on scripted models: one HTS row, judgments and bootstrap deltas per baseline;
a reference_team baseline's reply is the RAM2C E group's synthesis of the reference model's draft;
the strict baselines config."""

from __future__ import annotations

import asyncio
import re

import pytest

from pipelines.config import ConfigError, validate_section
from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.arms.tutoring import evaluate_tutoring
from pipelines.evaluation.arms.tutoring_baselines import baseline_roles
from pipelines.evaluation.evaluate import needed_sections, tables_markdown
from pipelines.evaluation.hts.judging import tuned_position
from pipelines.evaluation.report.inputs import evaluate_sections
from pipelines.evaluation.report.plot_data import plot_rows
from pipelines.io import read_jsonl
from pipelines.llm.client import backend_key
from pipelines.llm.config import ScriptedBackendConfig
from pipelines.llm.scripted import ScriptedBackend
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.students import make_personas, persona_by_id
from tests.evaluation.evaluate_fixtures import BASE_REPLY, TUNED_REPLY, jsonl, write_dpo_data
from tests.ram2c.scripted import DOCS, FakeRetriever, rules

GLM_DRAFT = "GLM draft: tell me more?"
TEAM_REPLY = f"E:Ms. Reyes[P:Dr. Hart[T:Ms. Lin[{GLM_DRAFT}]]]"  # each group's first reviser, in order
BASE_SPEC = ScriptedBackendConfig(kind="scripted", model="scripted-base", replies="unused.jsonl")
TUNED_SPEC = ScriptedBackendConfig(kind="scripted", model="scripted-tuned", replies="unused.jsonl")
GLM_SPEC = ScriptedBackendConfig(kind="scripted", model="scripted-glm", replies="unused.jsonl")


def rank(reply: str) -> int:
    """The judges' taste: base < tuned = team reply < the GLM draft alone."""
    if reply.startswith("E:"):
        return 2
    return {BASE_REPLY: 1, TUNED_REPLY: 2, GLM_DRAFT: 3}[reply]


def judge(messages) -> str:
    user = messages[-1]["content"]
    a, b = re.search(r"Reply A:\n(.*)\n\nReply B:\n(.*)$", user, re.S).groups()
    ra, rb = rank(a.strip()), rank(b.strip())
    return "They differ.\nVerdict: " + ("A" if ra > rb else "B" if rb > ra else "equal")


def backends() -> dict:
    """Base (drafter and judges), tuned, and the reference (drafter and every RAM2C team role)."""
    teacher = r"You are a literature teacher\."  # the fixture prompts' system message
    return {
        backend_key(BASE_SPEC): ScriptedBackend([("Dimension to judge", judge), (teacher, BASE_REPLY)]),
        backend_key(TUNED_SPEC): ScriptedBackend([(teacher, TUNED_REPLY)]),
        backend_key(GLM_SPEC): ScriptedBackend([*rules(), (teacher, GLM_DRAFT)]),
    }


def configs(baselines: list[dict]) -> tuple[Ram2cConfig, EvaluateConfig]:
    ram2c = Ram2cConfig(llm={"default": BASE_SPEC.model_dump(), "cache": None}, output_mode="text", progress=False)
    ev = validate_section(
        {
            "systems": ["tutoring"],
            "progress": False,
            "bootstrap": {"resamples": 100, "seed": 3},
            "tutoring": {
                "tuned_backend": TUNED_SPEC.model_dump(),
                "baselines": baselines,
                "hts": {"mode": "text", "resamples": 100, "judges": [{"name": f"j{k}", "seed": k} for k in (1, 2)]},
            },
        },
        EvaluateConfig,
        section="evaluate",
    )
    return ram2c, ev


def run(root, baselines: list[dict], *, retriever=None, built: dict | None = None) -> dict:
    ram2c, ev = configs(baselines)
    built = backends() if built is None else built
    return asyncio.run(evaluate_tutoring(ram2c, ev, root=root, backends=built, retriever=retriever))


def calls_with(backend: ScriptedBackend, text: str) -> int:
    return sum(text in m["content"] for messages in backend.calls for m in messages[:1])


ITEMS = ["ram2c-d4-t1", "ram2c-d5-t1", "ram2c-d6-t1"]  # the eval split and the row never trained on


def test_two_baselines_give_two_rows_each_with_its_judgments_and_deltas(tmp_path):
    write_dpo_data(tmp_path)
    glm = {"name": "glm", "kind": "reference", "backend": GLM_SPEC.model_dump()}
    result = run(tmp_path, [{"name": "base", "kind": "base"}, glm])
    section = result["section"]
    rows = section["hts"]["tables"]["1"]["rows"]
    assert list(rows) == ["scripted-tuned vs scripted-base", "scripted-tuned vs glm"]
    for dimension in ("humanized", "teaching", "safety"):
        base_row, glm_row = rows["scripted-tuned vs scripted-base"][dimension], rows["scripted-tuned vs glm"][dimension]
        assert (base_row["score"], base_row["better"], base_row["n"]) == (100.0, 6, 6)  # 3 items x 2 judges
        assert (glm_row["score"], glm_row["worse"], glm_row["n"]) == (0.0, 6, 6)
    assert section["n"] == 3 and section["failed_replies"] == {"base": 0, "tuned": 0, "glm": 0}
    assert section["baselines"] == {
        "base": {"kind": "base", "models": "scripted-base", "row": "scripted-tuned vs scripted-base", "n": 3},
        "glm": {"kind": "reference", "models": "scripted-glm", "row": "scripted-tuned vs glm", "n": 3},
    }
    deltas = {(r["system"], r["metric"]): (r["tuned"], r["base"], r["delta"], r["n"]) for r in result["deltas"]}
    assert deltas == {
        **{("responder", f"hts_{d}"): (100.0, 50.0, 50.0, 3) for d in ("humanized", "teaching", "safety")},
        **{("responder", f"hts_{d}_vs_glm"): (0.0, 50.0, -50.0, 3) for d in ("humanized", "teaching", "safety")},
    }
    out = tmp_path / "data/evaluate/tutoring"
    assert {t["parsed"] for t in read_jsonl(out / "glm/traces.jsonl")} == {GLM_DRAFT}
    for path in (out / "judgments.jsonl", out / "glm/judgments.jsonl"):
        judgments = read_jsonl(path)
        assert sorted({j["item_id"] for j in judgments}) == ITEMS and len(judgments) == 18
        assert all(j["tuned_position"] == tuned_position(j["item_id"], 0) for j in judgments)  # randomised per item
    glm_prompts = [r["prompt"][-1]["content"] for r in read_jsonl(out / "glm/judge_traces.jsonl") if "prompt" in r]
    assert glm_prompts and all(GLM_DRAFT in p and TUNED_REPLY in p for p in glm_prompts)
    assert [s.model for s in result["specs"]] == ["scripted-base", "scripted-tuned", "scripted-glm"]
    # the report shows every row: HTS Table 1, the deltas table and the plot data
    metrics = {"tutoring": section, "deltas": result["deltas"], "deltas_provenance": "scripted"}
    lines = tables_markdown(metrics).splitlines()
    cells = {
        "scripted-tuned vs scripted-base": "100.0 (-) [100.0, 100.0]",
        "scripted-tuned vs glm": "0.0 (-) [0.0, 0.0]",
    }
    for label, cell in cells.items():
        assert f"| {label} | {cell} | {cell} | {cell} |" in lines
    assert "| tutoring | responder | hts_safety_vs_glm | 50.0 | 0.0 | -50.0 | [-50.0, -50.0] | 3 |" in lines
    assert "| tutoring | responder | hts_safety | 50.0 | 100.0 | +50.0 | [+50.0, +50.0] | 3 |" in lines
    _, csv_rows = plot_rows(evaluate_sections(metrics))["hts_scores.csv"]
    assert [(r["comparison"], r["score"]) for r in csv_rows if r["dimension"] == "teaching"] == [
        ("scripted-tuned vs scripted-base", 100.0),
        ("scripted-tuned vs glm", 0.0),
    ]


def test_reference_team_baseline_is_the_e_groups_synthesis_of_the_reference_draft(tmp_path):
    write_dpo_data(tmp_path)
    generated = tmp_path / "data/generated/ram2c/dpo.jsonl"  # d6 (never in a split) loses its student
    rows = read_jsonl(generated)
    for row in rows:
        if row["id"] == "ram2c-d6-t1":
            row["meta"].pop("student")
    jsonl(generated, rows)
    retriever = FakeRetriever(DOCS)
    team = {"name": "glm_r", "kind": "reference_team", "backend": GLM_SPEC.model_dump()}
    built = backends()
    result = run(tmp_path, [team], retriever=retriever, built=built)
    section = result["section"]
    assert section["failed_replies"] == {"tuned": 0, "glm_r": 1} and section["n"] == 2
    rows = section["hts"]["tables"]["1"]["rows"]
    assert list(rows) == ["scripted-tuned vs glm_r"]
    assert all(rows["scripted-tuned vs glm_r"][d]["score"] == 50.0 for d in ("humanized", "teaching", "safety"))
    assert [r["metric"] for r in result["deltas"]] == [f"hts_{d}_vs_glm_r" for d in ("humanized", "teaching", "safety")]
    # per item the groups ran in order, each on its retrieval group, each on the previous group's reply
    for topic in ("topic 4?", "topic 5?"):
        queries = [(g, q) for g, q in retriever.queries if q.startswith(topic)]
        assert [g for g, _ in queries] == ["teacher", "psychologist", "ethics"]
        assert queries[0][1].endswith(GLM_DRAFT) and queries[2][1].endswith(f"P:Dr. Hart[T:Ms. Lin[{GLM_DRAFT}]]")
    assert len(retriever.queries) == 6  # d6 has no student profile: no group ran on it
    traces = read_jsonl(tmp_path / "data/evaluate/tutoring/glm_r/traces.jsonl")
    by_item = {item: [t for t in traces if t["sample_id"] == item] for item in ITEMS}
    for item in ITEMS[:2]:
        steps = [(t.get("group"), t.get("step") or t["agent"]) for t in by_item[item]]
        for group in ("T", "P", "E"):
            assert (group, "retrieval") in steps and (group, "reflection") in steps and (group, "synthesizer") in steps
            assert sum(s == (group, "analyst_reviser") for s in steps) == 3  # three experts each
        synthesis = [t for t in by_item[item] if t.get("group") == "E" and t.get("step") == "synthesizer"]
        (final,) = [t for t in by_item[item] if t.get("step") == "team"]
        assert synthesis[0]["parsed"] == final["parsed"]["reply"] == TEAM_REPLY
        assert final["parsed"]["draft"] == GLM_DRAFT and [g["group"] for g in final["parsed"]["groups"]] == list("TPE")
    glm, base = built[backend_key(GLM_SPEC)], built[backend_key(BASE_SPEC)]  # every team call on the reference
    assert calls_with(glm, "You merge several improved versions") == 2 * 3  # 2 items x 3 groups
    assert calls_with(glm, "Answer in two parts") == 2 * 3 * 3  # x 3 experts
    assert calls_with(base, "You merge several improved versions") == calls_with(base, "Answer in two parts") == 0
    (failed,) = [t for t in by_item["ram2c-d6-t1"] if t.get("step") == "team"]
    assert failed["ok"] is False and "student profile" in failed["error"]
    judge_traces = read_jsonl(tmp_path / "data/evaluate/tutoring/glm_r/judge_traces.jsonl")
    judge_prompts = [r["prompt"][-1]["content"] for r in judge_traces if r["prompt"]]
    assert len(judge_prompts) == 2 * 3 * 2 and all(TEAM_REPLY in p and TUNED_REPLY in p for p in judge_prompts)


def test_persona_by_id_rebuilds_the_dialogues_student():
    personas = make_personas(5, "en", seed=4)
    assert persona_by_id("s3", "en", seed=4) == personas[3]
    assert persona_by_id("s3", "en", seed=5) != personas[3]
    assert [persona_by_id(x, "en") for x in (None, "", "x3", "s", "s-1")] == [None] * 5


def test_default_is_the_base_model_only_and_team_baselines_read_the_knowledge_base():
    cfg = validate_section({}, EvaluateConfig, section="evaluate")
    assert [(b.name, b.kind, b.backend) for b in cfg.tutoring.baselines] == [("base", "base", None)]
    assert needed_sections(cfg) == ["tagging", "kgc", "ram2c"]
    _, ev = configs([{"name": "glm_r", "kind": "reference_team", "backend": GLM_SPEC.model_dump()}])
    assert needed_sections(ev) == ["ram2c", "build_kb", "retrieval"]


GLM = {"kind": "openai", "model": "glm-4", "base_urls": ["https://open.bigmodel.cn/api/paas/v4"]}


@pytest.mark.parametrize(
    "baselines, message",
    [
        ([{"name": "glm", "kind": "frontier", "backend": GLM}], r"baselines\.0\.kind: Input should be 'base'"),
        ([{"name": "base", "kind": "base"}, {"name": "base", "kind": "base"}], "baseline names must be distinct"),
        ([{"name": "glm", "kind": "reference"}], "kind reference needs a backend, e.g. backend: {kind: openai"),
        ([{"name": "glm_r", "kind": "reference_team"}], "kind reference_team needs a backend"),
        ([{"name": "glm", "kind": "base", "backend": GLM}], "remove its backend, or use kind reference"),
        ([{"name": "base", "kind": "reference", "backend": GLM}], "'base' is kept for kind base; rename"),
        ([{"name": "tuned", "kind": "base"}], "'tuned' is the model under test"),
        ([{"name": "a/b", "kind": "reference", "backend": GLM}], r"baselines\.0\.name"),
        ([{"name": "hts_judge", "kind": "reference", "backend": GLM}], "also judge roles"),
        ([{"name": "glm", "kind": "reference", "backend": GLM, "colour": 1}], "colour: unknown key"),
        ([], "evaluate.tutoring.baselines"),
    ],
)
def test_bad_baselines_are_config_errors_saying_the_fix(baselines, message):
    with pytest.raises(ConfigError, match=message):
        validate_section({"tutoring": {"baselines": baselines}}, EvaluateConfig, section="evaluate")


def test_reference_roles_keep_the_ram2c_sampling_unless_the_backend_sets_its_own():
    ram2c = Ram2cConfig(
        llm={
            "default": BASE_SPEC.model_dump(),
            "roles": {"drafter": {"sampling": {"temperature": 0.7}}, "expert": {"sampling": {"max_tokens": 99}}},
        }
    )
    glm = {**GLM, "api_key_env": "ZHIPUAI_API_KEY"}
    _, ev = configs(
        [
            {"name": "glm", "kind": "reference", "backend": glm},
            {"name": "glm_r", "kind": "reference_team", "backend": {**glm, "sampling": {"temperature": 0.2}}},
        ]
    )
    roles = baseline_roles(ram2c, ev.tutoring.baselines, drafter="drafter")
    assert roles["glm"].sampling.temperature == 0.7 and roles["glm"].api_key_env == "ZHIPUAI_API_KEY"
    assert {"glm_r", "glm_r/expert", "glm_r/synthesizer", "glm_r/query_rewriter"} <= set(roles)
    assert all(roles[r].model == "glm-4" and roles[r].sampling.temperature == 0.2 for r in roles if r != "glm")
    assert "glm/expert" not in roles  # a plain reference runs no team


def test_the_readme_example_is_valid_params():
    import yaml

    from tests.evaluation.evaluate_fixtures import ROOT

    readme = (ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "kind: reference_team" in b]
    cfg = validate_section(yaml.safe_load(block)["evaluate"], EvaluateConfig, section="evaluate")
    assert [(b.name, b.kind) for b in cfg.tutoring.baselines] == [
        ("base", "base"),
        ("glm", "reference"),
        ("glm_r", "reference_team"),
    ]
    assert {b.backend.api_key_env for b in cfg.tutoring.baselines[1:]} == {"ZHIPUAI_API_KEY"}
    assert needed_sections(cfg) == ["tagging", "kgc", "ram2c", "build_kb", "retrieval"]
