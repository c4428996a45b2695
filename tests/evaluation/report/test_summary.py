"""The table builders on section dicts laid out like the papers' tables (their cells, groups and
notes). The summary files, plots and plot data are tested on recorded real output in
test_report_stage.py and test_plots.py."""

import json
from pathlib import Path

from pipelines.evaluation.report.summary import build_sections
from pipelines.reporting.render import table_html, table_markdown
from pipelines.reporting.tables import hts_cell, kgc_table, provenance_line, tagging_table

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "metrics.json").read_text(encoding="utf-8"))


def test_tagging_table_has_the_table_4_layout():
    table = tagging_table(FIXTURE["tagging"], offline=True)
    assert table.columns == ["Metric", "Model size", "Model", "Embedding similarity", "Single LLM", "Multi-agent team"]
    assert table.rows[0] == ["Accuracy", "base", "base", "**67.4**", "50.0", "62.5"]
    assert table.rows[1] == ["", "tuned (SFT)", "tuned (SFT)", "-", "58.3", "**70.8**"]
    assert [r[0] for r in table.rows] == ["Accuracy", "", "Precision", "", "Recall", "", "F1-score", "", "Coverage", ""]
    assert table.rows[6] == ["F1-score", "base", "base", "62.0", "**66.7**", "**66.7**"]  # ties both bold
    markdown = table_markdown(table)
    header = "| Metric | Model size | Model | Embedding similarity | Single LLM | Multi-agent team |"
    assert markdown.splitlines()[2] == header
    assert markdown.splitlines()[3] == "|---|---:|---:|---:|---:|---:|"
    assert markdown.rstrip().endswith(
        "*Data: demo tagging pairs (test split, 24 pairs); models: SmolLM2-135M-Instruct base and its SFT adapter. "
        "Offline default: small CPU models on the demo data, not comparable to the papers' numbers.*"
    )
    # a generate-stage metrics.json (top-level "systems") is read as its section: the model named, not the stage
    systems = FIXTURE["tagging"]["models"]["base"]["systems"]
    stage = {"systems": {name: {**m, "backbone": "smollm2"} for name, m in systems.items()}, "failure_outcome": "omit"}
    single = tagging_table(stage)
    assert {r[1] for r in single.rows} == {"Base"} and {r[2] for r in single.rows} == {"smollm2"}
    assert "Offline default" not in single.note
    assert "is left out of the scores (tagging.failure_outcome: omit)" in single.note


def test_kgc_table_groups_tasks_and_shows_gains():
    table = kgc_table(FIXTURE["kgc"])
    assert table.groups == [("", 1), ("NER", 2), ("RE", 1), ("EE", 1)]
    assert table.rows[1] == ["CooperKGC team (0-shot)", "61.3 (+10.7)", "60.2 (+3.4)", "45.7 (+33.2)", "47.2 (+26.5)"]
    assert table.rows[0] == ["Single expert (0-shot)", "50.6", "56.8", "12.5", "20.7"]
    page = table_html(table)
    assert '<th colspan="2">NER</th>' in page and "<td>61.3 (+10.7)</td>" in page
    assert "Columns by task: NER: CoNLL++, MSRA; RE: NYT11-HRL; EE: ACE05." in table_markdown(table)


def test_hts_cells_and_provenance():
    assert hts_cell({"score": 74.8, "kappa": 0.42, "ci": [66.0, 82.5]}) == "74.8 (0.42) [66.0, 82.5]"
    assert hts_cell({"score": 50.0, "kappa": None, "ci": None}) == "50.0 (-)"
    assert hts_cell(None) == "-" and hts_cell({"score": None}) == "-"
    assert provenance_line("x.", offline=False) == "x."
    assert provenance_line(None, offline=False).startswith("Provenance")


def test_sections_cover_every_metrics_section():
    sections = dict(build_sections(FIXTURE))
    assert list(sections) == [
        "Knowledge tagging",
        "Knowledge graph construction",
        "Tutoring dialogues (HTS)",
        "Tuned vs base",
        "Fine-tuning",
    ]
    hts = sections["Tutoring dialogues (HTS)"]
    assert [t.title for t in hts] == [
        "Table 1 layout: fine-tuned models vs their raw models (HTS)",
        "Table 3 layout: ablations of the RAM2C team vs the full team (HTS)",
    ]
    assert hts[0].columns == ["Criteria", "H", "T", "S"]  # the paper's header cell
    assert hts[0].rows == [["SmolLM2 DPO vs base", "74.8 (0.42) [66.0, 82.5]", "65.2 (0.45) [57.1, 73.0]",
                            "73.3 (-) [65.0, 80.8]"]]
    assert hts[1].rows[0][3] == "-"
    deltas = sections["Tuned vs base"][0]
    assert deltas.rows[0] == ["tagging", "team", "accuracy", "62.5", "70.8", "+8.3", "[-4.2, +20.8]", "24"]
    assert deltas.rows[1][3:7] == ["50.0", "74.8", "+24.8", "[+16.0, +32.5]"]
    assert sections["Fine-tuning"][0].rows == [  # the fixture's runs carry no rows, evaluation or probe
        ["sft", "SFT LoRA", "? / ?", "1: 2.400 · 2: 2.100 · 3: 1.900 · 4: 1.800", "-", "-"],
        ["dpo", "DPO LoRA", "? / ?", "1: 0.693 · 2: 0.680 · 3: 0.660", "-", "-"],
    ]
    rounds = sections["Knowledge graph construction"][1]
    assert rounds.columns[-1] == "Round 4" and rounds.rows[1] == ["RE", "30.0", "41.0", "44.0", "45.7", "-"]
    assert all(t.note for _, tables in build_sections(FIXTURE) for t in tables)
