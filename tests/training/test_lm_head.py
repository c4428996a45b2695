"""The head trl's trainers score with: the model's own forward where trl's fused LM head gets a family wrong.

trl 1.16's fused head (``add_fused_lm_head``) is the reference where it applies (Qwen2: ``lm_head`` on the
backbone's batch-first hidden states): edumas' own-head path must equal it there. On the stand-ins it is
wrong (MiniCPM: the width scale is missing) or cannot run (ChatGLM3: no ``lm_head``, sequence-first
hidden states)."""

from __future__ import annotations

import pytest

from tests.training.conftest import train_config


def sample_inputs(model, rows: int = 2, length: int = 9):
    import torch

    generator = torch.Generator().manual_seed(0)
    vocab = model.get_input_embeddings().weight.shape[0]
    input_ids = torch.randint(5, min(vocab, 300), (rows, length), generator=generator)
    labels = input_ids.clone()
    labels[:, :3] = -100  # a prompt that is not trained on
    labels[1, -2:] = -100  # and padding
    return input_ids, labels


def load_plain(model_dir):
    from pipelines.models.remote_code import load_remote_aware

    return load_remote_aware(model_dir, trust_remote_code=True, dtype="float32").eval()


def own_log_probs(model, input_ids, labels):
    logits = model(input_ids=input_ids, use_cache=False).logits[:, :-1].float()
    targets = labels[:, 1:]
    picked = logits.log_softmax(-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return picked.masked_fill(targets == -100, 0.0)


def test_own_head_equals_trls_fused_head_where_that_applies(tiny_model):
    import torch

    from pipelines.training.lm_head import add_switchable_lm_head

    outputs = ("log_probs", "entropy", "mean_logits", "is_top1", "log_sum_sq_probs")
    model = load_plain(tiny_model)
    switch = add_switchable_lm_head(model, outputs=outputs)
    input_ids, labels = sample_inputs(model)
    with torch.no_grad():
        fused = model(input_ids=input_ids, labels=labels, fused_lm_head=True)
        switch.path = "own"
        own = model(input_ids=input_ids, labels=labels, fused_lm_head=True)
        pre_shifted = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], -100)], dim=1)  # as sequence parallelism
        shifted = model(input_ids=input_ids, shift_labels=pre_shifted, fused_lm_head=True)
    assert torch.equal(fused.label_mask, own.label_mask) and int(own.label_mask.sum()) == (8 - 2) + (8 - 2 - 2)
    for name in ("log_probs", "entropy", "mean_logits", "log_sum_sq_probs", "loss"):
        torch.testing.assert_close(getattr(own, name), getattr(fused, name), atol=1e-4, rtol=1e-4, msg=name)
    assert torch.equal(own.is_top1, fused.is_top1)
    torch.testing.assert_close(shifted.log_probs[:, :-1], own.log_probs)  # pre-shifted labels are not shifted again
    torch.testing.assert_close(own.log_probs, own_log_probs(model, input_ids, labels))


def test_trls_fused_head_is_wrong_for_minicpm_and_cannot_run_chatglm3(minicpm_model, chatglm3_model):
    """What the switch exists for (trl 1.16's own behaviour, on the families' structure)."""
    import torch
    from trl.trainer.utils import add_fused_lm_head

    minicpm = load_plain(minicpm_model)
    input_ids, labels = sample_inputs(minicpm)
    expected = own_log_probs(minicpm, input_ids, labels)
    add_fused_lm_head(minicpm)
    with torch.no_grad():
        fused = minicpm(input_ids=input_ids, labels=labels, fused_lm_head=True).log_probs
    mask = labels[:, 1:] != -100
    assert (fused - expected).abs()[mask].mean() > 0.05  # logits 8x too large: the width scale is skipped

    chatglm3 = load_plain(chatglm3_model)
    input_ids, labels = sample_inputs(chatglm3)
    add_fused_lm_head(chatglm3)
    with pytest.raises(AttributeError, match="weight"):  # get_output_embeddings() is None: there is no lm_head
        chatglm3(input_ids=input_ids, labels=labels, fused_lm_head=True)


def test_trainer_lm_head_restores_trls_function():
    from trl.trainer import dpo_trainer, sft_trainer, utils

    from pipelines.training.lm_head import trainer_lm_head

    with trainer_lm_head("own"):
        assert sft_trainer.add_fused_lm_head is not utils.add_fused_lm_head
    assert sft_trainer.add_fused_lm_head is utils.add_fused_lm_head is dpo_trainer.add_fused_lm_head
    with pytest.raises(ValueError, match="lm_head path"), trainer_lm_head("lm_head"):
        pass


def hand_sft_loss(model, batch):
    """Mean cross-entropy of the labelled tokens, from the model's own logits."""
    import torch.nn.functional as F

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False).logits
    return F.cross_entropy(logits[:, :-1].float().flatten(0, 1), batch["labels"][:, 1:].flatten(), ignore_index=-100)


