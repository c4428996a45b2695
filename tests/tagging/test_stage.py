"""Stage generate@tagging end to end on scripted replies: every output, in the shared formats."""

import json
import textwrap
from pathlib import Path

import pytest

from pipelines.config import ConfigError, validate_section
from pipelines.tagging.config import TaggingConfig
from stages.generate_tagging import main
from tests.tagging.scripted import STAGE_REPLIES

ROOT = Path(__file__).resolve().parents[2]
REPLIES = STAGE_REPLIES


def write_params(tmp_path: Path, **overrides) -> Path:
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps(r) + "\n" for r in REPLIES))
    params = tmp_path / "params.yaml"
    params.write_text(
        textwrap.dedent(f"""\
        tagging:
          data: {{path: {ROOT / "data/tagging/demo.jsonl"}, languages: [en], limit: 12}}
          demos: {{pool_per_concept: 3, k: 2}}
          systems: [team, single_llm]
          output_mode: {overrides.get("mode", "text")}
          concurrency: 8
          progress: false
          llm:
            default: {{kind: scripted, replies: {replies}}}
            cache: cache/llm.sqlite
          team: {{failure_policy: {overrides.get("policy", "no")}}}
        """)
    )
    return params


def test_stage_writes_metrics_table_plot_traces_and_sft(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--params", str(write_params(tmp_path))]) == 0
    reports, generated = tmp_path / "reports/generate_tagging", tmp_path / "data/generated/tagging"
    metrics = json.loads((reports / "metrics.json").read_text())
    assert metrics["output_mode"] == "text" and metrics["failed_samples"] == 0
    assert metrics["n_evaluated"] == 12 and metrics["n_demonstration_pool"] == 20
    assert metrics["n_generation_run"] == 20 and metrics["split"]["by"] == "row"
    assert metrics["split"]["counts"] == {"generation": 20, "evaluation": 40}
    team, single = metrics["systems"]["team"], metrics["systems"]["single_llm"]
    positives = team["overall"]["confusion"]["tp"] + team["overall"]["confusion"]["fn"]
    assert team["overall"]["recall"] == 1.0 and team["overall"]["confusion"]["fp"] == 12 - positives
    assert single["overall"]["confusion"] == {"tp": 0, "fp": 0, "tn": 12 - positives, "fn": positives}
    assert team["overall"]["coverage"] == 1.0 and metrics["failure_outcome"] == "wrong"
    assert set(team["per_knowledge"]) == {
        "mul_2d_by_1d",
        "add_within_100",
        "price_three_digit",
        "combinations_le_15",
        "sub_with_regrouping",
        "div_with_remainder",
    }
    # planner once per concept (6), then solver + semantic + extractor + writer per question, on
    # the 12 evaluated and the 20 generation pairs
    assert team["questions_run"] == 32 and team["llm_calls_per_question"] == pytest.approx((6 + 4 * 32) / 32)
    assert single["llm_calls_per_question"] == 1.0 and team["tokens_per_question"] > single["tokens_per_question"]
    assert team["failed_subtasks"] == 0 and team["plan_truncation"]["plans"] == 6

    assert team["numerical"] == {"checks": 32, "no_arguments": 0, "no_program": 0, "programs_run": 32,
                                 "verdicts": 32, "no_verdict": 0, "printed_true": 32}  # fmt: skip
    assert team["method"] == "team" and team["size"] == "Base" and team["backbone"] == "scripted"

    # issue 21: the Table 4 layout the summary report shows, the model named per row
    table = (reports / "table.md").read_text()
    assert "| Metric | Model size | Model | Single LLM | Multi-agent team |" in table
    recall = 100 * team["overall"]["recall"]
    assert f"| Recall | Base | scripted | 0.0 | **{recall:.1f}** |" in table
    assert "| Coverage | Base | scripted | 100.0 | 100.0 |" in table
    assert "| Programs run (printed a verdict) | Base | scripted | - | 32 (32) |" in table
    assert "generate_tagging" not in table and "counts as wrong (tagging.failure_outcome: wrong)" in table
    assert (reports / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    usage = json.loads((reports / "usage.json").read_text())
    assert usage["roles"]["planner"]["calls"] == 6 and usage["roles"]["single_llm"]["calls"] == 12
    assert usage["systems"]["team"]["planner"]["calls"] == 6 and "single_llm" not in usage["systems"]["team"]
    assert usage["systems"]["single_llm"]["total"]["calls"] == 12
    assert usage["total"]["calls"] == 6 + 4 * 32 + 12
    assert json.loads((reports / "failures.json").read_text())["failed_samples"] == 0
    assert team["unparseable"]["planner"] == {"replies": 6, "unparseable": 0}

    traces = [json.loads(line) for line in (generated / "traces.jsonl").read_text().splitlines()]
    assert {t["system"] for t in traces} == {"team", "single_llm"}
    writer = [t for t in traces if t["agent"] == "program_writer"]
    assert len(writer) == 32 and all(t["sandbox"]["verdict"] is True for t in writer)
    aggregate = [t for t in traces if t["agent"] == "team"]
    assert len(aggregate) == 32 and all(t["parsed"]["verdict"] is True for t in aggregate)

    # issue 11, defect 7: SFT rows come from the generation split only, recorded for the data card
    split = json.loads((generated / "split.json").read_text())
    evaluation_ids, generation_ids = set(split["ids"]["evaluation"]), set(split["ids"]["generation"])
    assert len(evaluation_ids) == 40 and len(generation_ids) == 20 and not evaluation_ids & generation_ids
    predictions = [json.loads(line) for line in (generated / "predictions.jsonl").read_text().splitlines()]
    evaluated = [p for p in predictions if p["split"] == "evaluation"]
    assert len(predictions) == 32 and len(evaluated) == 12 and {p["id"] for p in evaluated} <= evaluation_ids
    assert set(evaluated[0]["predictions"]) == {"team", "single_llm"}
    generation_rows = [p for p in predictions if p["split"] == "generation"]
    assert all(set(p["predictions"]) == {"team"} for p in generation_rows)
    sft = [json.loads(line) for line in (generated / "sft.jsonl").read_text().splitlines()]
    assert len(sft) == sum(p["label"] for p in generation_rows)  # only right verdicts, generation split only
    assert all(row["meta"]["split"] == "generation" for row in sft)
    assert {row["id"].removeprefix("tagging-") for row in sft} <= generation_ids
    row = sft[0]
    assert row["source"] == "tagging" and row["id"].startswith("tagging-")
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    assert row["messages"][-1]["content"].endswith("<Yes>") and row["meta"]["label"] == 1
    assert "Question:" in row["messages"][1]["content"] and "Reasoning:" in row["messages"][1]["content"]

    # a rerun repeats no finished LLM call: every call comes from the request cache
    assert main(["--params", str(write_params(tmp_path))]) == 0
    again = json.loads((reports / "metrics.json").read_text())
    assert again["systems"]["team"]["overall"] == team["overall"]
    usage = json.loads((reports / "usage.json").read_text())
    assert usage["total"]["cache_hits"] == usage["total"]["calls"]


def test_bad_params_stop_with_a_clear_message(tmp_path, capsys):
    params = write_params(tmp_path, policy="maybe")
    assert main(["--params", str(params)]) == 2
    err = capsys.readouterr().err
    assert "tagging.team.failure_policy" in err and "params.yaml:" in err
    with pytest.raises(ConfigError, match="unknown key"):
        validate_section(
            {"llm": {"default": {"kind": "scripted", "replies": "x"}}, "sytems": []}, TaggingConfig, section="tagging"
        )


JSON_REPLIES = [
    {
        "match": "task planner",
        "reply": json.dumps(
            {
                "constraints": [
                    {"kind": "semantic", "text": "Does the question fit?"},
                    {"kind": "numerical", "text": "Is the first number positive?"},
                ]
            }
        ),
    },
    {"match": "question solver", "reply": json.dumps({"reasoning": "Compute it.", "final_answer": "12"})},
    {"match": "semantic judge", "reply": json.dumps({"reasoning": "It fits.", "answer": "Yes"})},
    {"match": "First step: extract", "reply": json.dumps({"arguments": [{"name": "first", "value": 5}]})},
    {"match": "Second step: write", "reply": json.dumps({"code": "print(first > 0)"})},
    {"match": "expert math teacher", "reply": json.dumps({"reasoning": "Not this one.", "answer": "No"})},
]


def test_json_mode_parses_every_reply_and_exports_sft(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path, mode="json")
    (tmp_path / "replies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in JSON_REPLIES))
    assert main(["--params", str(params)]) == 0
    metrics = json.loads((tmp_path / "reports/generate_tagging/metrics.json").read_text())
    team = metrics["systems"]["team"]
    assert metrics["output_mode"] == "json" and metrics["program"] == "python" and team["failed_subtasks"] == 0
    assert team["numerical"]["programs_run"] == team["numerical"]["verdicts"] == 32  # every check ran in the sandbox
    assert {a: c["unparseable"] for a, c in team["unparseable"].items()} == {
        "arg_extractor": 0,
        "planner": 0,
        "program_writer": 0,
        "semantic_judge": 0,
        "solver": 0,
    }
    assert metrics["systems"]["single_llm"]["unparseable"]["single_llm"] == {"replies": 12, "unparseable": 0}
    generated = tmp_path / "data/generated/tagging"
    predictions = [json.loads(line) for line in (generated / "predictions.jsonl").read_text().splitlines()]
    positives = sum(p["label"] for p in predictions if p["split"] == "generation")
    assert metrics["sft_rows"] == positives > 0  # the team says Yes to every generation pair
    traces = [json.loads(line) for line in (generated / "traces.jsonl").read_text().splitlines()]
    planner = next(t for t in traces if t["agent"] == "planner")
    assert planner["mode"] == "json" and '"maxItems": 5' in planner["prompt"][0]["content"]


def test_failed_calls_over_the_budget_exit_1_after_writing_traces(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path)
    (tmp_path / "replies.jsonl").write_text(json.dumps(REPLIES[0]) + "\n")  # every other agent: LLMError
    assert main(["--params", str(params)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    # 12 evaluated pairs and the 20 generation pairs the team runs on for SFT rows
    assert err[-1].startswith("error: tagging: 32 of 32 samples failed (100% > max_failed_share 20%)")
    assert "scripted backend: no rule matches" in err[-1]
    reports = tmp_path / "reports/generate_tagging"
    summary = json.loads((reports / "failures.json").read_text())
    assert summary["failed_samples"] == 32 and summary["systems"]["team"]["errors"]["llm"] > 0
    assert (tmp_path / "data/generated/tagging/traces.jsonl").stat().st_size > 0
    assert not (reports / "metrics.json").exists()  # no result for DVC to record


@pytest.mark.parametrize(
    "change, message",
    [
        ("limit: 12}", "tagging.data.limit: Input should be greater than or equal to 1 (got -3)"),
        (
            "languages: [en], limit: 12}",
            "unknown role 'numerical_judg' in llm.roles (did you mean 'numerical_judge'?); "
            "valid roles: planner, solver",
        ),
    ],
)
def test_empty_limits_and_unknown_roles_are_config_errors(tmp_path, capsys, change, message):
    params = write_params(tmp_path)
    text = params.read_text()
    if "limit" in message:
        text = text.replace("limit: 12}", "limit: -3}")
    else:
        text = text.replace(
            "    cache: cache/llm.sqlite",
            "    cache: cache/llm.sqlite\n    roles: {numerical_judg: {kind: scripted, replies: x}}",
        )
    params.write_text(text)
    assert main(["--params", str(params)]) == 2
    assert message in capsys.readouterr().err


def test_missing_input_and_empty_evaluation_are_one_line_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path)
    params.write_text(params.read_text().replace(str(ROOT / "data/tagging/demo.jsonl"), "data/missing.jsonl"))
    assert main(["--params", str(params)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1].startswith("error: input not found: ") and "missing.jsonl" in err
    assert "Traceback" not in err
    params = write_params(tmp_path)
    params.write_text(params.read_text().replace("languages: [en]", "knowledge_ids: [no_such_id]"))
    assert main(["--params", str(params)]) == 1
    assert "error: no tagging rows were read; check tagging.data.path and its filters" in capsys.readouterr().err
    params = write_params(tmp_path)  # issue 11, defect 1: an empty evaluation split is a clear error
    params.write_text(
        params.read_text().replace(
            "languages: [en], limit: 12}", "languages: [en], limit: 12}\n  split: {evaluation_share: 0.001}"
        )
    )
    assert main(["--params", str(params)]) == 1
    assert "the evaluation split is empty (60 rows" in capsys.readouterr().err


def test_summary_line_names_coverage_and_the_failure_outcome():
    from pipelines.tagging.interface import TEAM

    overall = {"accuracy": 0.5, "f1": 0.25, "coverage": 0.75}
    metrics = {
        "n_evaluated": 4,
        "output_mode": "json",
        "failure_outcome": "wrong",
        "systems": {"team": {"overall": overall}},
        "sft_rows": 1,
        "n_generation_run": 2,
    }
    assert TEAM.summary(metrics) == (
        "4 pairs evaluated (json mode, failures count as wrong); team: acc 0.500 F1 0.250 coverage 0.75; "
        "1 SFT rows from 2 generation pairs"
    )


# issue 21: a row per backbone (the paper's Base and Large) when params name several
def test_sizes_run_the_llm_systems_per_backbone_in_one_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path)
    replies = tmp_path / "replies.jsonl"
    large = tmp_path / "large.jsonl"  # the Large model says Yes where the Base one says No
    large.write_text("".join(json.dumps({**r, "reply": r["reply"].replace("<No>", "<Yes>")}) + "\n" for r in REPLIES))
    judge = f"{{kind: scripted, model: judge-4o, replies: {replies}}}"
    text = params.read_text().replace(
        "    cache: cache/llm.sqlite\n",
        f"    cache: cache/llm.sqlite\n    roles: {{numerical_judge: {judge}}}\n"
        f"  sizes: {{Large: {{kind: scripted, model: large-7b, replies: {large}}}}}\n",
    )
    params.write_text(text.replace("systems: [team, single_llm]", "systems: [team, single_llm, embedding]"))
    monkeypatch.setattr("pipelines.tagging.run.embedding_baseline.load_embedder", lambda *a, **k: _words)
    assert main(["--params", str(params)]) == 0
    reports, generated = tmp_path / "reports/generate_tagging", tmp_path / "data/generated/tagging"
    metrics = json.loads((reports / "metrics.json").read_text())
    systems = metrics["systems"]
    assert list(systems) == ["team", "team@Large", "single_llm", "single_llm@Large", "embedding"]
    assert systems["team@Large"]["size"] == "Large" and systems["team@Large"]["method"] == "team"
    assert systems["team@Large"]["backbone"] == "large-7b; numerical judge: judge-4o"  # the paper's GPT-4o judge stays
    assert systems["team@Large"]["questions_run"] == 12 and systems["team"]["questions_run"] == 32
    assert systems["single_llm@Large"]["overall"]["recall"] == 1.0 and systems["single_llm"]["overall"]["recall"] == 0
    usage = json.loads((reports / "usage.json").read_text())
    assert usage["roles"]["planner@Large"]["calls"] == 6 and usage["roles"]["single_llm@Large"]["calls"] == 12
    predictions = [json.loads(line) for line in (generated / "predictions.jsonl").read_text().splitlines()]
    assert all(set(p["predictions"]) == {"team"} for p in predictions if p["split"] == "generation")
    sft = [json.loads(line) for line in (generated / "sft.jsonl").read_text().splitlines()]
    assert sft and all(row["meta"]["teacher"] == "scripted" for row in sft)  # SFT rows: the first backbone only
    table = (reports / "table.md").read_text()
    assert (
        "| Metric | Model size | Model | Embedding similarity (all-minilm-l6-v2) | Single LLM | Multi-agent team |"
        in table
    )
    assert "| Recall | Base | scripted (team's numerical judge: judge-4o) | " in table
    assert "|  | Large | large-7b (team's numerical judge: judge-4o) | - | **100.0** | " in table  # baselines: on Base


def _words(texts):
    """A stand-in sentence embedder: a bag of words."""
    import numpy as np

    vocab = sorted({w for t in texts for w in t.lower().split()})
    return np.array([[float(w in t.lower().split()) for w in vocab] for t in texts])


def test_sizes_are_checked():
    base = {"llm": {"default": {"kind": "scripted", "replies": "x"}}}
    with pytest.raises(ConfigError, match="tagging.size"):
        validate_section({**base, "sizes": {"Base": base["llm"]["default"]}}, TaggingConfig, section="tagging")
    with pytest.raises(ConfigError, match="add team or single_llm"):
        validate_section({**base, "systems": ["embedding"], "sizes": {"Large": base["llm"]["default"]}},
                         TaggingConfig, section="tagging")  # fmt: skip
    with pytest.raises(ConfigError, match="sizes"):
        validate_section({**base, "sizes": {"9 big": base["llm"]["default"]}}, TaggingConfig, section="tagging")
