"""What the baselines share: task wording per language, the result type, one extraction step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pipelines.agents import SampleTrace
from pipelines.kgc.agents.experts import expert_role
from pipelines.kgc.schema import Schema

WORDS = {
    "en": {
        "ner": {
            "task_name": "named entity recognition",
            "list_name": "entity types",
            "format_example": "a tuple, e.g. [(entity type 1, entity 1), (entity type 2, entity 2), ...].",
            "first_role": "named entities",
            "second_role": "the entity type of each of those entities",
        },
        "re": {
            "task_name": "relation extraction",
            "list_name": "relations",
            "format_example": "a tuple, e.g. [(head entity 1, relation type 1, tail entity 1), ...].",
            "first_role": "head entities of a relation",
            "second_role": "tail entities of a relation",
        },
        "ee": {
            "task_name": "event extraction",
            "list_name": "event types",
            "format_example": "a record, e.g. [{Trigger Type: event type 1, Trigger Word: trigger 1, "
            "Arguments: [(role 1, argument 1), ...]}, ...].",
            "first_role": "event triggers",
            "second_role": "event arguments",
        },
    },
    "zh": {
        "ner": {
            "task_name": "命名实体识别",
            "list_name": "实体类型",
            "format_example": "元组形式返回，例如 [(实体类型1, 实体1), (实体类型2, 实体2), ...]。",
            "first_role": "命名实体",
            "second_role": "这些实体各自的实体类型",
        },
        "re": {
            "task_name": "关系抽取",
            "list_name": "关系",
            "format_example": "元组形式返回，例如 [(头实体1, 关系类型1, 尾实体1), ...]。",
            "first_role": "关系的头实体",
            "second_role": "关系的尾实体",
        },
        "ee": {
            "task_name": "事件抽取",
            "list_name": "事件类型",
            "format_example": "记录形式返回，例如 [{Trigger Type: 事件类型1, Trigger Word: 触发词1, "
            "Arguments: [(角色1, 论元1), ...]}, ...]。",
            "first_role": "事件触发词",
            "second_role": "事件论元",
        },
    },
}


def words(language: str, task: str) -> dict[str, str]:
    return WORDS.get(language, WORDS["en"])[task]


@dataclass
class BaselineResult:
    """A baseline's final items for one sentence, the calls it made, and how many failed."""

    items: list[Any] = field(default_factory=list)
    calls: int = 0
    failed: int = 0
    dropped: int = 0


class StepBaseline:
    """The set-up ChatIE and CoTER share: the LLM of the baseline's ``role``, the schemas, the
    output mode, the spans it extracts and the sampling it passes to its agents."""

    role: ClassVar[str]

    def __init__(
        self,
        llm_for: Callable[[str], Any],
        schemas: dict[str, Schema],
        *,
        mode: str = "text",
        spans: str = "sentence",
        **sampling: Any,
    ):
        self.llm = llm_for(self.role)
        self.schemas, self.mode, self.sampling, self.spans = schemas, mode, sampling, spans


async def extraction_step(
    agent: Any, llm: Any, vars: dict[str, Any], schema: Schema, trace: SampleTrace, *, tag: str, mode: str, **extra: Any
) -> tuple[list[Any], Any]:
    """Run one extraction agent, filter its items to ``schema``, trace it; ``(items, record)``."""
    record = await agent.run(llm, vars, tag=tag, mode=mode)
    items, dropped = expert_role(schema.task).schema_filter(record.parsed.items, schema) if record.ok else ([], 0)
    trace.add(record, step=tag, dropped=dropped, **extra)
    return items, record
