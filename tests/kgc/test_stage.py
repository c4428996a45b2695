"""Stage generate_kgc end to end on scripted replies: every system, every output file."""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path

import pytest

from stages.generate_kgc import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data/kgc"
REPLIES = [
    {"match": "Step 3", "reply": "Evidence.\nAnswer: [(Paris, /location/country/capital, France)]"},
    {"match": "Step [12]", "reply": "Paris (city)"},
    {"match": 'For the type "/location/country/capital"', "reply": "[(France, /location/country/capital, Paris)]"},
    {"match": "For the type", "reply": "NO"},
    {"match": "Which of the given", "reply": "[/location/country/capital, PER, Life:Be-Born]"},
    {"match": "The named entity recognition task", "reply": "[(PER, Marie Curie), (LOC, Paris), (PER, Lionel Messi)]"},
    {"match": "The relation extraction task", "reply": "[(France, /location/country/capital, Paris)]"},
    {
        "match": "The event extraction task",
        "reply": "[{Trigger Type: Life:Be-Born, Trigger Word: Born, "
        "Arguments: [(Person, Lionel Messi), (Time, 1987)]}]",
    },
]


def write_params(tmp_path: Path, systems="[cooperkgc, autokg, chatie, coter, self_consistency]", extra="") -> Path:
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps(r) + "\n" for r in REPLIES))
    params = tmp_path / "params.yaml"
    params.write_text(
        textwrap.dedent(f"""\
        kgc:
          datasets:
            - {{name: conllpp, format: conll, files: [{tmp_path / "missing.txt"}],
               fallback_files: [{DEMO / "ner_en.conll"}], sample: 3}}
            - {{name: nyt11_hrl, format: nyt11_hrl, files: [{DEMO / "re_en.nyt.jsonl"}], sample: 3}}
            - {{name: ace05, format: ace05, files: [{DEMO / "ee_en.oneie.jsonl"}], sample: 5}}
            - {{name: ontonotes5, format: ontonotes, files: [{tmp_path / "absent.bio"}], optional: true}}
          systems: {systems}
          output_mode: text
          concurrency: 8
          progress: false
          llm:
            default: {{kind: scripted, replies: {replies}}}
            cache: cache/llm.sqlite
          team: {{rounds: 2}}
          self_consistency: {{k: 3, via: sample_index}}
          sft: {{min_f1: 0.0}}
        """)
        + extra
    )
    return params


