"""Exact rendered prompts of an expert against reviewed golden files (``golden/<case>.json``).

Regenerate after a deliberate template change: ``KGC_UPDATE_GOLDEN=1 pytest tests/kgc/agents``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pipelines.kgc.agents.experts import expert_vars, make_expert
from pipelines.kgc.schema import Schema

GOLDEN = Path(__file__).parent / "golden"


def rendered(task: str, schema: Schema, call: dict[str, Any]) -> str:
    """The messages of one expert call (``call``: :func:`expert_vars` keywords and ``mode``) as the
    golden file holds them."""
    kw = dict(call)
    mode = kw.pop("mode", "text")
    vars = expert_vars(schema, **kw)
    messages = make_expert(task, schema).render(vars.pop("language"), output_mode=mode, **vars)
    return json.dumps(messages, ensure_ascii=False, indent=1) + "\n"


def assert_golden(case: str, text: str) -> None:
    path = GOLDEN / f"{case}.json"
    if os.environ.get("KGC_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")
