"""Stage ``evaluate`` (tutoring only) with a team system (GLM-R: the reference model's drafts
rewritten by the RAM2C team on the reference backend) on a real knowledge base (``data/kb_sources``
embedded with the offline MiniLM) and scripted models: the stage loads the ``build_kb`` /
``retrieval`` sections, the team retrieves real documents, rewrites the query on the reference
backend, votes, and the E group's synthesis is the system's reply."""

from __future__ import annotations

import json

import pytest
import yaml

from pipelines.io import read_jsonl
from stages.evaluate import main
from tests.demo_kb import build_demo_kb
from tests.evaluation.evaluate_fixtures import BASE_REPLY, TUNED_REPLY, jsonl, write_dpo_data

pytestmark = pytest.mark.slow  # builds a knowledge base with MiniLM (~30-60 s on 2 shared cores)
GLM_DRAFT = "GLM draft: what made Crusoe go to sea?"
GLM_R = "GLM-R reply: you noticed his courage! What would you have done?"
TEACHER = r"You are a literature teacher\."
REVISED = "Revised: what made Crusoe brave?"
GLM_RULES = [
    {"match": "Judge every document", "reply": "1: yes\n2: yes\n3: no"},
    {"match": "Rewrite the search query", "reply": '{"rewrites": ["why Crusoe was brave"]}'},  # json mode
    {
        "match": "Answer in two parts",  # expert_call joint: the analysis, then the revision
        "reply": "Analysis: The student sees courage; the reply could ask why.\nReply: " + REVISED,
    },
    {"match": "You merge several improved versions", "reply": GLM_R},
    {"match": TEACHER, "reply": GLM_DRAFT},
]


def test_reference_team_baseline_through_the_stage(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EDUMAS_TRACKING", "0")
    build, retrieval = build_demo_kb(tmp_path, n_rewrites=1)
    write_dpo_data(tmp_path)
    scripted = {
        name: jsonl(tmp_path / f"{name}.jsonl", rules)
        for name, rules in {
            "base": [
                {"match": "Dimension to judge", "reply": "Fine.\nVerdict: A"},
                {"match": TEACHER, "reply": BASE_REPLY},
            ],
            "tuned": [{"match": TEACHER, "reply": TUNED_REPLY}],
            "glm": GLM_RULES,
        }.items()
    }
    glm = {"kind": "scripted", "model": "scripted-glm", "replies": str(scripted["glm"])}
    params = {
        "build_kb": build.model_dump(mode="json"),
        "retrieval": retrieval.model_dump(mode="json"),
        "ram2c": {
            "output_mode": "text",
            "progress": False,
            "experts_per_group": 2,
            "llm": {"default": {"kind": "scripted", "replies": str(scripted["base"])}, "cache": "cache/llm.sqlite"},
        },
        "evaluate": {
            "systems": ["tutoring"],
            "progress": False,
            "bootstrap": {"resamples": 50},
            "tutoring": {
                "tuned_backend": {"kind": "scripted", "model": "scripted-tuned", "replies": str(scripted["tuned"])},
                "items": 3,
                "new_prompts": False,
                "systems": [
                    {"name": "base", "kind": "base"},
                    {"name": "glm", "kind": "reference", "backend": glm},
                    {"name": "glm_r", "kind": "team", "draft": "glm", "backend": glm},
                ],
                "comparisons": {"table_1": [["tuned", "base"]], "table_2": [["tuned", "glm_r"]]},
                # the scripted judges answer "A" every time: kept here (this test is the team baseline's wiring;
                # withholding such judges is tests/evaluation/hts/test_hts_validity.py's)
                "hts": {"mode": "text", "resamples": 50, "judges": [{"name": f"j{k}", "seed": k} for k in (1, 2)],
                        "validity": {"max_constant_share": 1.0, "alpha": 1e-9}},
            },
        },
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["--params", str(tmp_path / "params.yaml")]) == 0

    metrics = json.loads((tmp_path / "reports/evaluate/metrics.json").read_text())
    tables = metrics["tutoring"]["hts"]["tables"]
    assert list(tables["1"]["rows"]) == ["scripted-tuned vs scripted"]
    assert list(tables["2"]["rows"]) == ["scripted-tuned vs glm-R"]
    assert metrics["tutoring"]["comparisons"]["tuned_vs_glm_r"]["n"] == 3
    assert metrics["tutoring"]["failed_replies"]["glm_r"] == 0
    assert [r["metric"] for r in metrics["deltas"]] == [
        *(f"hts_{d}" for d in ("humanized", "teaching", "safety")),
        *(f"hts_{d}_vs_glm_r" for d in ("humanized", "teaching", "safety")),
    ]
    traces = read_jsonl(tmp_path / "data/evaluate/tutoring/replies/glm_r/traces.jsonl")
    for item in ("ram2c-d4-t1", "ram2c-d5-t1", "ram2c-d6-t1"):
        mine = [t for t in traces if t["sample_id"] == item]
        hits = {t["group"]: t["parsed"]["hits"] for t in mine if t.get("step") == "retrieval"}
        assert set(hits) == {"T", "P", "E"} and all(hits.values())  # real documents from the store
        kinds = {g: {h["kind"] for h in found} for g, found in hits.items()}
        assert kinds["E"] <= set(retrieval.groups["ethics"]) and kinds["P"] <= set(retrieval.groups["psychologist"])
        assert [t["parsed"] for t in mine if t.get("step") == "query_rewriter"] == [["why Crusoe was brave"]]
        votes = [t for t in mine if t.get("step") == "reflection"]
        assert len(votes) == 3 and all(len(v["parsed"]["documents"]) == 3 for v in votes)  # reflection.candidates
        (final,) = [t for t in mine if t.get("step") == "team"]
        (synthesis,) = [t for t in mine if t.get("group") == "E" and t.get("step") == "synthesizer"]
        assert synthesis["parsed"] == final["parsed"]["reply"] == GLM_R and final["parsed"]["draft"] == GLM_DRAFT
        experts = [t for t in mine if t.get("step") == "analyst_reviser"]
        assert len(experts) == 3 * 2 and all(t["parsed"]["reply"] == REVISED for t in experts)
        assert f"Version 2: {REVISED}" in synthesis["prompt"][-1]["content"]
    judged = [r for r in read_jsonl(tmp_path / "data/evaluate/tutoring/comparisons/tuned_vs_glm_r/traces.jsonl")
              if r.get("prompt")]  # fmt: skip
    assert len(judged) == 3 * 3 * 2 and all(GLM_R in r["prompt"][-1]["content"] for r in judged)
    assert "| scripted-tuned vs glm-R |" in (tmp_path / "reports/evaluate/tables.md").read_text()
