"""The held-out tutoring prompts: (topic, student, student answer) exactly as the RAM2C drafter sees
them, never trained on.

- **recorded**: the DPO rows of ``data/train/dpo``'s eval split, plus rows of ``extra_rows`` (the
  generated pairs) whose prompt is not in the train split (make_datasets splits by prompt);
- **new** (``new_prompts``): when fewer than ``items`` were recorded, the rest are written the way the
  paper built its evaluation set (questions not in the fine-tuning set, answered by a simulated
  student): the ram2c topic writer on topic plans after the ones generation used, a student persona
  after generation's, the student agent's answer, and the drafter's prompt rendered from them.

Each prompt keeps its student profile (the persona ``meta.student`` names, rebuilt with
``ram2c.students.seed``): the judges need it for criterion 1.7 and a RAM2C team for its groups.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pipelines.agents import SampleTrace
from pipelines.agents.harness import GenerationOutputs, System, run_systems
from pipelines.evaluation.arms.tuned import check_held_out
from pipelines.evaluation.arms.tutoring_config import TutoringEvalConfig
from pipelines.io import read_jsonl
from pipelines.ram2c.agents import make_agents
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.scenario import theme_names, theme_words
from pipelines.ram2c.sources import load_passages
from pipelines.ram2c.students import make_personas, persona_by_id
from pipelines.ram2c.topics import TopicPlan, mentions, topic_plans
from pipelines.stage import StageError
from pipelines.training.rows import RowError, normalise_row, prompt_key


@dataclass(frozen=True)
class HeldOutPrompt:
    id: str
    prompt: list[dict[str, str]]
    topic: str
    answer: str
    language: str
    turn: int
    student: str | None = None  # the persona id the pair's dialogue had (meta.student)
    book: str = ""  # meta.book when recorded (the expert groups do not read it)
    persona: dict[str, Any] | None = None  # the persona's profile (grade, traits, interest, reading_level)
    source: str = "recorded"  # recorded | new
    passage: str = ""  # the book passage the topic was written on (new prompts; recorded pairs do not keep it)

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def _meta(row: dict[str, Any]) -> dict[str, Any]:
    meta = row.get("meta") or {}
    return json.loads(meta) if isinstance(meta, str) else meta


def _profile(student: Any, language: str, ram2c: Ram2cConfig) -> dict[str, Any] | None:
    persona = persona_by_id(student, language, seed=ram2c.students.seed)
    return persona.to_vars() if persona is not None else None


def _norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


@dataclass
class Recorded:
    """The recorded candidates and what the train split holds (prompt keys, topics)."""

    prompts: list[HeldOutPrompt]
    trained_prompts: set[str]
    trained_topics: set[str]
    train_ids: set[str]


def recorded_prompts(cfg: TutoringEvalConfig, ram2c: Ram2cConfig, *, root: Path, data_card: Path) -> Recorded:
    """Every recorded held-out prompt (sorted by id) and the train split's prompts and topics."""
    from datasets import load_from_disk

    splits = load_from_disk(str(root / cfg.dataset))
    train = list(splits["train"]) if "train" in splits else []
    evaluation = list(splits["eval"]) if "eval" in splits else []
    card = json.loads((root / data_card).read_text(encoding="utf-8"))
    recorded = card.get("counts", {}).get("dpo", {}).get("eval")
    if recorded is not None and recorded != len(evaluation):
        raise StageError(
            f"{data_card} records {recorded} DPO eval rows, {cfg.dataset} has {len(evaluation)}; rerun make_datasets"
        )
    candidates = evaluation
    if cfg.extra_rows and (root / cfg.extra_rows).exists():
        for row in read_jsonl(root / cfg.extra_rows):
            try:
                candidates.append(normalise_row(row, "dpo", "ram2c"))
            except RowError:
                continue
    trained = {prompt_key(r) for r in train}
    chosen: dict[str, dict[str, Any]] = {}
    for row in candidates:
        if prompt_key(row) not in trained and row["id"] not in chosen:
            chosen[row["id"]] = row
    prompts = []
    for row_id in sorted(chosen):
        row, meta = chosen[row_id], _meta(chosen[row_id])
        answer = next(m["content"] for m in reversed(row["prompt"]) if m["role"] == "user")
        # a row without a recorded topic (e.g. a hand-written pair): the judges see its system prompt,
        # the context the responder answered in
        system = next((m["content"] for m in row["prompt"] if m["role"] == "system"), "")
        topic = str(meta.get("topic") or system)
        language, turn = meta.get("language", "en"), int(meta.get("turn", 1))
        student = meta.get("student")
        prompts.append(
            HeldOutPrompt(
                row_id,
                row["prompt"],
                topic,
                answer,
                language,
                turn,
                student,
                str(meta.get("book", "")),
                _profile(student, language, ram2c),
            )
        )
    topics = {_norm(_meta(r).get("topic", "")) for r in train} - {""}
    return Recorded(prompts, trained, topics, {r["id"] for r in train})


