"""Remote model code written against transformers 4.x, made loadable under transformers 5 (checked on 5.17).

``prepare_remote_model_class`` resolves the class ``from_pretrained`` will build (``config.auto_map``, the same
dynamic-module cache transformers uses, so the class object is the one it instantiates) and adapts it in
place, once per loaded module:

- a ``_tied_weights_keys`` list (``["lm_head.weight"]``, MiniCPM-2B) becomes the ``{target: source}``
  mapping transformers 5's ``post_init`` reads (``AttributeError: 'list' object has no attribute 'keys'``
  otherwise); the source is the parameter of ``get_input_embeddings()``, found on a meta-device instance;
- a class whose ``__init__`` never calls ``post_init`` (ChatGLM3's) gets it called at the end of
  ``__init__``: ``from_pretrained`` needs the attributes it sets (``all_tied_weights_keys``).

- the class with ``GenerationMixin`` added (transformers 5 derives it for remote classes that define
  ``prepare_inputs_for_generation`` but do not inherit the mixin, both MiniCPM's and ChatGLM3's) is registered
  for the config class: otherwise only the first ``from_pretrained`` in a process gets it, and later ones
  (a DPO reference, the merge) build the bare class, without ``generation_config`` (trl's DPOTrainer reads it);
  it is also registered for ``AutoModelForCausalLM`` so that ``save_pretrained`` (full weights, the merge)
  writes the remote-code files and ``auto_map`` next to the weights, as loading from the hub path does.

The changes live in the class ``__dict__``, which the derived class copies.

After loading, :func:`restore_computed_buffers` recomputes the non-persistent buffers (MiniCPM's rotary
``inv_freq``/``cos_cached``/``sin_cached``): transformers 5 builds the model on the meta device and then
replaces such buffers by ``torch.empty_like`` memory, re-initialising only the rotary modules it knows;
the remote ``_init_weights`` does not touch them, so they would hold whatever the memory held.

The names transformers 5 removed that remote files import are re-added by
:func:`pipelines.models.chat_encoding.install_remote_code_shims`, called here too.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

from pipelines.models.chat_encoding import install_remote_code_shims

log = logging.getLogger(__name__)
ADAPTED = "_edumas_adapted_for_transformers5"
GENERATING = "_edumas_generating_class"


def prepare_remote_model_class(model_path: str | Path, *, trust_remote_code: bool) -> type | None:
    """Adapt the remote causal-LM class of ``model_path`` (see the module docstring) and return the class
    ``from_pretrained`` builds from now on; None for native models."""
    install_remote_code_shims()
    config_path = Path(model_path) / "config.json"
    if not trust_remote_code or not config_path.is_file():
        return None
    reference = json.loads(config_path.read_text(encoding="utf-8")).get("auto_map", {}).get("AutoModelForCausalLM")
    if not reference:
        return None
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.dynamic_module_utils import get_class_from_dynamic_module
    from transformers.models.auto.auto_factory import add_generation_mixin_to_remote_model

    cls = get_class_from_dynamic_module(reference, str(model_path))
    config = AutoConfig.from_pretrained(str(model_path), trust_remote_code=True)
    if not cls.__dict__.get(ADAPTED):
        ensure_post_init(cls)
        adapt_legacy_tied_weights(cls, config)
        setattr(cls, ADAPTED, True)
        setattr(cls, GENERATING, add_generation_mixin_to_remote_model(cls))
    generating = cls.__dict__[GENERATING]
    AutoModelForCausalLM.register(type(config), generating, exist_ok=True)
    generating.register_for_auto_class("AutoModelForCausalLM")  # save_pretrained copies the remote code files
    return generating


def ensure_post_init(cls: type) -> None:
    """Call ``post_init`` at the end of ``cls.__init__`` when the remote ``__init__`` did not."""
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if "all_tied_weights_keys" not in self.__dict__:
            self.post_init()

    cls.__init__ = __init__


def adapt_legacy_tied_weights(cls: type, config: Any) -> dict[str, str] | None:
    """Turn a 4.x ``_tied_weights_keys`` list on ``cls`` into transformers 5's ``{target: input embedding}`` map."""
    legacy = cls.__dict__.get("_tied_weights_keys")
    if not isinstance(legacy, (list, tuple)):
        return None
    import torch

    cls._tied_weights_keys = None  # lets a meta instance be built to find the embedding's parameter name
    try:
        with torch.device("meta"):
            probe = cls(config)
        embedding = probe.get_input_embeddings().weight
        source = next(name for name, param in probe.named_parameters(remove_duplicate=False) if param is embedding)
    finally:
        cls._tied_weights_keys = legacy
    mapping = {target: source for target in legacy}
    cls._tied_weights_keys = mapping
    log.info("%s: legacy _tied_weights_keys %s read as %s", cls.__name__, list(legacy), mapping)
    return mapping


def restore_computed_buffers(model) -> list[str]:
    """Give ``model``'s non-persistent buffers the values its ``__init__`` computes; returns their names.

    The values come from a second instance built with parameters on the meta device and buffers on the CPU
    (``accelerate.init_empty_weights(include_buffers=False)``), so nothing of the weights' size is allocated.
    """
    import torch
    from accelerate import init_empty_weights

    names = [name for name, _ in model.named_non_persistent_buffers()]
    if not names:
        return []
    with init_empty_weights(include_buffers=False):
        donor = type(model)(model.config)
    computed = dict(donor.named_buffers())
    with torch.no_grad():
        for name in names:
            buffer = model.get_buffer(name)
            buffer.copy_(computed[name].to(device=buffer.device, dtype=buffer.dtype))
    log.info("%s: recomputed %d non-persistent buffer(s) after loading", type(model).__name__, len(names))
    return names


def load_remote_aware(path: str | Path, *, trust_remote_code: bool, **kwargs: Any):
    """``AutoModelForCausalLM.from_pretrained`` with the adaptations of this module (native models unchanged)."""
    from transformers import AutoModelForCausalLM

    remote = prepare_remote_model_class(path, trust_remote_code=trust_remote_code)
    model = AutoModelForCausalLM.from_pretrained(str(path), trust_remote_code=trust_remote_code, **kwargs)
    if remote is not None:
        restore_computed_buffers(model)
    return model
