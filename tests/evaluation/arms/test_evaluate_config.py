"""The evaluate stage's strict params, the tuned roles, the adapter check and the held-out selection."""

from __future__ import annotations

import json

import pytest

from pipelines.config import ConfigError, validate_section
from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.arms.tuned import check_held_out, offline_default, require_adapter, tuned_llm_config
from pipelines.evaluation.arms.tutoring_config import TutoringEvalConfig
from pipelines.evaluation.arms.tutoring_prompts import evaluation_prompts
from pipelines.kgc.config import KGCConfig
from pipelines.kgc.run import read_data
from pipelines.llm.config import LLMConfig
from pipelines.stage import StageError
from pipelines.training.rows import dpo_row
from stages.evaluate import main
from tests.evaluation.evaluate_fixtures import DEMO, jsonl, write_dpo_data, write_project


def held_out_prompts(cfg, *, root, data_card):
    """The recorded held-out prompts (no new ones: nothing is generated)."""
    import asyncio

    from pipelines.ram2c.config import Ram2cConfig

    cfg = cfg.model_copy(update={"new_prompts": False})
    ram2c = Ram2cConfig(llm={"default": {"kind": "scripted", "replies": "unused.jsonl"}})
    run = evaluation_prompts(cfg, ram2c, None, root=root, data_card=data_card, folder=root, progress=False)
    return asyncio.run(run)[0]


def test_defaults_and_strictness_name_the_key_to_fix():
    cfg = validate_section({}, EvaluateConfig, section="evaluate")
    assert cfg.systems == ["tagging", "kgc", "tutoring"] and cfg.sft_adapter == "models/sft/final"
    assert cfg.tutoring.roles == ["drafter"] and [j.seed for j in cfg.tutoring.hts.judges] == [1, 2]
    assert cfg.bootstrap.resamples == 1000 and cfg.kgc.items is None
    for bad, where in (
        ({"sytems": ["kgc"]}, "evaluate.sytems: unknown key"),
        ({"systems": ["tagging", "tagging"]}, "distinct"),
        ({"systems": ["debate"]}, "evaluate.systems.0"),
        ({"systems": []}, "evaluate.systems"),
        ({"tagging": {"items": 0}}, "evaluate.tagging.items"),
        ({"tagging": {"roles": []}}, "evaluate.tagging.roles"),
        ({"tagging": {"roles": ["ner_expert"]}}, "unknown role"),
        ({"kgc": {"roles": ["planner"]}}, "evaluate.kgc.roles"),
        ({"tutoring": {"roles": ["drafter", "student"]}}, "evaluate.tutoring.roles"),
        ({"kgc": {"tuned_backend": {"kind": "ollama", "model": "x"}}}, "evaluate.kgc.tuned_backend"),
        ({"bootstrap": {"resamples": 0}}, "evaluate.bootstrap.resamples"),
        ({"tutoring": {"hts": {"judges": [{"name": "a"}, {"name": "a"}]}}}, "distinct"),
    ):
        with pytest.raises(ConfigError, match=where):
            validate_section(bad, EvaluateConfig, section="evaluate")


def test_tuned_roles_get_the_adapter_and_keep_their_sampling():
    llm = LLMConfig.model_validate(
        {
            "default": {"kind": "transformers", "model": "models/base/m"},
            "roles": {"solver": {"sampling": {"max_tokens": 9}}, "single_llm": {"sampling": {"max_tokens": 5}}},
        }
    )
    tuned = tuned_llm_config(llm, ["planner", "solver"], adapter="models/sft/final")
    assert tuned.spec_for("planner").adapter == "models/sft/final" and tuned.spec_for("solver").model == "models/base/m"
    assert tuned.sampling_for("solver").max_tokens == 9 and tuned.spec_for("single_llm").adapter is None
    assert llm.spec_for("planner").adapter is None  # the base config is left as it was
    assert offline_default([llm.spec_for("planner"), tuned.spec_for("planner")])
    api = LLMConfig.model_validate({"default": {"kind": "openai", "model": "gpt", "base_urls": ["http://x/v1"]}})
    with pytest.raises(StageError, match="cannot load the adapter"):
        tuned_llm_config(api, ["planner"], adapter="a")
    served = tuned_llm_config(api, ["planner"], backend=api.default.model_copy(update={"model": "my-tune"}))
    assert served.spec_for("planner").model == "my-tune" and not offline_default([served.spec_for("planner")])


