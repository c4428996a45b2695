"""The systems of the tutoring comparison (``evaluate.tutoring.systems``): their LLM roles, their
names in the tables, and their replies to the held-out prompts, each system once.

- ``tuned``: role ``system:tuned``, the DPO adapter (or ``tuned_backend``) as the drafter;
- ``base``: role ``system:<name>``, the ram2c drafter's backend;
- ``reference``: role ``system:<name>``, the system's backend with the drafter's sampling (the paper's GLM);
- ``team``: the roles ``system:<name>/<ram2c role>`` (expert, synthesizer, query_rewriter) on the
  system's backend (each with its ram2c sampling; null backend: the ram2c section's own roles), and
  the draft system's replies go through :meth:`pipelines.ram2c.team.Ram2cTeam.refine` (T -> P -> E
  with retrieval and votes as ``generate_ram2c`` runs it, less the groups ``skip_groups`` names, one
  expert each with ``one_expert``); the last group's reply is the system's reply (GLM-R and its
  Table 3 variants, on the same drafts, no retraining).

A backend's own ``sampling``, when given, replaces the ram2c sampling of every role it plays.
Replies go through the generation harness, per system under ``<out>/replies/<name>/``
(``predictions.jsonl``: the reply per prompt, ``traces.jsonl``: every call and team step,
``failures.json``); more failed replies than ``max_failed_share`` stop the stage naming those files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.agents.harness import GenerationOutputs, System, run_systems
from pipelines.evaluation.arms.tutoring_config import TutoringEvalConfig, TutoringSystem
from pipelines.evaluation.together import run_together
from pipelines.ram2c.agents.agent import FOLDER
from pipelines.ram2c.agents.drafter import ConversationAgent
from pipelines.ram2c.agents.reply import ReplyOut, parse_reply
from pipelines.ram2c.config import ROLES, Ram2cConfig
from pipelines.ram2c.groups import TurnContext
from pipelines.ram2c.run import check_retrieval_groups, open_team_retrieval, team_retrieval_config
from pipelines.ram2c.team import Dialogue, Ram2cTeam
from pipelines.stage import StageError

TEAM_ROLES = ("expert", "synthesizer", "query_rewriter")


def role_of(name: str) -> str:
    """The LLM role a system drafts with."""
    return f"system:{name}"


class RecordedPromptAgent(ConversationAgent):
    """The drafter answering a recorded prompt: ``vars["prompt"]`` are its messages, unchanged."""

    def render(self, language: str | None = None, *, output_mode: str = "text", **vars: Any) -> list[dict]:
        self._check_mode(output_mode)
        return [{"role": m["role"], "content": m["content"]} for m in vars["prompt"]]


def responder(ram2c: Ram2cConfig) -> RecordedPromptAgent:
    """The drafter agent as the generation stage builds it (parser, schema, attempts, max tokens)."""
    return RecordedPromptAgent(
        "drafter",
        FOLDER,
        parse_reply,
        output=ReplyOut,
        max_tokens=ram2c.max_tokens.get("drafter"),
        max_attempts=ram2c.max_attempts,
        retry_temperature=ram2c.retry_temperature,
    )


def role_spec(backend: Any, ram2c: Ram2cConfig, role: str) -> Any:
    """``backend`` playing the ram2c ``role``: its own sampling if set, else that role's sampling;
    no backend: the ram2c section's own spec for the role."""
    entry = ram2c.llm.roles.get(role)
    if backend is None:
        return ram2c.llm.spec_for(role).model_copy(update={"sampling": entry.sampling if entry else None})
    sampling = backend.sampling or (entry.sampling if entry is not None else None)
    return backend.model_copy(update={"sampling": sampling})


def system_roles(ram2c: Ram2cConfig, cfg: TutoringEvalConfig, *, drafter: str, base_spec: Any) -> dict[str, Any]:
    """The LLM roles of the declared systems that run (``tuned`` is set up by the caller)."""
    roles: dict[str, Any] = {}
    for name in cfg.compared():
        s = cfg.system(name)
        if s is None:
            continue
        if s.kind == "base":
            roles[role_of(name)] = base_spec
        elif s.kind == "reference":
            roles[role_of(name)] = role_spec(s.backend, ram2c, drafter)
        else:
            roles.update({f"{role_of(name)}/{r}": role_spec(s.backend, ram2c, r) for r in TEAM_ROLES if r in ROLES})
    return roles