PLAN_TRIES = 3  # topic plans a new prompt tries before it is given up (a small model's topic may not parse)


def new_prompt_plans(ram2c: Ram2cConfig, need: int, *, root: Path) -> list[tuple[list[TopicPlan], Any]]:
    """``ceil(need * topics.oversample)`` candidates for ``need`` new prompts (a small model's topic
    may not parse): each its topic plans to try in order (``PLAN_TRIES``) and its student persona, all
    after those generation used (plans past ``ceil(dialogues * topics.oversample)``, personas past
    ``dialogues``), so no request repeats one of generation's."""
    passages = [p for s in ram2c.sources if s.language == ram2c.language for p in load_passages(s, root)]
    used_plans = math.ceil(ram2c.dialogues * ram2c.topics.oversample)
    count = math.ceil(need * ram2c.topics.oversample)
    plans = topic_plans(passages, ram2c.topics, used_plans + count * PLAN_TRIES)[used_plans:]
    personas = make_personas(ram2c.dialogues + count, ram2c.language, seed=ram2c.students.seed)[ram2c.dialogues :]
    return [([plans[j + k * count] for k in range(PLAN_TRIES)], personas[j]) for j in range(count)]


async def new_prompts(
    need: int,
    ram2c: Ram2cConfig,
    runtime: Any,
    recorded: Recorded,
    *,
    root: Path,
    folder: Path,
    budget: float,
    progress: bool,
) -> list[HeldOutPrompt]:
    """Up to ``need`` new held-out prompts: per candidate the topic writer on its plans until a topic
    parses that is neither a trained one nor on an excluded theme, then the student's answer and the
    drafter's prompt; the first ``need`` with distinct topics are kept. The calls are traced under
    ``folder`` (the generation harness, ``max_failed_share`` = ``budget``)."""
    lang, mode = ram2c.language, ram2c.output_mode
    agents = make_agents(
        max_tokens=dict(ram2c.max_tokens), max_attempts=ram2c.max_attempts, retry_temperature=ram2c.retry_temperature
    )
    avoid, excluded = theme_names(ram2c.topics.excluded_themes, lang), theme_words(ram2c.topics.excluded_themes, lang)

    async def topic_for(plans: list[TopicPlan], trace: SampleTrace) -> tuple[TopicPlan, str] | None:
        for plan in plans:
            record = await agents["topic_writer"].run(
                runtime.for_role("topic_writer"), plan.vars(lang, avoid), tag="topic", mode=mode
            )
            trace.add(record, step="topic", passage=plan.passage.id, level=plan.level, direction=plan.direction)
            if (
                record.ok
                and not mentions(record.parsed, excluded)
                and _norm(record.parsed) not in recorded.trained_topics
            ):
                return plan, record.parsed
        return None

    async def worker(candidate: tuple[list[TopicPlan], Any], trace: SampleTrace) -> dict | None:
        plans, persona = candidate
        found = await topic_for(plans, trace)
        if found is None:
            return None
        plan, topic = found
        student = persona.to_vars()
        answer_vars = {"book": plan.passage.book, "student": student, "topic": topic, "teacher_reply": None}
        said = await agents["student"].run(
            runtime.for_role("student"), {**answer_vars, "language": lang}, tag="student/1", mode=mode
        )
        trace.add(said, step="student", turn=1)
        if not said.ok:
            return None
        draft_vars = {"book": plan.passage.book, "topic": topic, "student": student, "answer": said.parsed}
        prompt = agents["drafter"].render(lang, output_mode=mode, history=[], **draft_vars)
        held = HeldOutPrompt(
            f"new-{plan.index}", prompt, topic, said.parsed, lang, 1, persona.id, plan.passage.book, student, "new"
        )
        held = replace(held, passage=plan.passage.text)
        return held.to_row()

    report = await run_systems(
        new_prompt_plans(ram2c, need, root=root),
        [System("new_prompts", worker)],
        accounting=runtime.accounting,
        outputs=GenerationOutputs(generated_dir=str(folder), reports_dir=str(folder)),
        sample_id=lambda c: f"new-{c[0][0].index}",
        prediction_row=lambda c, v: {"id": f"new-{c[0][0].index}", "prompt": v["new_prompts"]},
        concurrency=ram2c.concurrency,
        max_failed_share=budget,
        progress=progress,
        desc="tutoring new prompts",
    )
    seen: set[str] = set()
    kept: list[HeldOutPrompt] = []
    for row in report.systems["new_prompts"].predictions:
        if (
            row is None
            or len(kept) == need
            or _norm(row["topic"]) in seen
            or prompt_key(row) in recorded.trained_prompts
        ):
            continue
        seen.add(_norm(row["topic"]))
        kept.append(HeldOutPrompt(**{k: v for k, v in row.items() if k in HeldOutPrompt.__dataclass_fields__}))
    return kept


