"""Prompt templates as data: one Jinja2 file per agent and language, holding a block per message.

A template file ``<name>.<language>.j2`` sits beside the agent module that owns it and defines
``{% block system %}`` (instructions, schemas and few-shot examples: text that is shared across
samples and so comes first, byte-identical, for prefix caching) and ``{% block user %}`` (the
sample). Optional ``{% block assistant %}`` blocks are not used for prompts. Rendering is strict:
a variable missing from ``vars`` raises instead of rendering as empty text.

    template = PromptTemplate(Path(__file__).parent, "planner")
    messages = template.render("en", definition="...")
    # [{"role": "system", "content": ...}, {"role": "user", "content": ...}]
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from pipelines.llm.types import Message

MESSAGE_BLOCKS = ("system", "user")


@lru_cache(maxsize=32)
def _environment(folder: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # templates are data shipped with the code: no stat per include on the hot path
    )


class TemplateError(ValueError):
    """A template that is missing or lacks a required block; the message names the file."""


class PromptTemplate:
    """The templates of one agent (``<folder>/<name>.<language>.j2``), rendered into chat messages."""

    def __init__(self, folder: Path | str, name: str):
        self.folder = Path(folder)
        self.name = name
        self._compiled: dict[str, jinja2.Template] = {}  # per language: no file checks per render

    def path(self, language: str) -> Path:
        return self.folder / f"{self.name}.{language}.j2"

    def languages(self) -> list[str]:
        return sorted(p.name.split(".")[-2] for p in self.folder.glob(f"{self.name}.*.j2"))

    def _template(self, language: str) -> jinja2.Template:
        """The compiled template of ``language``, loaded once (a render is then pure CPU work)."""
        template = self._compiled.get(language)
        if template is None:
            path = self.path(language)
            if not path.exists():
                have = ", ".join(self.languages()) or "none"
                raise TemplateError(f"{path}: no '{language}' template for agent {self.name!r} (have: {have})")
            template = self._compiled[language] = _environment(str(self.folder)).get_template(path.name)
        return template

    def render_block(self, language: str, block: str, **vars: Any) -> str:
        """Text of one block, stripped of surrounding whitespace; raises if the block is missing."""
        return self._block(self._template(language), language, block, vars)

    def _block(
        self, template: jinja2.Template, language: str, block: str, vars: dict[str, Any], context: Any = None
    ) -> str:
        if block not in template.blocks:
            raise TemplateError(f"{self.path(language)}: block '{block}' is missing")
        context = context if context is not None else template.new_context(vars)
        return "".join(template.blocks[block](context)).strip()

    def render(self, language: str, **vars: Any) -> list[Message]:
        """Chat messages: a system message (when the file has that block) then the user message."""
        template = self._template(language)
        context = template.new_context(vars)  # one for all blocks, as a whole-template render has
        messages: list[Message] = []
        for block in MESSAGE_BLOCKS:
            if block in template.blocks:
                content = self._block(template, language, block, vars, context)
                messages.append({"role": block, "content": content})
        if not messages or messages[-1]["role"] != "user":
            raise TemplateError(f"{self.path(language)}: needs a 'user' block")
        return messages
