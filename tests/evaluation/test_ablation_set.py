"""The queued ablation set: every -S override is applied to params.yaml the way DVC applies it
(dvc.utils.hydra.apply_overrides) and the changed section validated by its team's strict config,
so a typo in a key or a value fails here; the queue commands; the tables from `dvc exp show --json`."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from dvc.exceptions import InvalidArgumentError
from dvc.utils.hydra import apply_overrides

from pipelines.config import ConfigError, load_section
from pipelines.evaluation.ablation.experiments import ABLATIONS, ablation_tables, choose, main, queue_commands
from pipelines.kgc.config import KGCConfig
from pipelines.ram2c.config import Ram2cConfig
from pipelines.tagging.config import TaggingConfig
from pipelines.training.dataset_builder import MakeDatasetsConfig

PROJECT = Path(__file__).resolve().parents[2]
CONFIGS = {"tagging": TaggingConfig, "kgc": KGCConfig, "ram2c": Ram2cConfig}


def _apply(tmp_path: Path, overrides: list[str]) -> Path:
    params = tmp_path / "params.yaml"
    shutil.copy(PROJECT / "params.yaml", params)
    apply_overrides(params, overrides)
    return params


def _get(data, dotted: str):
    for part in dotted.split("."):
        data = data[part]
    return data


@pytest.mark.parametrize("ablation", ABLATIONS, ids=lambda a: a.name)
def test_every_override_validates_against_its_team_config(ablation, tmp_path):
    params = _apply(tmp_path, list(ablation.overrides))
    cfg = load_section(ablation.team, CONFIGS[ablation.team], params)  # strict: ConfigError on a bad value
    data = yaml.safe_load(params.read_text(encoding="utf-8"))
    for override in ablation.overrides:
        key, value = override.split("=", 1)
        assert key.split(".")[0] == ablation.team and ablation.name.startswith(ablation.team)
        assert _get(data, key) == yaml.safe_load(value.replace(",", ", "))  # the value landed as meant
        assert _get(cfg.model_dump(), key.split(".", 1)[1]) == _get(data, key)


def test_the_set_covers_the_papers_ablations(tmp_path):
    names = [a.name for a in ABLATIONS]
    assert len(set(names)) == len(names) == 4 + 5 + 2 + 8 + 2  # kgc: rounds, 2 switches, 8 for Tables 2, 3, Fig. 3
    ram2c = {a.name: load_section("ram2c", Ram2cConfig, _apply(tmp_path / a.name, list(a.overrides)))
             for a in ABLATIONS if a.team == "ram2c" and (tmp_path / a.name).mkdir() is None}  # fmt: skip
    assert [g.name for g in ram2c["ram2c-no-p-e"].active_groups()] == ["T"]
    assert [g.name for g in ram2c["ram2c-no-p"].active_groups()] == ["T", "E"]
    assert ram2c["ram2c-one-expert"].experts() == 1
    rounds = sorted(int(a.overrides[0].rsplit("=", 1)[1]) for a in ABLATIONS if a.name.startswith("kgc-rounds"))
    assert rounds == [0, 1, 2, 3, 4]


def test_a_typo_fails(tmp_path):
    with pytest.raises(InvalidArgumentError):  # unknown key: DVC refuses it (struct mode)
        _apply(tmp_path, ["ram2c.ablation.skip_group=[P]"])
    with pytest.raises(ConfigError, match="skip_groups"):  # a value the strict config refuses
        load_section("ram2c", Ram2cConfig, _apply(tmp_path, ["ram2c.ablation.skip_groups=[X]"]))


def test_queue_commands_choice_and_cli(capsys, tmp_path, monkeypatch):
    commands = queue_commands()
    assert commands[0] == ["dvc", "exp", "run", "--queue", "-n", "ram2c-no-p", "-S", "ram2c.ablation.skip_groups=[P]"]
    assert len(commands) == len(ABLATIONS)
    copied = queue_commands(choose("kgc-rounds-0"), copy=["data/cache", "data/kb"])
    assert copied == [["dvc", "exp", "run", "--queue", "-n", "kgc-rounds-0", "-S", "kgc.team.rounds=0",
                       "-C", "data/cache", "-C", "data/kb"]]  # fmt: skip
    assert [a.name for a in choose("tagging,kgc-rounds-0")] == ["kgc-rounds-0", "tagging-team-only",
                                                                "tagging-single-llm"]  # fmt: skip
    with pytest.raises(SystemExit, match="kgc-rounds-9: not a team or an experiment"):
        choose("kgc-rounds-9")

    monkeypatch.chdir(tmp_path)  # a workspace that ran: its cache and one stage's time
    (tmp_path / "data/cache").mkdir(parents=True)
    (tmp_path / "reports/timings").mkdir(parents=True)
    (tmp_path / "reports/timings/generate_tagging.json").write_text('{"stage": "generate_tagging", "wall_s": 120}')
    assert main(["all", "--only", "tagging", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Time estimate (upper bound")
    assert out[1].startswith("  tagging-team-only: at least 2 min (generate_tagging 2 min)")
    assert out[3] == "  the set: at least 4 min for 2 experiments"
    assert "make_datasets" in out[4] and out[4].startswith("  not timed yet")
    assert out[5:] == [
        "$ dvc exp run --queue -n tagging-team-only -S tagging.systems=[team] -C data/cache",
        "$ dvc exp run --queue -n tagging-single-llm -S tagging.systems=[single_llm] -C data/cache",
        "$ dvc exp run --run-all -j 1",
        "$ dvc repro report",
    ]


def _rev(rev, name, params, metrics):
    return {"rev": rev, "name": name, "error": None,
            "data": {"rev": rev, "params": {"params.yaml": {"data": params}},
                     "metrics": {f: {"data": d} for f, d in metrics.items()}}}  # fmt: skip


def test_tables_from_exp_show(tmp_path):
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    kgc = "reports/generate_kgc/metrics.json"
    ram2c = "reports/generate_ram2c/metrics.json"
    hts_row = {"humanized": {"score": 60.0}, "teaching": {"score": 55.0}, "safety": {"score": 50.0}}

    def metrics(rounds_f1, kept, h):
        row = {**hts_row, "humanized": {"score": h}}
        return {kgc: {"systems": {"cooperkgc@0shot": {"datasets": {"conllpp": {"overall": {"f1": rounds_f1}}}}},
                      "sft_rows": 2},
                ram2c: {"pairs_kept": kept, "mean_chars_chosen": 300.0},
                "reports/evaluate/metrics.json": {"tutoring": {"hts": {"tables": {"1": {"rows": {"DPO": row}}}}}},
                }  # fmt: skip

    base = _rev("a" * 40, "main", {"kgc": {"team": {"rounds": 1}}, "ram2c": {"ablation": {"skip_groups": []}}},
                metrics(0.5, 4, 60.0))  # fmt: skip
    base["experiments"] = [
        {"revs": [_rev("b" * 40, "kgc-rounds-4", {"kgc": {"team": {"rounds": 4}}}, metrics(0.75, 4, 60.0))]},
        {"revs": [_rev("c" * 40, "ram2c-no-p", {"ram2c": {"ablation": {"skip_groups": ["P"]}}},
                       metrics(0.5, 3, 52.5))]},
    ]
    text = ablation_tables([{"rev": "workspace", "name": None, "data": {}}, base], params)
    lines = text.splitlines()
    assert "| main (baseline) | [] | - | 4 | 300.00 | 60.00 | 55.00 | 50.00 |" in lines
    no_p = '| ram2c-no-p | ["P"] | - | 3 (-1.00) | 300.00 (+0.00) | 52.50 (-7.50) | 55.00 (+0.00) | 50.00 (+0.00) |'
    assert no_p in lines
    kgc_rows = [line for line in lines if line.startswith("| kgc-rounds-4 |")]
    assert kgc_rows == ["| kgc-rounds-4 | 4 | - | - | 0.75 (+0.25) | - | - | - | - | - | 2 (+0.00) |"]
    assert "ram2c-no-p" not in text.split("CooperKGC ablations")[1]  # each table: its own experiments


def test_a_dvc_rewrite_keeps_the_strings_yes_and_no(tmp_path):
    """DVC rewrites params.yaml as YAML 1.2 (the string "no" unquoted); the stages read it as 1.2 too."""
    params = _apply(tmp_path, ["tagging.systems=[team]"])
    assert "failure_policy: no " in params.read_text(encoding="utf-8")
    cfg = load_section("tagging", TaggingConfig, params)
    assert cfg.team.failure_policy == "no" and {"yes", "no"} <= {*cfg.data.positive_labels, *cfg.data.negative_labels}
    assert cfg.embedding.threshold is None
    assert load_section("make_datasets", MakeDatasetsConfig, params).deduplicate is True  # true stays a bool


def test_tables_from_a_real_queued_run():
    """`dvc exp show --json` (dvc 3.67) after `ablation_set queue --only ram2c` and `dvc exp run --run-all`
    in a toy project whose stage writes pairs_kept = 6 - 2 x skipped groups - one_expert."""
    show = json.loads((Path(__file__).parent / "fixtures" / "dvc_exp_show_ablations.json").read_text(encoding="utf-8"))
    lines = ablation_tables(show, {}).splitlines()
    assert "| master (baseline) | [] | False | 6 | 300.00 | - | - | - |" in lines
    assert '| ram2c-no-p-e | ["P", "E"] | False | 2 (-4.00) | 300.00 (+0.00) | - | - | - |' in lines
    assert "| ram2c-one-expert | [] | True | 5 (-1.00) | 300.00 (+0.00) | - | - | - |" in lines
    assert sum(line.startswith("| ram2c-") for line in lines) == 4
