"""Stage ``evaluate`` end to end on scripted base and tuned models: held-out items only, the
documented metrics.json keys, and deltas and intervals that match a hand computation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipelines.evaluation.hts.judging import balanced_positions
from pipelines.evaluation.report.summary import build_sections
from pipelines.io import read_jsonl
from stages.evaluate import main
from tests.evaluation.evaluate_fixtures import BASE_REPLY, TUNED_REPLY, generate, write_project

pytestmark = pytest.mark.slow  # one scripted run of every stage it reads (~40 s on 2 shared cores)
EVAL_ITEMS = {"evaluate": {"tagging": {"items": 6}, "bootstrap": {"min_items": 6}}}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The whole stage run once on the scripted project: ``(root, metrics)``."""
    root = tmp_path_factory.mktemp("evaluate")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("EDUMAS_TRACKING", "0")
        params = write_project(root, EVAL_ITEMS)
        generate(root, params)
        assert main(["--params", str(params)]) == 0
    return root, json.loads((root / "reports/evaluate/metrics.json").read_text())


def test_metrics_have_the_documented_keys_and_render_in_the_report(project):
    root, metrics = project
    assert metrics["offline_default"] is False  # scripted models are not the offline default
    for system in ("tagging", "kgc"):
        assert {"base", "tuned", "n", "provenance"} <= set(metrics[system])
    assert {"hts", "n"} <= set(metrics["tutoring"]) and metrics["tutoring"]["hts"]["tables"]["1"]["rows"]
    assert metrics["deltas_provenance"] and metrics["systems"] == ["tagging", "kgc", "tutoring"]
    assert [(r["team"], r["metric"]) for r in metrics["deltas"]] == [
        ("tagging", "accuracy"),
        ("tagging", "f1"),
        ("kgc", "micro_f1"),
    ]  # no tutoring rows: the scripted judges answer "A" every time and are withheld (issue 32)
    view = {**metrics, "hts": metrics["tutoring"]["hts"]}
    headings = [heading for heading, tables in build_sections(view)]
    assert headings == [
        "Knowledge tagging",
        "Knowledge graph construction",
        "Tutoring dialogues (HTS)",
        "Tuned vs base",
    ]
    tables = (root / "reports/evaluate/tables.md").read_text()
    assert "| tagging | team | accuracy |" in tables and "scripted-tuned vs scripted" in tables
    for system, arm in [(s, a) for s in ("tagging", "kgc") for a in ("base", "tuned")]:
        assert read_jsonl(root / f"data/evaluate/{system}/{arm}/traces.jsonl")
    for arm in ("base", "tuned"):
        assert read_jsonl(root / f"data/evaluate/tutoring/replies/{arm}/traces.jsonl")


def test_tagging_pairs_are_held_out_and_the_deltas_match_a_hand_computation(project):
    root, metrics = project
    split = json.loads((root / "data/generated/tagging/split.json").read_text())
    sft_ids = {r["id"].removeprefix("tagging-") for r in read_jsonl(root / "data/generated/tagging/sft.jsonl")}
    assert sft_ids  # the team's right verdicts on the generation split became SFT rows
    rows = {arm: read_jsonl(root / f"data/evaluate/tagging/{arm}/predictions.jsonl") for arm in ("base", "tuned")}
    ids = [r["id"] for r in rows["base"]]
    assert len(ids) == 6 == metrics["tagging"]["n"] and [r["id"] for r in rows["tuned"]] == ids
    assert set(ids) <= set(split["ids"]["evaluation"]) and not set(ids) & (sft_ids | set(split["ids"]["generation"]))
    # the base team says Yes to every pair, the tuned one No
    labels = [r["label"] for r in rows["base"]]
    assert [r["predictions"]["team"] for r in rows["base"]] == [1] * 6
    assert [r["predictions"]["team"] for r in rows["tuned"]] == [0] * 6
    positives = sum(labels)
    accuracy, f1 = metrics["deltas"][0], metrics["deltas"][1]
    assert accuracy["base"] == pytest.approx(positives / 6) and accuracy["tuned"] == pytest.approx(1 - positives / 6)
    assert accuracy["delta"] == pytest.approx((6 - 2 * positives) / 6)
    assert f1["base"] == pytest.approx(2 * positives / (6 + positives)) and f1["tuned"] == 0.0
    assert metrics["tagging"]["base"]["recall"] == 1.0 and metrics["tagging"]["tuned"]["recall"] == 0.0
    # the paired bootstrap on seed 7: resampled items, difference of the accuracies
    by_id = {arm: {r["id"]: int(r["predictions"]["team"] == r["label"]) for r in rows[arm]} for arm in rows}
    order = sorted(by_id["base"])
    differences = np.array([by_id["tuned"][i] - by_id["base"][i] for i in order], dtype=float)
    draws = np.random.default_rng(7).integers(0, 6, size=(300, 6))
    expected = np.percentile(differences[draws].mean(axis=1), [2.5, 97.5])
    assert accuracy["ci"] == pytest.approx(list(expected)) and accuracy["resamples"] == 300


