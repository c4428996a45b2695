"""The agent runtime shared by every team: templates, agents, the call limit, the runner."""

from pipelines.agents.agent import Agent, AgentRecord, ParseError, to_jsonable
from pipelines.agents.limits import CallLimiter, call_slot
from pipelines.agents.runner import Runner, RunReport, SampleOutcome, SampleTrace
from pipelines.agents.templates import PromptTemplate, TemplateError

__all__ = [
    "Agent",
    "AgentRecord",
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
