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
from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.kgc.config import KGCConfig
from pipelines.ram2c.config import Ram2cConfig
from pipelines.tagging.config import TaggingConfig
from pipelines.training.dataset_builder import MakeDatasetsConfig

PROJECT = Path(__file__).resolve().parents[3]
CONFIGS = {"tagging": TaggingConfig, "kgc": KGCConfig, "ram2c": Ram2cConfig, "evaluate": EvaluateConfig}


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
    section = ablation.params_section
    cfg = load_section(section, CONFIGS[section], params)  # strict: ConfigError on a bad value
    data = yaml.safe_load(params.read_text(encoding="utf-8"))
    for override in ablation.overrides:
        key, value = override.split("=", 1)
        assert key.split(".")[0] == section and ablation.name.startswith(ablation.team)
        assert _get(data, key) == yaml.safe_load(value.replace(",", ", "))  # the value landed as meant
        assert _get(cfg.model_dump(mode="json"), key.split(".", 1)[1]) == _get(data, key)


def test_the_set_covers_the_papers_ablations(tmp_path):
    names = [a.name for a in ABLATIONS]
    assert len(set(names)) == len(names) == 5 + 5 + 2 + 8 + 2  # kgc: rounds, 2 switches, 8 for Tables 2, 3, Fig. 3
    table_3 = {a.name: load_section("evaluate", EvaluateConfig, _apply(tmp_path / a.name, list(a.overrides))).tutoring
               for a in ABLATIONS if a.team == "ram2c" and (tmp_path / a.name).mkdir() is None}  # fmt: skip
    # each RAM2C experiment is one row of Table 3: a variant vs the full team, tutoring only, no retraining
    rows = {name: cfg.comparisons.by_table() for name, cfg in table_3.items()}
    assert rows == {
        "ram2c-no-team": {"3": [("base", "base_r")]},
        "ram2c-no-p": {"3": [("base_p_r", "base_r")]},
        "ram2c-no-e": {"3": [("base_e_r", "base_r")]},
        "ram2c-no-p-e": {"3": [("base_pe_r", "base_r")]},
        "ram2c-one-expert": {"3": [("base_r1", "base_r")]},
    }
    variants = {s.name: s for s in table_3["ram2c-no-p"].systems}
    assert variants["base_p_r"].skip_groups == ["P"] and variants["base_pe_r"].skip_groups == ["P", "E"]
    assert variants["base_r1"].one_expert and variants["base_r"].draft == "base" == variants["base_p_r"].draft
    assert table_3["ram2c-no-p"].compared() == ["base", "base_r", "base_p_r"]  # no tuned model: nothing to train
    assert all(a.overrides[0] == "evaluate.systems=[tutoring]" for a in ABLATIONS if a.team == "ram2c")
    rounds = sorted(int(a.overrides[0].rsplit("=", 1)[1]) for a in ABLATIONS if a.name.startswith("kgc-rounds"))
    assert rounds == [0, 1, 2, 3, 4]


def test_a_typo_fails(tmp_path):
    with pytest.raises(InvalidArgumentError):  # unknown key: DVC refuses it (struct mode)
        _apply(tmp_path, ["ram2c.ablation.skip_group=[P]"])
    with pytest.raises(ConfigError, match="skip_groups"):  # a value the strict config refuses
        load_section("ram2c", Ram2cConfig, _apply(tmp_path, ["ram2c.ablation.skip_groups=[X]"]))


def test_queue_commands_choice_and_cli(capsys, tmp_path, monkeypatch):
    commands = queue_commands()
    assert commands[1] == ["dvc", "exp", "run", "--queue", "-n", "ram2c-no-p", "-S", "evaluate.systems=[tutoring]",
                           "-S", "evaluate.tutoring.comparisons.table_1=[]",
                           "-S", "evaluate.tutoring.comparisons.table_3=[[base_p_r,base_r]]"]  # fmt: skip
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
    evaluate = "reports/evaluate/metrics.json"
    hts_row = {"humanized": {"score": 60.0}, "teaching": {"score": 55.0}, "safety": {"score": 50.0}}

    def metrics(rounds_f1, table_3=None):
        tables = {"3": {"rows": {"smollm2-P/R vs smollm2-R": table_3}}} if table_3 else {}
        return {kgc: {"systems": {"cooperkgc@0shot": {"datasets": {"conllpp": {"overall": {"f1": rounds_f1}}}}},
                      "sft_rows": 2},
                evaluate: {"tutoring": {"hts": {"tables": {"1": {"rows": {"DPO": hts_row}}, **tables}}, "n": 8}},
                }  # fmt: skip

    base = _rev("a" * 40, "main", {"kgc": {"team": {"rounds": 1}}, "evaluate": {"tutoring": {"comparisons": {
        "table_3": []}}}}, metrics(0.5))  # fmt: skip
    no_p = {"evaluate": {"tutoring": {"comparisons": {"table_3": [["base_p_r", "base_r"]]}}}}
    base["experiments"] = [
        {"revs": [_rev("b" * 40, "kgc-rounds-4", {"kgc": {"team": {"rounds": 4}}}, metrics(0.75))]},
        {"revs": [_rev("c" * 40, "ram2c-no-p", no_p, metrics(0.5, {**hts_row, "humanized": {"score": 46.5}}))]},
    ]
    text = ablation_tables([{"rev": "workspace", "name": None, "data": {}}, base], params)
    lines = text.splitlines()
    assert "| main (baseline) | [] | - | - | - | 8 |" in lines  # Table 1 rows are not Table 3's
    assert '| ram2c-no-p | [["base_p_r", "base_r"]] | 46.50 | 55.00 | 50.00 | 8 (+0.00) |' in lines
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
    """`dvc exp show --json` (dvc 3.67) after `experiments queue --only ram2c` and `dvc exp run --run-all`
    in a toy project with this repo's evaluate params, whose stage writes a Table 3 row per comparison
    (re-recorded by tests/evaluation/fixtures/record_table3_exps.py)."""
    show = json.loads((Path(__file__).parents[1] / "fixtures" / "dvc_exp_show_table3.json").read_text(encoding="utf-8"))
    lines = ablation_tables(show, {}).splitlines()
    assert "| master (baseline) | [] | - | - | - | 8 |" in lines
    assert '| ram2c-no-p | [["base_p_r", "base_r"]] | 56.00 | 56.00 | 56.00 | 8 (+0.00) |' in lines
    assert '| ram2c-no-team | [["base", "base_r"]] | 48.00 | 48.00 | 48.00 | 8 (+0.00) |' in lines
    assert sum(line.startswith("| ram2c-") for line in lines) == 5
