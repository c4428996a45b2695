"""The report stage on the files a real smoke run wrote (tests/evaluation/recorded): the summary's
sections and labels (the models that ran, the KGC demo sets, the real turns), the shortfalls each
stage recorded with requested and produced counts, the stamp (commit, params digest, time), the
link to the trace browser, plots and plot CSVs, the ablation tables; a partial set of inputs and
an unreadable one are notes, not errors; offline_default follows the generating backends."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from pipelines.agents.shortfalls import count_shortfall, flat_shortfall, shortfall_line, unparseable_shortfalls
from pipelines.evaluation.ablation.experiments import write_tables
from pipelines.evaluation.report.config import ReportConfig
from pipelines.evaluation.report.inputs import offline_default
from pipelines.evaluation.report.stamp import params_digest
from stages import report as stage
from tests.evaluation.recorded import FILES, lay_out, metrics

PROJECT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parents[1] / "fixtures"


def _project(root: Path, **skip) -> dict:
    """The recorded files in a git checkout at ``root``; returns its params."""
    lay_out(root, **skip)
    shutil.copy(PROJECT / "reports/ablations.json", root / "reports/ablations.json")
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    params["report"] = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))["report"]  # under test
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    git = ["git", "-c", "user.name=edumas-test", "-c", "user.email=test@edumas.invalid"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "recorded"]):
        subprocess.run([*git, *command], cwd=root, check=True, capture_output=True)
    return params


def _run(root, monkeypatch) -> dict:
    monkeypatch.chdir(root)
    assert stage.main(["--params", "params.yaml"]) == 0
    return json.loads((root / "reports/report/metrics.json").read_text(encoding="utf-8"))


def test_report_of_the_recorded_smoke_run(tmp_path, monkeypatch, caplog):
    params = _project(tmp_path)
    found = _run(tmp_path, monkeypatch)
    assert found["offline_default"] is True and len(found["inputs"]) == 12
    not_found = [k for k, v in found["inputs"].items() if not v]  # not recorded; the project's file: no experiment
    assert not_found == ["make_datasets", "build_kb", "ablations"]
    assert found["params_digest"] == params_digest(params)
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout
    stamp = md.splitlines()[2]
    assert re.fullmatch(rf"Made \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC from commit {commit[:10]}; params digest "
                        rf"{params_digest(params)}\.", stamp), stamp  # fmt: skip
    assert "Trace browser: [traces.html](traces.html)" in md

    # the tagging Model column names the model the systems ran on, not the stage, in the Base row
    backbone = metrics("generate_tagging")["systems"]["team"]["backbone"]
    assert re.search(rf"^\| Accuracy \| Base \| {backbone} \|", md, re.M)
    # KGC columns from the project's demo sentences say so (the smoke profile reads data/kgc/*)
    assert "| Model | conllpp demo set | duie2 demo set |" in md
    assert "conllpp (demo set data/kgc/ner_en.conll, 1 sentences)" in md
    # RAM2C: the real turns
    ram2c = metrics("generate_ram2c")
    assert f"{ram2c['dialogues']} dialogues, {ram2c['turns']} turns in all, 1 per dialogue" in md

    # every shortfall a stage recorded: a row with requested and produced, and a note under its table
    recorded = {s: metrics(s)["shortfalls"] for s in ("generate_tagging", "generate_kgc", "generate_ram2c", "evaluate")}
    rows = [(s, r) for s, found_rows in recorded.items() for r in found_rows]
    assert found["shortfalls"] == len(rows) and ("Shortfalls" in found["sections"]) == bool(rows)
    for stage_name, row in rows:  # (the smoke run recorded now produced all it was asked for: none)
        assert f"| {stage_name} | {row['what']} | {row['requested']} | {row['produced']} |" in md
        assert f"Shortfall: {shortfall_line(row)}" in md

    assert "n too small (n=2)" in md  # two tutoring items: no interval
    assert "need not equal the generation tables above" in md  # why base scores differ between tables
    page = (tmp_path / "reports/summary.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 4
    links = re.findall(r'(?:src|href)="(?!data:)([^"]*)"', page)
    assert links == ["traces.html", "evaluate/human/form.html"]  # the trace browser and the human rating form
    assert found["plots"] == sorted(f"{s}.{e}" for s in ("hts_scores", "kgc_f1_rounds", "tagging_prf1",
                                                          "training_loss") for e in ("csv", "png"))  # fmt: skip
    assert set(found["traces"]) == {"tagging", "kgc", "ram2c", "ram2c_topics",
                                    "evaluate tuned_vs_base", "evaluate tuned_vs_ref_r"}  # fmt: skip
    traces = (tmp_path / "reports/traces.html").read_text(encoding="utf-8")
    assert "Sentence and gold" in traces and "Label and verdicts" in traces and "documents and votes" in traces


def test_ablation_tables_in_the_summary(tmp_path, monkeypatch):
    """reports/ablations.json from a real `dvc exp show --json` (dvc 3.67, the ablation set's RAM2C
    entries queued on a toy project: fixtures/record_table3_exps.py) becomes a section of the summary."""
    params = _project(tmp_path)
    show = json.loads((FIXTURES / "dvc_exp_show_table3.json").read_text(encoding="utf-8"))
    write_tables(show, params, output=tmp_path / "reports/ablations.json")
    found = _run(tmp_path, monkeypatch)
    assert found["sections"][-2:] == ["Ablations (dvc experiments)", "Report inputs"]
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert "### RAM2C ablations (Table 3 layout" in md and "CooperKGC ablations" not in md
    assert '| ram2c-no-p-e | [["base_pe_r", "base_r"]] | 58.00 | 58.00 | 58.00 | 8 (+0.00) |' in md
    assert (tmp_path / "reports/ablations.md").read_text(encoding="utf-8").count("| ram2c-") == 5


def test_partial_inputs_are_notes(tmp_path, monkeypatch):
    gone = ("reports/generate_tagging/metrics.json", "reports/generate_kgc/rounds.csv", "reports/evaluate/metrics.json",
            "reports/train/dpo/loss.csv",
            *[f for f in FILES if f.endswith("traces.jsonl") or f.startswith("data/evaluate/")])  # fmt: skip
    params = _project(tmp_path, skip=gone)
    params["tagging"]["llm"]["default"] = {"kind": "openai", "model": "gpt-4o", "base_urls": ["http://x/v1"]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    (tmp_path / "reports/generate_ram2c/metrics.json").write_text("{not json", encoding="utf-8")
    found = _run(tmp_path, monkeypatch)
    assert found["offline_default"] is False  # a generator on an API, no evaluate flag
    assert {k for k, v in found["inputs"].items() if v} == {"kgc", "train.sft", "train.sft.loss", "train.dpo"}
    # (the recorded KGC metrics hold a shortfall: its SFT rows score F1 0)
    assert found["sections"] == ["Shortfalls", "Knowledge graph construction", "Fine-tuning", "Report inputs"]
    assert found["traces"] == {} and len(found["traces_missing"]) == 4
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert "| tagging | reports/generate_tagging/metrics.json | missing: run `dvc repro generate_tagging` |" in md
    assert "| train.dpo.loss | reports/train/dpo/loss.csv | missing: run `dvc repro train@dpo` |" in md
    assert re.search(r"\| ram2c \| reports/generate_ram2c/metrics.json \| unreadable: JSONDecodeError", md)
    assert re.search(r"^\| dpo \| DPO LoRA \| \d+ / \d+ \| - \| loss ", md, re.M) and "Offline default" not in md
    assert "No traces yet" in (tmp_path / "reports/traces.html").read_text(encoding="utf-8")


def test_a_shape_the_report_cannot_lay_out_is_a_note(tmp_path, monkeypatch):
    _project(tmp_path)
    evaluate = metrics("evaluate")
    evaluate["tutoring"]["hts"] = {"tables": {"1": {"provenance": "x"}}}  # no rows
    (tmp_path / "reports/evaluate/metrics.json").write_text(json.dumps(evaluate), encoding="utf-8")
    found = _run(tmp_path, monkeypatch)
    assert found["inputs"]["evaluate"] is False and found["offline_default"] is True
    assert "Tutoring dialogues (HTS)" not in found["sections"] and "Tuned vs base" not in found["sections"]
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert "| evaluate | reports/evaluate/metrics.json | unreadable: KeyError: 'rows' |" in md


def test_nothing_ran_yet(tmp_path, monkeypatch):
    shutil.copy(PROJECT / "params.yaml", tmp_path / "params.yaml")
    found = _run(tmp_path, monkeypatch)
    assert not any(found["inputs"].values()) and found["sections"] == ["Report inputs"]
    assert found["offline_default"] is True and found["plots"] == []
    md = (tmp_path / "reports/summary.md").read_text(encoding="utf-8")
    assert "from a folder that is not a git checkout" in md
    fix = "python -m pipelines.evaluation.ablation.experiments all"
    assert f"| ablations | reports/ablations.json | missing: run `{fix}` |" in md


def test_shortfall_rules():
    assert count_shortfall("dialogues", 6, 3, cause="13 of 16 topic replies did not parse").line() == (
        "3 of 6 dialogues (13 of 16 topic replies did not parse)"
    )
    assert count_shortfall("dialogues", 6, 6) is None and count_shortfall("dialogues", None, 3) is None
    found = unparseable_shortfalls({"planner": {"replies": 10, "unparseable": 2}, "solver": {"replies": 4,
                                    "unparseable": 0}, "judge": 3})  # fmt: skip
    assert [s.line() for s in found] == ["8 of 10 planner replies parsed (2 of 10 did not parse)",
                                         "judge replies unparseable (3 replies did not parse)"]  # fmt: skip
    assert flat_shortfall("DPO loss", [0.6931, 0.6931, 0.6931]).line() == (
        "DPO loss did not move (0.693 at every one of 3 steps)"
    )
    assert flat_shortfall("DPO loss", [0.6931, 0.61]) is None and flat_shortfall("DPO loss", [0.6931]) is None


def test_offline_default_follows_the_backends():
    local = {"kind": "transformers", "model": "models/base/smollm2-135m-instruct"}
    params = {"tagging": {"llm": {"default": local}}, "kgc": {"llm": {"default": local}}}
    assert offline_default(params, ["tagging", "kgc", "ram2c"])
    params["kgc"]["llm"]["roles"] = {"ee_expert": {"kind": "openai", "model": "glm-4", "base_urls": ["http://x/v1"]}}
    assert not offline_default(params, ["tagging", "kgc"])
    assert offline_default(params, ["tagging"])
    moved = {"prepare_models": {"chat_model_dir": "models/other"}, "tagging": {"llm": {"default": local}}}
    assert not offline_default(moved, ["tagging"])
    assert not offline_default({}, ["tagging"])


def test_dvc_stage_reads_what_params_name():
    """The report stage is last, its deps cover the default inputs and traces, its outs the files."""
    dvc = yaml.safe_load((PROJECT / "dvc.yaml").read_text(encoding="utf-8"))
    assert list(dvc["stages"])[-1] == "report"
    report = dvc["stages"]["report"]
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    cfg = ReportConfig.model_validate(params["report"])
    assert cfg == ReportConfig()  # params.yaml spells out the defaults
    inputs = [cfg.inputs.tagging, cfg.inputs.kgc, cfg.inputs.kgc_rounds, cfg.inputs.ram2c, cfg.inputs.evaluate,
              cfg.inputs.make_datasets, cfg.inputs.build_kb, cfg.inputs.ablations]  # fmt: skip
    inputs += [f"{folder}/{name}" for folder in cfg.inputs.train.values() for name in ("metrics.json", "loss.csv")]
    read = [*inputs, *cfg.traces.values(), *cfg.records.values()]
    covered = [path for path in read if any(path == dep or path.startswith(f"{dep}/") for dep in report["deps"])]
    assert covered == read
    outs = [next(iter(o)) if isinstance(o, dict) else o for o in report["outs"]]
    assert outs == ["reports/summary.md", "reports/summary.html", "reports/traces.html", "reports/plots"]
    assert [next(iter(m)) for m in report["metrics"]] == [cfg.outputs.metrics]
    plotted = {next(iter(p)): p[next(iter(p))] for p in dvc["plots"]}
    names = ("tagging_prf1", "kgc_f1_rounds", "hts_scores", "training_loss")
    assert set(plotted) == {f"reports/plots/{n}.csv" for n in names}
    for spec in plotted.values():  # each names one of the project's templates, which draw per series
        template = PROJECT / ".dvc/plots" / f"{spec['template']}.json"
        assert '"field": "series"' in template.read_text(encoding="utf-8"), template