def test_stage_writes_every_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--params", str(write_params(tmp_path))]) == 0
    reports, generated = tmp_path / "reports/generate_kgc", tmp_path / "data/generated/kgc"
    metrics = json.loads((reports / "metrics.json").read_text())
    assert metrics["n_evaluated"] == 11 and metrics["left_out"] == ["ontonotes5"] and metrics["failed_samples"] == 0
    assert metrics["datasets"]["conllpp"]["fallback"] is True
    assert set(metrics["systems"]) == {
        "cooperkgc@0shot",
        "autokg@0shot",
        "chatie@0shot",
        "coter@0shot",
        "self_consistency@0shot",
    }
    team = metrics["systems"]["cooperkgc@0shot"]
    assert len(team["datasets"]["ace05"]["f1_per_round"]) == 3
    assert 0 < team["datasets"]["conllpp"]["overall"]["f1"] < 1
    assert team["datasets"]["ace05"]["trigger"]["tp"] >= 1
    # scripted replies do not depend on the round: nothing appears or disappears
    assert team["corrections"]["appeared"] == 0 and team["corrections"]["disappeared"] == 0
    rows = [json.loads(line) for line in (generated / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 11 and len(rows[0]["predictions"]["cooperkgc@0shot"]["rounds"]) == 3
    traces = [json.loads(line) for line in (generated / "traces.jsonl").read_text().splitlines()]
    team_calls = [t for t in traces if t["system"] == "cooperkgc@0shot" and t.get("prompt")]
    assert len(team_calls) == 11 * 3 * 3  # sentences x experts x (rounds + 1)
    assert {(t["expert"], t["round"]) for t in team_calls} == {
        (e, r) for e in ("ner_0", "re_1", "ee_2") for r in range(3)
    }
    finals = [t for t in traces if t["system"] == "cooperkgc@0shot" and t.get("role") == "final"]
    assert len(finals) == 11 and {t["outcome"] for t in finals} <= {"correct", "wrong"}
    for t in finals:  # the trace browser's filter: exact match of the final answer with gold
        assert (t["outcome"] == "correct") == (t["parsed"]["sentence_f1"] == 1.0)
    sft = [json.loads(line) for line in (generated / "sft.jsonl").read_text().splitlines()]
    assert sft and all(r["source"] == "kgc" and r["messages"][-1]["role"] == "assistant" for r in sft)
    assert all(r["meta"]["task"] in ("ner", "re", "ee") for r in sft)
    table = (reports / "table.md").read_text()
    assert "| Model | NER: conllpp | RE: nyt11_hrl | EE: ace05 |" in table and "| CooperKGC (0-shot) |" in table
    assert "| ChatIE (0-shot) |" in table and "optional datasets left out: ontonotes5" in table
    with open(reports / "rounds.csv") as handle:
        curve = list(csv.DictReader(handle))
    assert {r["round"] for r in curve} == {"0", "1", "2"} and (reports / "rounds.png").stat().st_size > 1000
    assert "| PER |" in (reports / "per_type.md").read_text()
    data = json.loads((reports / "datasets.json").read_text())
    assert data["datasets"]["nyt11_hrl"]["files"][0]["items"] == 10
    # a rerun replays every call from the cache and writes the same predictions
    first = (generated / "predictions.jsonl").read_text()
    assert main(["--params", str(write_params(tmp_path))]) == 0
    assert (generated / "predictions.jsonl").read_text() == first


def test_bad_params_and_unreadable_dataset(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["--params", str(write_params(tmp_path, systems="[cooperkgc, debate]"))]) == 2
    assert "kgc.systems" in capsys.readouterr().err
    bad = tmp_path / "bad.conll"
    bad.write_text("EU B-ORG\nrejects\n")
    params = write_params(tmp_path, systems="[autokg]")
    params.write_text(
        params.read_text()
        .replace(str(DEMO / "re_en.nyt.jsonl"), str(bad))
        .replace("nyt11_hrl, format: nyt11_hrl", "c2, format: conll")
    )
    assert main(["--params", str(params)]) == 1
    assert "bad.conll:2: expected a token and its tag" in capsys.readouterr().err


def test_project_params_section_is_valid_and_strict(tmp_path):
    from pipelines.config import ConfigError, load_section
    from pipelines.kgc.config import KGCConfig

    cfg = load_section("kgc", KGCConfig, ROOT / "params.yaml")
    assert cfg.output_mode == "json" and cfg.systems == ["cooperkgc", "autokg"] and cfg.team.simplification
    assert {d.name for d in cfg.datasets} == {"conllpp", "nyt11_hrl", "ace05", "msra", "duie2", "duee1"}
    assert all(d.resolved(ROOT) is not None for d in cfg.datasets)  # demo fallbacks exist in the repo
    bad = tmp_path / "params.yaml"
    bad.write_text((ROOT / "params.yaml").read_text().replace("    simplification: true", "    simplify: true"))
    with pytest.raises(ConfigError, match="kgc.team.simplify"):
        load_section("kgc", KGCConfig, bad)
    roles = tmp_path / "roles.yaml"
    roles.write_text(
        (ROOT / "params.yaml")
        .read_text()
        .replace(
            "    roles: {}                            # per-role backend/sampling; only: ner_expert",
            "    roles: {ner_exprt: {sampling: {max_tokens: 9}}}  # only: ner_expert",
            1,
        )
    )
    with pytest.raises(ConfigError, match="ner_exprt"):
        load_section("kgc", KGCConfig, roles)


def test_one_shot_demonstrations_are_the_nearest_by_minilm(tmp_path, monkeypatch):
    from tests.tiny_models import minilm_dir

    monkeypatch.chdir(tmp_path)
    params = write_params(tmp_path, systems="[autokg]", extra=f"  shots: [1]\n  embedder: {{path: {minilm_dir()}}}\n")
    assert main(["--params", str(params)]) == 0
    traces = [json.loads(line) for line in (tmp_path / "data/generated/kgc/traces.jsonl").read_text().splitlines()]
    prompts = [t["prompt"][-1]["content"] for t in traces if t["system"] == "autokg@1shot"]
    shown = [p for p in prompts if p.startswith("Examples:\nText: ")]
    # conllpp and nyt11_hrl keep a pool (4 and 3 sentences); all 5 ace05 sentences are scored, so no pool
    assert len(prompts) == 11 and len(shown) == 6
    for prompt in shown:  # the demonstration is another sentence, with its gold answer in the paper's format
        demo, sentence = prompt.split("\n")[1], prompt.split("\n\n")[-1].split("\n")[0]
        assert demo != sentence and prompt.split("\n")[2].startswith("Answer: ")


def test_a_second_run_reads_the_demonstration_pools_from_the_vector_cache(tmp_path, monkeypatch):
    from pipelines.retrieval.embedders import SentenceTransformerEmbedder
    from tests.tiny_models import minilm_dir

    monkeypatch.chdir(tmp_path)
    encoded: list[int] = []
    original = SentenceTransformerEmbedder.encode_documents

    def counting(self, texts):
        encoded.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(SentenceTransformerEmbedder, "encode_documents", counting)
    extra = f"  shots: [1]\n  embedder: {{path: {minilm_dir()}}}\n  demo_cache: demos\n"  # relative: to the root
    params = write_params(tmp_path, systems="[autokg]", extra=extra)
    assert main(["--params", str(params)]) == 0

    def prompts() -> list:
        rows = (tmp_path / "data/generated/kgc/traces.jsonl").read_text().splitlines()
        return [json.loads(row)["prompt"] for row in rows]

    first = prompts()
    cold, encoded[:] = list(encoded), []
    assert main(["--params", str(params)]) == 0
    assert prompts() == first  # the same demonstrations
    # cold: the 9 distinct evaluated sentences, then the pools (4 conllpp, 3 nyt11_hrl, an empty ace05 one);
    # the second run reads them all back
    assert sorted(cold) == [0, 3, 4, 9] and encoded == []
    assert len(list((tmp_path / "demos").glob("*.npy"))) == 4


def test_a_dataset_of_unknown_labels_fails_the_stage(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    schema = json.loads((ROOT / "pipelines/kgc/schemas/nyt11_hrl.json").read_text())
    schema["aliases"] = {}
    (tmp_path / "paths_only.json").write_text(json.dumps(schema))
    english = ROOT / "tests/kgc/fixtures/nyt11_hrl_english.jsonl"
    params = write_params(tmp_path, systems="[autokg]")
    params.write_text(
        params.read_text().replace(
            f"files: [{DEMO / 're_en.nyt.jsonl'}], sample: 3",
            f"files: [{english}], schema_name: {tmp_path / 'paths_only.json'}, sample: 3",
        )
    )
    assert main(["--params", str(params)]) == 1
    err = capsys.readouterr().err
    assert f"error: {english}: dataset nyt11_hrl: 14 gold labels are not in schema nyt11_hrl" in err
    assert not (tmp_path / "reports/generate_kgc/metrics.json").exists()  # no F1 on empty gold