def _spans(text: str, span: str) -> list:
    """Every occurrence of ``span`` in ``text`` (the demo sentences have no word that holds another),
    else the span's text (a false positive of its own)."""
    found, start = [], text.find(span)
    while span and start >= 0:
        found.append((start, start + len(span)))
        start = text.find(span, start + 1)
    return found or [" ".join(span.split()).casefold()]


def _keys(task: str, items: list[dict], text: str) -> set[tuple]:
    """The scored items: NER and ACE05 spans by position (an answer without offsets at every
    occurrence), RE triples by text, EE arguments only (the headline)."""
    norm = lambda text: " ".join(text.split()).casefold()  # noqa: E731

    def where(item: dict, key: str) -> list:
        return [(item["start"], item["end"])] if item.get("start", -1) >= 0 else _spans(text, item[key])

    if task == "ner":
        return {(i["type"], span) for i in items for span in where(i, "text")}
    if task == "re":
        return {(norm(i["head"]), i["relation"], norm(i["tail"])) for i in items}
    return {(i["type"], a["role"], span) for i in items for a in i["arguments"] for span in where(a, "text")}


def test_kgc_sentences_never_gave_an_sft_row_and_f1_matches_a_hand_count(project):
    root, metrics = project
    sft = read_jsonl(root / "data/generated/kgc/sft.jsonl")
    trained = {f"{r['meta']['dataset']}:{r['id'].removeprefix('kgc-' + r['meta']['dataset'] + '-')}" for r in sft}
    assert len(trained) == 6  # keep: answer, min_f1 0: every generated sentence gave a row
    rows = read_jsonl(root / "data/evaluate/kgc/base/predictions.jsonl")
    assert len(rows) == 6 == metrics["kgc"]["n"] and not {r["id"] for r in rows} & trained
    tp = pred = gold = 0
    for r in rows:
        g = _keys(r["task"], r["gold"], r["text"])
        p = _keys(r["task"], r["predictions"]["cooperkgc@0shot"]["rounds"][-1], r["text"])
        tp, pred, gold = tp + len(g & p), pred + len(p), gold + len(g)
    assert tp > 0
    delta = metrics["deltas"][2]
    assert delta["base"] == pytest.approx(2 * tp / (pred + gold)) == metrics["kgc"]["base"]["f1"]
    assert delta["tuned"] == 0.0 and delta["delta"] == pytest.approx(-2 * tp / (pred + gold))
    assert set(metrics["kgc"]["rows"]) == set(metrics["kgc"]["reference"]) | set(metrics["kgc"]["reference"].values())