def variant_config(ram2c: Ram2cConfig, s: TutoringSystem) -> Ram2cConfig:
    """The ram2c section a team system runs: its groups less ``skip_groups``, one expert with ``one_expert``."""
    ablation = ram2c.ablation.model_copy(update={"skip_groups": list(s.skip_groups), "one_expert": s.one_expert})
    return ram2c.model_copy(update={"ablation": ablation})


def system_label(name: str, cfg: TutoringEvalConfig, *, tuned_name: str, base_model: str) -> str:
    """The system's name in the tables (see :class:`TutoringSystem`)."""
    s = cfg.system(name)
    if s is None:
        return tuned_name
    if s.label:
        return s.label
    if s.kind == "base":
        return base_model
    if s.kind == "reference":
        return s.name
    return f"{system_label(s.draft, cfg, tuned_name=tuned_name, base_model=base_model)}-{s.team_suffix()}"


def team_description(ram2c: Ram2cConfig) -> str:
    """``the RAM2C T/P/E groups (3 experts each, vote)``: what rewrites a team system's drafts."""
    groups, k = "/".join(g.name for g in ram2c.active_groups()), ram2c.experts()
    return f"the RAM2C {groups} groups ({k} expert{'s' if k != 1 else ''} each, {ram2c.ablation.selection})"


def system_models(name: str, cfg: TutoringEvalConfig, ram2c: Ram2cConfig, *, tuned_name: str, base_model: str) -> str:
    """The system's models in words, for the provenance line."""
    s = cfg.system(name)
    if s is None:
        return tuned_name
    if s.kind == "base":
        return base_model
    if s.kind == "reference":
        return Path(s.backend.model).name
    draft = system_models(s.draft, cfg, ram2c, tuned_name=tuned_name, base_model=base_model)
    team_model = Path((s.backend or ram2c.llm.spec_for("expert")).model).name
    return f"{draft} rewritten by {team_description(variant_config(ram2c, s))} on {team_model}"


def open_teams(ram2c: Ram2cConfig, cfg: TutoringEvalConfig, runtime: Any, *, root: Path, kb, retriever=None):
    """``{team system: Ram2cTeam}`` for the team systems that run, on their roles; one retriever per
    team backend (its query rewriter is that backend), the ram2c stage's (``kb``: the ``(build_kb,
    retrieval)`` sections) unless one is passed in."""
    teams: dict[str, Ram2cTeam] = {}
    opened: dict[str, tuple[Any, Any]] = {}
    for name in cfg.compared():
        s = cfg.system(name)
        if s is None or s.kind != "team":
            continue
        if retriever is None and kb is None:
            raise StageError(
                f"tutoring system {name!r} (team) needs the build_kb and retrieval sections for the team's "
                "knowledge bases; pass them to evaluate_tutoring (the evaluate stage does when one needs them)"
            )
        variant = variant_config(ram2c, s)
        if kb is not None:
            check_retrieval_groups(variant, kb[1])
        elif variant.ablation.selection == "rerank":
            raise StageError(f"tutoring system {name!r}: selection rerank needs the retrieval section's reranker")

        def llm_for(role: str, prefix: str = role_of(name)) -> Any:
            return runtime.for_role(f"{prefix}/{role}")

        key = s.backend.model_dump_json() if s.backend else ""
        if key not in opened:
            build, retrieval = kb or (None, None)
            opened[key] = open_team_retrieval(
                variant,
                build,
                team_retrieval_config(variant, retrieval) if retrieval is not None else None,
                rewriter_llm=llm_for("query_rewriter"),
                root=root,
                retriever=retriever,
            )
        found, reranker = opened[key]
        teams[name] = Ram2cTeam(variant, llm_for, found, reranker=reranker)
    return teams


