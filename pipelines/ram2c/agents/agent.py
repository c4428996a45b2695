"""The RAM2C agent every role is built from, and the folder of the roles' templates
(``<role>.<lang>.j2`` beside this file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents import Agent, ParseError
from pipelines.llm.types import Message

FOLDER = Path(__file__).parent


class Ram2cAgent(Agent):
    """An agent whose json-mode reply falls back to the text parser (which reads JSON objects too)
    when it does not validate: until every backend constrains decoding to the schema, a small model
    in json mode may still answer in plain text, and a usable answer is not thrown away."""

    def parse(self, text: str | None, mode: str = "text", **options: Any):
        try:
            return super().parse(text, mode, **options)
        except ParseError:
            if mode != "json":
                raise
            return super().parse(text, "text")

    def render(self, language: str | None = None, *, output_mode: str = "text", **vars: Any) -> list[Message]:
        """The exact messages; in json mode ``output_example`` is the output model's one-line example."""
        self._check_mode(output_mode)
        language = language or self.default_language
        example = self.output.EXAMPLES[language] if output_mode == "json" else ""
        return self.template.render(language, output_mode=output_mode, output_example=example, **vars)