async def evaluation_prompts(
    cfg: TutoringEvalConfig,
    ram2c: Ram2cConfig,
    runtime: Any,
    *,
    root: Path,
    data_card: Path,
    folder: Path,
    progress: bool,
) -> tuple[list[HeldOutPrompt], dict[str, int]]:
    """The held-out prompts (recorded first, then new ones) and their counts ``{"requested",
    "recorded", "new", "evaluated", "without_profile"}``; StageError when there are none. When a
    RAM2C team system runs, recorded prompts without a student profile (hand-written pairs) are left
    out (``without_profile``): a team's groups cannot answer them."""
    recorded = recorded_prompts(cfg, ram2c, root=root, data_card=data_card)
    prompts = recorded.prompts
    without_profile = 0
    if cfg.needs_team():
        prompts = [p for p in prompts if p.persona is not None]
        without_profile = len(recorded.prompts) - len(prompts)
    if cfg.items is not None and cfg.items < len(prompts):
        chosen = set(random.Random(cfg.hts.seed).sample([p.id for p in prompts], cfg.items))
        prompts = [p for p in prompts if p.id in chosen]
    added: list[HeldOutPrompt] = []
    if cfg.new_prompts and cfg.items is not None and len(prompts) < cfg.items:
        added = await new_prompts(
            cfg.items - len(prompts),
            ram2c,
            runtime,
            recorded,
            root=root,
            folder=folder / "new_prompts",
            budget=cfg.max_failed_share,
            progress=progress,
        )
    prompts = prompts + added
    where = f"DPO eval split of {cfg.dataset}" + (" and new prompts" if cfg.new_prompts else "")
    check_held_out([p.id for p in prompts], recorded.train_ids, system="tutoring", where=where)
    counts = {
        "requested": cfg.items if cfg.items is not None else len(recorded.prompts),
        "recorded": len(prompts) - len(added),
        "new": len(added),
        "evaluated": len(prompts),
        "without_profile": without_profile,
    }
    return prompts, counts
