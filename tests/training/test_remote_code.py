"""Remote model code written for transformers 4.x loads under transformers 5 the way training loads it.

The stand-ins (``tests/standins``) keep what breaks: MiniCPM's tied weights declared as a list, ChatGLM3's
classes that never call ``post_init``, both without ``GenerationMixin``. Loading goes through
``AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True)`` on a folder with ``auto_map``."""

from __future__ import annotations

import pytest

from pipelines.training.config import TrainConfig
from pipelines.training.families import detect_family, read_model_type


def load(model_dir, **overrides):
    from transformers import AutoTokenizer

    from pipelines.training.loading import load_model

    family = detect_family(read_model_type(model_dir))
    cfg = TrainConfig.model_validate(
        {"method": "sft", "model": str(model_dir), "dataset": "unused", "output_dir": "unused", **overrides}
    )
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return load_model(str(model_dir), cfg, True, tokenizer, family=family)


def checkpoint_tensors(model_dir):
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def test_minicpm_loads_with_its_tied_embeddings_and_checkpoint_weights(minicpm_model):
    """transformers 5's post_init reads ``_tied_weights_keys`` as a mapping; MiniCPM declares a list."""
    import torch

    model = load(minicpm_model)
    assert type(model).__name__ == "MiniCPMForCausalLM"
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied, as MiniCPM-2B is
    saved = checkpoint_tensors(minicpm_model)
    for name, param in model.named_parameters():
        assert torch.equal(param.detach(), saved[name]), name  # loaded, not left at a random init
    assert model.generation_config is not None


def test_minicpm_rotary_tables_are_recomputed_after_loading(minicpm_model):
    """transformers 5 re-creates non-persistent buffers with ``torch.empty_like`` after a meta-device build;
    MiniCPM keeps its rotary ``inv_freq``/``cos_cached``/``sin_cached`` in such buffers."""
    import torch

    from tests.standins import _minicpm_modeling_with_shims

    model = load(minicpm_model)
    reference = _minicpm_modeling_with_shims().MiniCPMRotaryEmbedding(16, 512, 10000.0)  # head_dim 64 / 4 heads
    rotary = model.model.layers[0].self_attn.rotary_emb
    for name in ("inv_freq", "cos_cached", "sin_cached"):
        assert torch.equal(getattr(rotary, name), getattr(reference, name)), name
    again = load(minicpm_model)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():  # two loads in one process give the same model (uninitialised memory would not)
        first, second = (m(input_ids=ids, use_cache=False).logits for m in (model, again))
    torch.testing.assert_close(first, second)


def test_chatglm3_loads_although_its_classes_never_call_post_init(chatglm3_model):
    import torch

    model = load(chatglm3_model)
    assert type(model).__name__ == "ChatGLMForConditionalGeneration"
    assert not hasattr(model, "lm_head") and model.get_output_embeddings() is None  # its head: output_layer
    saved = checkpoint_tensors(chatglm3_model)
    state = model.state_dict()
    assert saved.keys() == state.keys()
    for name, tensor in state.items():
        assert torch.equal(tensor, saved[name]), name
    logits = model(input_ids=torch.tensor([[5, 6, 7, 8]]), use_cache=False).logits
    assert logits.shape == (1, 4, model.config.padded_vocab_size)  # batch-first after its own transpose


@pytest.mark.parametrize("name", ["chatglm3", "minicpm"])
def test_every_load_in_a_process_can_generate(family_models, name):
    """transformers adds GenerationMixin to such remote classes on the first load only; the DPO trainer reads
    ``generation_config`` of the model (a second load: the reference model, the merge, evaluation)."""
    first, second = load(family_models[name]), load(family_models[name])
    assert type(first) is type(second)
    assert second.generation_config is not None and second.can_generate()


def test_legacy_tied_weights_become_the_mapping_transformers_5_reads(minicpm_model):
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    from pipelines.models.remote_code import prepare_remote_model_class

    raw = get_class_from_dynamic_module("modeling_minicpm.MiniCPMForCausalLM", str(minicpm_model))
    generating = prepare_remote_model_class(minicpm_model, trust_remote_code=True)
    assert raw._tied_weights_keys == {"lm_head.weight": "model.embed_tokens.weight"}
    assert generating._tied_weights_keys == raw._tied_weights_keys and issubclass(generating, raw)
    assert prepare_remote_model_class(minicpm_model, trust_remote_code=False) is None
