"""The baselines of the tutoring comparison (``evaluate.tutoring.baselines``): their LLM roles, their
names in the report, and the RAM2C team that rewrites a reference model's draft (the paper's GLM-R).

- ``base``: role ``base``, the ram2c drafter's backend (set up by ``evaluate_tutoring.tutoring_llm``);
- ``reference``: role ``<name>``, the baseline's backend with the drafter's sampling (the paper's GLM);
- ``reference_team``: role ``<name>`` drafts; the team's roles ``<name>/<ram2c role>`` (expert,
  synthesizer, query_rewriter) run on the same backend, each with its ram2c sampling; the draft
  then goes through :meth:`pipelines.ram2c.team.Ram2cTeam.refine` (T -> P -> E with retrieval and
  votes, as ``generate_ram2c`` runs it) and the E group's reply is the baseline's reply.

The backend's own ``sampling``, when given, replaces the ram2c sampling of every role it plays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.evaluation.arms.config import TutoringBaseline
from pipelines.evaluation.hts.judging import HTSItem
from pipelines.ram2c.config import ROLES, Ram2cConfig
from pipelines.ram2c.groups import TurnContext
from pipelines.ram2c.students import persona_by_id
from pipelines.ram2c.team import Dialogue, Ram2cTeam
from pipelines.stage import StageError


def role_spec(backend: Any, ram2c: Ram2cConfig, role: str) -> Any:
    """``backend`` playing the ram2c ``role``: its own sampling if set, else that role's sampling."""
    entry = ram2c.llm.roles.get(role)
    sampling = backend.sampling or (entry.sampling if entry is not None else None)
    return backend.model_copy(update={"sampling": sampling})


def baseline_roles(ram2c: Ram2cConfig, baselines: list[TutoringBaseline], *, drafter: str) -> dict[str, Any]:
    """The LLM roles of the ``reference`` and ``reference_team`` baselines (see the module docstring)."""
    roles: dict[str, Any] = {}
    for b in baselines:
        if b.kind == "base":
            continue
        roles[b.name] = role_spec(b.backend, ram2c, drafter)
        if b.kind == "reference_team":
            roles.update({f"{b.name}/{role}": role_spec(b.backend, ram2c, role) for role in ROLES})
    return roles


def team_description(ram2c: Ram2cConfig) -> str:
    """``the RAM2C T/P/E groups (3 experts each, vote)``: what rewrites a reference_team draft."""
    groups = "/".join(g.name for g in ram2c.active_groups())
    return f"the RAM2C {groups} groups ({ram2c.experts()} experts each, {ram2c.ablation.selection})"


def baseline_model(b: TutoringBaseline, base_model: str, ram2c: Ram2cConfig) -> str:
    """The baseline's models in words, for the provenance line."""
    if b.kind == "base":
        return base_model
    if b.kind == "reference":
        return b.backend.model
    return f"{b.backend.model} rewritten by {team_description(ram2c)} on {b.backend.model}"


def row_label(b: TutoringBaseline, *, tuned_name: str, base_model: str) -> str:
    """The HTS Table 1 row: ``<tuned> vs <base model>`` for ``base`` (as without baselines), else
    ``<tuned> vs <baseline name>``."""
    return f"{tuned_name} vs {base_model if b.kind == 'base' else b.name}"


def judgment_files(out: Path, b: TutoringBaseline) -> tuple[Path, Path]:
    """``(judgments.jsonl, judge_traces.jsonl)`` of a baseline: in ``out`` for ``base``, else in ``out/<name>``."""
    folder = out if b.name == "base" else out / b.name
    return folder / "judgments.jsonl", folder / "judge_traces.jsonl"


def baseline_items(prompts, answered, b: TutoringBaseline, out: Path) -> list[HTSItem]:
    """The items the tuned arm and baseline ``b`` both answered (StageError when none)."""
    tuned, other = answered["tuned"], answered[b.name]
    items = [
        HTSItem(p.id, p.topic, p.answer, tuned[p.id], other[p.id], p.language)
        for p in prompts
        if p.id in tuned and p.id in other
    ]
    if not items:
        raise StageError(
            f"tutoring: no held-out prompt was answered by both the tuned arm and baseline {b.name!r} "
            f"({len(prompts)} asked); see {out}"
        )
    return items


def provenance_line(n: int, tuned_name: str, described: list[tuple[str, str, int]], judges: str) -> str:
    """The line under HTS Table 1; ``described``: (row label, baseline models, items) per baseline."""
    head = f"{n} held-out (topic, student answer) prompts (DPO eval split and generated pairs not in the train split)"
    if len(described) == 1:
        return f"{head}; replies of {tuned_name} vs {described[0][1]} as the drafter, judged pairwise by {judges}"
    rows = "; ".join(f"{label}: {models}, {k} items" for label, models, k in described)
    return f"{head}; replies of {tuned_name} as the drafter vs each baseline ({rows}), judged pairwise by {judges}"


def open_team(
    ram2c: Ram2cConfig, b: TutoringBaseline, runtime: Any, *, root: Path, kb: tuple | None, retriever: Any = None
) -> Ram2cTeam:
    """The RAM2C team of a ``reference_team`` baseline on its roles ``<name>/<role>``; the retriever
    is the ram2c stage's (``kb``: the ``(build_kb, retrieval)`` sections) unless one is passed in."""
    from pipelines.ram2c.run import check_retrieval_groups, open_team_retrieval, team_retrieval_config

    if retriever is None and kb is None:
        raise StageError(
            f"tutoring baseline {b.name!r} (reference_team) needs the build_kb and retrieval sections for the "
            "team's knowledge bases; pass them to evaluate_tutoring (the evaluate stage does when one needs them)"
        )
    if kb is not None:
        check_retrieval_groups(ram2c, kb[1])
    elif ram2c.ablation.selection == "rerank":
        raise StageError(f"tutoring baseline {b.name!r}: selection rerank needs the retrieval section's reranker")

    def llm_for(role: str) -> Any:
        return runtime.for_role(f"{b.name}/{role}")

    build, retrieval = kb or (None, None)
    retriever, reranker = open_team_retrieval(
        ram2c,
        build,
        team_retrieval_config(ram2c, retrieval) if retrieval is not None else None,
        rewriter_llm=llm_for("query_rewriter"),
        root=root,
        retriever=retriever,
    )
    return Ram2cTeam(ram2c, llm_for, retriever, reranker=reranker)


def team_refiner(team: Ram2cTeam, ram2c: Ram2cConfig):
    """``async refine(prompt, draft, trace) -> reply | None``: the team's rewrite of one draft.

    The groups see the prompt's topic, the student's answer and the student's profile (the persona
    ``meta.student`` names, rebuilt with ``ram2c.students.seed``); a prompt without one is traced as
    a failed step and left out (None). The last group's reply is returned; a ``team`` row in the trace
    records the draft, the reply after each group, calls, tokens and failures.
    """

    async def refine(prompt: Any, draft: str, trace: SampleTrace) -> str | None:
        persona = persona_by_id(prompt.student, prompt.language, seed=ram2c.students.seed)
        if persona is None:
            error = f"no student profile for meta.student {prompt.student!r}; the expert groups need one"
            trace.add_result("ram2c_team", "team", result=None, ok=False, error=error, step="team", turn=prompt.turn)
            return None
        student = persona.to_vars()
        result = Dialogue(prompt.id, prompt.topic, student)
        rewrites = await team.rewrite(result, prompt.topic, prompt.answer, trace, prompt.turn)
        ctx = TurnContext(prompt.language, prompt.book, prompt.topic, student, prompt.answer, prompt.turn, rewrites)
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

    return refine