def hand_dpo_loss(model, batch, beta: float):
    """Sigmoid DPO loss from the own logits of the policy and of the reference (the adapter disabled)."""
    import torch.nn.functional as F

    def sequence_log_probs():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False).logits
        targets = batch["input_ids"][:, 1:]
        picked = logits[:, :-1].float().log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return (picked * batch["completion_mask"][:, 1:]).sum(-1).chunk(2)

    policy_chosen, policy_rejected = sequence_log_probs()
    with model.disable_adapter():
        ref_chosen, ref_rejected = sequence_log_probs()
    margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
    return -F.logsigmoid(beta * margin).mean()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sft", "dpo"])
@pytest.mark.parametrize("family", ["qwen2", "chatglm3", "minicpm"])
def test_the_trained_loss_equals_the_models_own_head(family_models, family_data, family, method, tmp_path):
    """Each family trains on its own head's log-probs: after two LoRA steps (policy != reference), the trainer's
    loss on a batch equals the loss computed by hand from the model's own logits; the probe passed (on the stand-ins,
    SFT scores every row against the plain forward: one training run per family and method checks both)."""
    import torch

    from pipelines.training.head_probe import probe_batches
    from pipelines.training.run import build_trainer

    cfg = train_config(family_models[family], family_data[family], tmp_path, method, schedule={"max_steps": 2})
    trainer, _, _ = build_trainer(cfg)
    trainer.train()
    probe = trainer.lm_head_probe.result
    assert probe["passed"] and probe["tokens"] > 0 and probe["mean_abs_diff"] <= probe["tolerance"]
    assert probe["path"] == ("fused" if family == "qwen2" else "own") and not probe["fell_back"]
    if family != "qwen2" and method == "sft":
        # Under ``lm_head: auto`` (own head) the probe scores every training row (3 here, up to 8) in micro-batches
        # against the model's forward from before trl patched it, and reports the largest difference too.
        assert probe["rows"] == 3
        assert probe["max_abs_diff"] <= probe["max_tolerance"] and probe["max_abs_diff"] >= probe["mean_abs_diff"]
        base = trainer.model.get_base_model()
        plain = trainer.lm_head_probe.switches()[0].plain_forward
        assert plain.__func__ is type(base).forward and base.forward.__func__ is not type(base).forward
    batch = probe_batches(trainer, 2, 2)[0]
    trainer.model.eval()
    with torch.no_grad():
        trained = trainer.compute_loss(trainer.model, dict(batch))
        if method == "sft":
            hand = hand_sft_loss(trainer.model, batch)
        else:
            hand = hand_dpo_loss(trainer.model, batch, cfg.dpo.beta)
    assert abs(float(trained) - float(hand)) < 1e-4, (float(trained), float(hand))
    if method == "dpo":
        assert abs(float(hand) - 0.6931) > 1e-6  # the two steps moved the policy off the reference


@pytest.mark.slow
def test_probe_falls_back_to_the_own_head_when_the_fused_one_is_wrong(family_models, family_data, tmp_path):
    """Forced onto trl's fused head, MiniCPM's probe sees the mismatch and ChatGLM3's the crash; both train on
    their own head and record why."""
    from pipelines.training.run import run_training

    for family in ("minicpm", "chatglm3"):
        cfg = train_config(family_models[family], family_data[family], tmp_path / family, "sft", lm_head="fused",
                           schedule={"max_steps": 1})  # fmt: skip
        probe = run_training(cfg)["lm_head"]
        assert probe["initial_path"] == "fused" and probe["path"] == "own" and probe["fell_back"]
        assert probe["passed"] and probe["mean_abs_diff"] <= probe["tolerance"]
        if family == "minicpm":
            assert probe["fused_mean_abs_diff"] > 10 * probe["tolerance"] and not probe["fused_error"]
        else:
            assert probe["fused_mean_abs_diff"] is None and "Error" in probe["fused_error"]


def test_a_wrong_fused_head_with_precomputed_reference_log_probs_stops(minicpm_model, family_data, tmp_path):
    """DPO reference log-probs precomputed with the wrong head cannot be repaired by falling back: stop."""
    from pipelines.training.run import TrainingSetupError, run_training

    dpo = {"precompute_ref_log_probs": True}
    cfg = train_config(minicpm_model, family_data["minicpm"], tmp_path, "dpo", tuning="full", lm_head="fused", dpo=dpo,
                       schedule={"max_steps": 1})  # fmt: skip
    with pytest.raises(TrainingSetupError, match="set lm_head: own"):
        run_training(cfg)


@pytest.mark.slow
def test_an_own_head_that_disagrees_with_the_plain_forward_stops(minicpm_model, family_data, tmp_path, monkeypatch):
    """A wrong own-head path (here: scores at temperature 2) is caught against the plain forward."""
    from pipelines.training import lm_head
    from pipelines.training.run import TrainingSetupError, run_training

    original = lm_head.own_head_output
    monkeypatch.setattr(lm_head, "own_head_output", lambda *a, **k: original(*a, **k | {"temperature": 2.0}))
    cfg = train_config(minicpm_model, family_data["minicpm"], tmp_path, "sft", schedule={"max_steps": 1})
    with pytest.raises(TrainingSetupError, match="plain forward .*max"):
        run_training(cfg)