def test_tutoring_prompts_are_held_out_topped_up_and_the_hts_score_is_the_hand_count(project):
    root, metrics = project
    from datasets import load_from_disk

    train = load_from_disk(str(root / "data/train/dpo"))["train"]
    judgments = read_jsonl(root / "data/evaluate/tutoring/comparisons/tuned_vs_base/judgments.jsonl")
    items = sorted({j["item_id"] for j in judgments})
    recorded = ["ram2c-d4-t1", "ram2c-d5-t1", "ram2c-d6-t1"]  # the eval split and the row never trained on
    new = sorted(set(items) - set(recorded))
    assert set(recorded) <= set(items) and len(items) == 8 and not set(items) & set(train["id"])
    assert metrics["tutoring"]["prompts"] == {
        "requested": 8,
        "recorded": 3,
        "new": 5,
        "evaluated": 8,
        "without_profile": 0,
    }
    prompts = {p["id"]: p for p in read_jsonl(root / "data/evaluate/tutoring/prompts.jsonl")}
    trained_topics = {json.loads(m)["topic"] for m in train["meta"]}
    for item in new:  # written for the evaluation: a new topic, a persona after generation's, the drafter's prompt
        p = prompts[item]
        assert (
            p["source"] == "new" and p["topic"] not in trained_topics and p["topic"].startswith("What did you notice")
        )
        assert p["answer"] == "I think he was brave because he went to sea." and p["persona"]["grade"]
        assert int(p["student"][1:]) >= 6 and p["prompt"][0]["content"].startswith("You are a literature teacher")
        assert p["prompt"][-1] == {"role": "user", "content": p["answer"]}
    assert len({prompts[i]["topic"] for i in new}) == 5
    replies = {
        arm: read_jsonl(root / f"data/evaluate/tutoring/replies/{arm}/predictions.jsonl") for arm in ("base", "tuned")
    }
    assert {r["reply"] for r in replies["base"]} == {BASE_REPLY} and {r["reply"] for r in replies["tuned"]} == {
        TUNED_REPLY
    }
    # every judge answers "A" and sees the tuned reply first on exactly half the items: parity, not a win
    for judge in ("j1", "j2"):
        for dimension in ("humanized", "teaching", "safety"):
            mine = [j for j in judgments if j["judge"] == judge and j["dimension"] == dimension]
            positions = balanced_positions(items, seed=0, salt=f"tuned_vs_base:{judge}:{dimension}")
            assert {j["item_id"]: j["system_position"] for j in mine} == positions
            assert [j["system_position"] for j in mine].count("A") == 4
    # a judge that answers "A" whatever it is shown is not a rater: both are withheld, no score, no kappa
    table = metrics["tutoring"]["hts"]["tables"]["1"]
    scores = table["rows"]["scripted-tuned vs scripted"]
    for dimension in ("humanized", "teaching", "safety"):
        assert scores[dimension]["score"] is None and scores[dimension]["no_valid_judge"] is True
        assert scores[dimension]["withheld"] == ["j1", "j2"] and scores[dimension]["kappa"] is None
    validity = table["validity"]["scripted-tuned vs scripted"]
    assert validity["ties"] == {"items": 8, "ties": 0}
    for judge in ("j1", "j2"):
        v = validity["judges"][judge]
        assert (v["verdicts"], v["constant_verdict"], v["constant_share"], v["flagged"]) == (24, "A", 1.0, True)
        assert v["p_value"] == pytest.approx(2 * 0.5**24)
    assert table["position_preference"]["scripted-tuned vs scripted"]["j1"]["flagged"] is True
    assert "seeds of one model" in table["raters"]
    assert metrics["tutoring"]["comparisons"]["tuned_vs_base"]["withheld"] == ["j1", "j2"]
    assert not [r for r in metrics["deltas"] if r["team"] == "tutoring"]
    tables = (root / "reports/evaluate/tables.md").read_text()
    assert "| scripted-tuned vs scripted | no valid judge | no valid judge | no valid judge |" in tables
    assert "| scripted-tuned vs scripted | 0/8 | **100% (24/24) withheld** (p=1.2e-07) |" in tables
    assert "Withheld from the scores, kappa and deltas: j1 (the same verdict 'A' in 24 of 24" in tables
