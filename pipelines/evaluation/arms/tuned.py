"""The model under test inside a system: the system's own ``llm`` block with some roles moved onto
``base + adapter`` (transformers merges the peft adapter, vLLM applies it per request), or onto a
served fine-tune; and the checks that the adapter exists and the held-out items are held out.

    tuned = tuned_llm_config(cfg.llm, ["planner", "solver"], adapter="models/sft/final")
    require_adapter("models/sft/final", stage="train@sft")
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pipelines.llm.config import LLMConfig
from pipelines.stage import StageError

ADAPTER_KINDS = ("transformers", "vllm")
TRAIN_STAGES = {"sft": "train@sft", "dpo": "train@dpo"}


def require_adapter(path: str | Path, *, method: str) -> Path:
    """``path`` as a Path when it is an adapter folder (``adapter_config.json`` inside); else a
    :class:`StageError` naming the train stage that makes it."""
    folder = Path(path)
    if not (folder / "adapter_config.json").is_file():
        stage = TRAIN_STAGES.get(method, f"train@{method}")
        raise StageError(
            f"adapter {folder} not found (no adapter_config.json); run the train stage first: "
            f"dvc repro {stage} (or python -m stages.train --section train.{method}), or fix evaluate.{method}_adapter"
        )
    return folder


def adapter_under_test(backend: Any, path: str | Path, *, method: str) -> str | None:
    """The adapter folder the tuned arm loads (checked by :func:`require_adapter`), or None when it
    runs on ``backend``, a served fine-tune (``tuned_backend``)."""
    return None if backend is not None else str(require_adapter(path, method=method))


def tuned_model_name(backend: Any, base_model: str, adapter: str) -> str:
    """The model under test in reports: the served fine-tune's model, else ``<base model> + <adapter>``."""
    return backend.model if backend is not None else f"{base_model} + {adapter}"


def tuned_llm_config(
    llm: LLMConfig, roles: Sequence[str], *, adapter: str | None = None, backend: Any = None
) -> LLMConfig:
    """``llm`` with each of ``roles`` on its own backend spec plus ``adapter`` (or on ``backend``),
    keeping the role's sampling; other roles are unchanged. Raises :class:`StageError` when a role
    runs on a backend that cannot load an adapter."""
    if (adapter is None) == (backend is None):
        raise ValueError("give exactly one of adapter and backend")
    new_roles: dict[str, Any] = dict(llm.roles)
    for role in roles:
        entry = llm.roles.get(role)
        sampling = entry.sampling if entry is not None else None
        if backend is not None:
            new_roles[role] = backend.model_copy(update={"sampling": sampling})
            continue
        spec = llm.spec_for(role)
        if spec.kind not in ADAPTER_KINDS:
            raise StageError(
                f"role {role} runs on a {spec.kind} backend, which cannot load the adapter {adapter}; "
                f"run it on {' or '.join(ADAPTER_KINDS)}, or set tuned_backend to the served fine-tune"
            )
        new_roles[role] = spec.model_copy(update={"adapter": adapter, "sampling": sampling})
    return llm.model_copy(update={"roles": new_roles})


def offline_default(specs: Iterable[Any]) -> bool:
    """True when every backend is a local transformers model under ``models/base`` (the offline
    default of the project), possibly with an adapter."""
    specs = list(specs)
    return bool(specs) and all(
        s.kind == "transformers" and Path(s.model).as_posix().startswith("models/base/") for s in specs
    )


def check_held_out(evaluated: Iterable[str], trained: Iterable[str], *, system: str, where: str) -> int:
    """Raise :class:`StageError` when an evaluated id is a trained-on id; returns how many were evaluated."""
    evaluated, trained = list(evaluated), set(trained)
    if not evaluated:
        raise StageError(f"{system}: no held-out items to evaluate ({where}); raise the items or add data")
    leaked = sorted(set(evaluated) & trained)
    if leaked:
        raise StageError(f"{system}: {len(leaked)} evaluated item(s) were trained on ({where}): {leaked[:5]}")
    return len(evaluated)