def test_missing_adapter_names_the_train_stage(tmp_path):
    with pytest.raises(StageError, match=r"dvc repro train@dpo \(or python -m stages.train --section train.dpo\)"):
        require_adapter(tmp_path / "models/dpo/final", method="dpo")
    (tmp_path / "a").mkdir()
    (tmp_path / "a/adapter_config.json").write_text("{}")
    assert require_adapter(tmp_path / "a", method="sft") == tmp_path / "a"


def test_stage_without_adapter_exits_1_naming_train(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    params = write_project(tmp_path, {"evaluate": {"systems": ["kgc", "tutoring"], "kgc": {"tuned_backend": None}}})
    assert main(["--params", str(params)]) == 1
    assert "dvc repro train@sft" in capsys.readouterr().err


def test_held_out_set_is_never_trained_on(tmp_path):
    splits = write_dpo_data(tmp_path, train=4, evaluation=2, extra=2)
    # a generated row repeating a trained prompt under another id is trained on: never held out
    copy = splits["train"][0]
    jsonl(
        tmp_path / "data/generated/ram2c/dpo.jsonl",
        [*(json.loads(line) for line in (tmp_path / "data/generated/ram2c/dpo.jsonl").read_text().splitlines())]
        + [dpo_row(copy["prompt"], "x", "y", source="ram2c", sample_id="copy", meta={"language": "en"})],
    )
    cfg = TutoringEvalConfig(items=None)
    prompts = held_out_prompts(cfg, root=tmp_path, data_card=tmp_path / "data/train/data_card.json")
    train_ids = {r["id"] for r in splits["train"]}
    assert [p.id for p in prompts] == ["ram2c-d4-t1", "ram2c-d5-t1", "ram2c-d6-t1", "ram2c-d7-t1"]
    assert not {p.id for p in prompts} & train_ids and prompts[0].topic == "topic 4?"
    assert prompts[0].answer == "I think Crusoe was brave, answer 4." and prompts[0].prompt[-1]["role"] == "user"
    untitled = tmp_path / "untitled"  # a pair without a recorded topic: the judges see its system prompt
    (untitled / "data/train").mkdir(parents=True)
    write_dpo_data(untitled, train=1, evaluation=0, extra=1)
    generated = untitled / "data/generated/ram2c/dpo.jsonl"
    rows = [json.loads(line) for line in generated.read_text().splitlines()]
    rows[-1]["meta"].pop("topic")
    jsonl(generated, rows)
    (only,) = held_out_prompts(cfg, root=untitled, data_card=untitled / "data/train/data_card.json")
    assert only.topic == "You are a literature teacher. Discussion topic: topic 1?"
    card = tmp_path / "data/train/data_card.json"
    two, again = (held_out_prompts(TutoringEvalConfig(items=2), root=tmp_path, data_card=card) for _ in "12")
    assert len(two) == 2 and [p.id for p in two] == [p.id for p in again]
    empty = tmp_path / "all_trained"
    (empty / "data/train").mkdir(parents=True)
    write_dpo_data(empty, train=3, evaluation=0, extra=0)
    with pytest.raises(StageError, match="tutoring: no held-out items"):
        held_out_prompts(cfg, root=empty, data_card=empty / "data/train/data_card.json")
    with pytest.raises(StageError, match="were trained on"):
        check_held_out(["ram2c-d0-t1"], train_ids, system="tutoring", where="x")
    card.write_text(json.dumps({"counts": {"dpo": {"eval": 5}}}))
    with pytest.raises(StageError, match="rerun make_datasets"):
        held_out_prompts(cfg, root=tmp_path, data_card=card)


def test_kgc_sample_skips_excluded_sentences():
    params = {
        "datasets": [
            {"name": "nyt11_hrl", "format": "nyt11_hrl", "files": [str(DEMO / "re_en.nyt.jsonl")], "sample": 3}
        ],
        "llm": {"default": {"kind": "scripted", "replies": "unused.jsonl"}},
    }
    cfg = KGCConfig.model_validate(params)
    first, *_ = read_data(cfg, DEMO)
    excluded = {s.id for s in first}
    again, *_ = read_data(cfg, DEMO, exclude_ids=excluded)
    assert len(again) == 3 and not {s.id for s in again} & excluded


def test_the_project_params_and_dvc_stage_agree():
    """The evaluate stage as DVC itself resolves it (``${...}`` from params) lists what the config reads."""
    import yaml
    from dvc.repo import Repo

    from tests.evaluation.evaluate_fixtures import ROOT

    cfg = validate_section(
        yaml.safe_load((ROOT / "params.yaml").read_text())["evaluate"], EvaluateConfig, section="evaluate"
    )
    with Repo(str(ROOT)) as repo:
        stage = next(s for s in repo.index.stages if s.name == "evaluate")
        deps = {d.def_path for d in stage.deps}
        params = next(d.params for d in stage.deps if type(d).__name__ == "ParamsDependency")
        outs = {o.def_path: o for o in stage.outs}
    assert {cfg.sft_adapter, cfg.dpo_adapter, cfg.data_card, cfg.tutoring.dataset, cfg.tutoring.extra_rows} <= deps
    metrics = [path for path, out in outs.items() if out.metric]
    assert metrics == [f"{cfg.outputs.reports_dir}/metrics.json"] and not outs[metrics[0]].use_cache
    assert cfg.outputs.traces_dir in outs
    assert {"llm", "evaluate", "tagging", "kgc", "ram2c", "build_kb", "retrieval"} == set(params)


def test_rows_of_the_sft_dataset_count_as_trained_on(tmp_path):
    from pipelines.evaluation.arms.tagging import trained_and_held_out_ids
    from pipelines.tagging.config import TaggingConfig
    from pipelines.training.dataset_builder import save_dataset_dict
    from pipelines.training.rows import normalise_row, sft_row
    from pipelines.training.trained_rows import sft_sentence_ids

    def row(source, sample_id, dataset):
        messages = [{"role": "user", "content": f"q {sample_id}"}, {"role": "assistant", "content": "a"}]
        return normalise_row(
            sft_row(messages, source=source, sample_id=sample_id, meta={"dataset": dataset}), "sft", source
        )

    save_dataset_dict(
        {
            "train": [row("kgc", "nyt11_hrl-3", "nyt11_hrl"), row("tagging", "add-en-01", "")],
            "eval": [row("kgc", "ace05-demo-2", "ace05")],
        },
        "sft",
        tmp_path / "data/train/sft",
    )
    jsonl(
        tmp_path / "data/generated/kgc/sft.jsonl",
        [
            sft_row(
                [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}],
                source="kgc",
                sample_id="conllpp-21",
                meta={"dataset": "conllpp"},
            )
        ],
    )
    kgc = KGCConfig.model_validate(
        {
            "datasets": [{"name": "d", "format": "conll", "files": ["x"]}],
            "llm": {"default": {"kind": "scripted", "replies": "r"}},
        }
    )
    assert sft_sentence_ids(kgc, tmp_path, tmp_path / "data/train/sft") == {"nyt11_hrl:3", "ace05:demo-2", "conllpp:21"}
    assert sft_sentence_ids(kgc, tmp_path, tmp_path / "absent") == {"conllpp:21"}
    folder = tmp_path / "data/generated/tagging"
    jsonl(folder / "sft.jsonl", [])
    (folder / "split.json").write_text(json.dumps({"ids": {"generation": ["g1"], "evaluation": ["e1", "add-en-01"]}}))
    tagging = TaggingConfig.model_validate({"llm": {"default": {"kind": "scripted", "replies": "r"}}})
    trained, held_out = trained_and_held_out_ids(tagging, tmp_path, tmp_path / "data/train/sft")
    assert trained == {"g1", "add-en-01"} and held_out == {"e1", "add-en-01"}