async def team_reply(team: Ram2cTeam, prompt: Any, draft: str, trace: SampleTrace) -> str:
    """The team's rewrite of one draft: the groups see the prompt's topic, the student's answer and
    profile; the last group's reply is returned, and a ``team`` row in the trace records the draft,
    the reply after each group, calls, tokens and failures. ValueError without a student profile."""
    if prompt.persona is None:
        error = f"no student profile for meta.student {prompt.student!r}; the expert groups need one"
        trace.add_result("ram2c_team", "team", result=None, ok=False, error=error, step="team", turn=prompt.turn)
        raise ValueError(error)
    result = Dialogue(prompt.id, prompt.topic, prompt.persona)
    rewrites = await team.rewrite(result, prompt.topic, prompt.answer, trace, prompt.turn)
    ctx = TurnContext(prompt.language, prompt.book, prompt.topic, prompt.persona, prompt.answer, prompt.turn, rewrites)
    reply, outcomes = await team.refine(ctx, draft, trace, result)
    summary = {
        "draft": draft,
        "reply": reply,
        "groups": [{"group": g.group, "reply": g.reply_out, "synthesized": g.synthesized} for g in outcomes],
        "calls": result.calls,
        "tokens": result.tokens,
        "failures": result.failures,
    }
    trace.add_result("ram2c_team", "team", result=summary, step="team", turn=prompt.turn)
    return reply


def reply_worker(name: str, cfg: TutoringEvalConfig, ram2c: Ram2cConfig, runtime, *, teams: dict, answered: dict):
    """The harness worker of one system: the drafter on the prompt (tuned, base, reference), or
    its team on the draft system's reply (team); a prompt without a reply raises (a failed sample)."""
    s = cfg.system(name)
    if s is not None and s.kind == "team":
        team, drafts = teams[name], answered[s.draft]

        async def rewrite(p, trace: SampleTrace) -> str:
            if p.id not in drafts:
                raise ValueError(f"no draft: system {s.draft!r} gave no reply to this prompt")
            return await team_reply(team, p, drafts[p.id], trace)

        return rewrite
    agent, llm = responder(ram2c), runtime.for_role(role_of(name))

    async def draft(p, trace: SampleTrace) -> str:
        vars = {"prompt": p.prompt, "language": p.language}
        record = await agent.run(llm, vars, tag=f"drafter/{p.turn}", mode=ram2c.output_mode)
        trace.add(record)
        if not record.ok:
            raise ValueError(f"no reply: {record.error}")
        return record.parsed

    return draft


def waves(names: list[str], cfg: TutoringEvalConfig) -> list[list[str]]:
    """``names`` in waves that can run at the same time: a team's wave comes after its draft's."""
    done: set[str] = set()
    waves_: list[list[str]] = []
    left = list(names)
    while left:
        ready = [n for n in left if (s := cfg.system(n)) is None or s.kind != "team" or s.draft in done]
        if not ready:
            raise StageError(f"tutoring systems {left}: a team's draft system does not run before it")
        waves_.append(ready)
        done.update(ready)
        left = [n for n in left if n not in done]
    return waves_


async def answer_systems(
    prompts, runtime, ram2c: Ram2cConfig, cfg: TutoringEvalConfig, *, out: Path, teams: dict, progress: bool
) -> dict[str, dict[str, str]]:
    """``{system: {prompt id: reply}}`` for every system that runs, each through the harness (see
    the module docstring); a prompt a system failed is left out. The drafters run at the same time,
    then the teams on their drafts (:func:`waves`): calls to one model share its batches."""
    answered: dict[str, dict[str, str]] = {}

    async def answer(name: str) -> dict[str, str]:
        worker = reply_worker(name, cfg, ram2c, runtime, teams=teams, answered=answered)
        folder = out / "replies" / name
        report = await run_systems(
            prompts,
            [System(name, worker)],
            accounting=runtime.accounting,
            outputs=GenerationOutputs(generated_dir=str(folder), reports_dir=str(folder)),
            sample_id=lambda p: p.id,
            prediction_row=lambda p, v, system=name: {"id": p.id, "system": system, "reply": v[system]},
            concurrency=ram2c.concurrency,
            max_failed_share=cfg.max_failed_share,
            progress=progress,
            desc=f"tutoring {name}",
        )
        replies = report.systems[name].predictions
        return {p.id: r for p, r in zip(prompts, replies, strict=True) if r}

    for wave in waves(cfg.compared(), cfg):
        answered.update(await run_together({name: answer(name) for name in wave}))
    return {name: answered[name] for name in cfg.compared()}
