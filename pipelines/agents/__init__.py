"""The agent runtime shared by every team: templates, agents, the call limit, the runner.

The generation harness (systems over samples, streamed outputs, failure budget) is
:mod:`pipelines.agents.harness`; the generic reply parsers are :mod:`pipelines.agents.parsing`.
"""

from pipelines.agents.agent import Agent, AgentRecord, AgentSchemaError, OutputMode, ParseError, to_jsonable
from pipelines.agents.runner import Runner, RunReport, SampleOutcome, SampleTrace
from pipelines.agents.templates import PromptTemplate, TemplateError
from pipelines.llm.limits import CallLimiter, call_slot

__all__ = [
    "Agent",
    "AgentRecord",
    "AgentSchemaError",
    "OutputMode",
    "CallLimiter",
    "ParseError",
    "PromptTemplate",
    "RunReport",
    "Runner",
    "SampleOutcome",
    "SampleTrace",
    "TemplateError",
    "call_slot",
    "to_jsonable",
]