def test_the_kgc_arms_evaluate_only_the_named_datasets_and_read_the_rest_for_schemas(tmp_path):
    from pipelines.config import load_section
    from pipelines.evaluation.arms.kgc import arm_config, evaluated_datasets

    params = DEMO.parents[1] / "params.yaml"
    kgc, ev = load_section("kgc", KGCConfig, params), load_section("evaluate", EvaluateConfig, params)
    evaluated = [d.name for d in kgc.datasets if d.evaluate]
    assert len(evaluated) >= 2, evaluated
    default = arm_config(kgc, ev, llm=kgc.llm, folder=tmp_path)
    assert [d.name for d in default.datasets if d.evaluate] == evaluated
    one = ev.model_copy(update={"kgc": ev.kgc.model_copy(update={"datasets": [evaluated[1]]})})
    chosen = arm_config(kgc, one, llm=kgc.llm, folder=tmp_path)
    assert [d.name for d in chosen.datasets if d.evaluate] == [evaluated[1]]
    assert [d.name for d in chosen.datasets] == [d.name for d in kgc.datasets]  # every schema still read
    with pytest.raises(StageError, match=r"evaluate\.kgc\.datasets: nope is not .* choose from " + evaluated[0]):
        evaluated_datasets(kgc, ["nope"])
    with pytest.raises(ConfigError):
        validate_section({"kgc": {"datasets": []}}, EvaluateConfig, section="evaluate")
