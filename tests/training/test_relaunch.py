"""A finished run started again (e.g. ``dvc repro`` after a change of ``merge``, or with ``final/``
deleted) resumes from its last checkpoint, which already holds step ``max_steps``: it takes no further
step. transformers alone would take one (it resumes into the epoch and checks ``max_steps`` only after
a step): with 3 rows per epoch and max_steps 4, the relaunch trained step 5."""

from __future__ import annotations

from tests.training.conftest import train_config


def test_a_finished_run_relaunched_takes_no_extra_step(tiny_model, tiny_data, tmp_path):
    from safetensors.torch import load_file

    from pipelines.training.run import run_training
    from pipelines.training.summary import read_loss_csv

    cfg = train_config(tiny_model, tiny_data, tmp_path / "run", "sft",
                       schedule={"max_steps": 4, "save_steps": 2, "save_total_limit": 5})  # fmt: skip
    first = run_training(cfg)
    assert (first["global_step"], first["steps_this_run"]) == (4, 4)
    again = run_training(cfg)
    assert (again["global_step"], again["resumed_from_step"], again["steps_this_run"]) == (4, 4, 0)
    assert first["lm_head"]["passed"] and again["lm_head"] == first["lm_head"]  # the probe record is kept
    assert [step for step, _ in read_loss_csv(cfg.reports_path / "loss.csv")] == [1, 2, 3, 4]
    assert again["train_loss"] == sum(loss for _, loss in read_loss_csv(cfg.reports_path / "loss.csv")) / 4
    final = load_file(str(cfg.final_dir / "adapter_model.safetensors"))
    saved = load_file(str(cfg.checkpoints_dir / "checkpoint-4" / "adapter_model.safetensors"))
    assert final.keys() == saved.keys() and all((final[k] == saved[k]).all() for k in final)
    assert not (cfg.checkpoints_dir / "checkpoint-5").exists()
