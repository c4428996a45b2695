"""Expert groups on scripted replies: vote counting and the threshold, distinct personas, the
T -> P -> E order, every ablation, concurrency of experts, and what the trace records."""

import asyncio
import re
import time

import pytest

from pipelines.agents import SampleTrace
from pipelines.llm.scripted import ScriptedBackend
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.groups import group_experts, tally
from pipelines.ram2c.sources import Passage
from pipelines.ram2c.students import make_personas
from pipelines.ram2c.team import DialoguePlan, Ram2cTeam
from pipelines.ram2c.topics import Topic, TopicPlan
from tests.ram2c.scripted import DOCS, FakeRetriever, backend, rules, scripted_llm_for

LLM_CFG = {"default": {"kind": "scripted", "replies": "unused.jsonl"}}
DRAFT = "Nice answer. Why did he go?"


def config(**changes):
    return Ram2cConfig(llm=LLM_CFG, output_mode="text", **changes)


def plan(i=0, language="en"):
    passage = Passage("Book", 1, 0, "A passage.", language)
    topic = Topic(TopicPlan(i, passage, "recall", "plot"), f"Why did he go to sea ({i})?")
    return DialoguePlan(f"d{i}", topic, make_personas(i + 1, language)[i], language)


def run(cfg, *, scripted=None, docs=DOCS, reranker=None, plans=None):
    scripted = scripted or backend()
    llm_for = scripted_llm_for(scripted)
    retriever = FakeRetriever(docs)
    team = Ram2cTeam(cfg, llm_for, retriever, reranker=reranker)
    plans = plans or [plan()]
    traces = [SampleTrace(p.id) for p in plans]

    async def main():
        return await asyncio.gather(*(team.dialogue(p, t) for p, t in zip(plans, traces, strict=True)))

    return asyncio.run(main()), traces, scripted, retriever, llm_for


@pytest.mark.parametrize(
    "votes, threshold, share, accepted",
    [
        ({"a": True, "b": False, "c": False}, 0.5, 1 / 3, False),
        ({"a": True, "b": True, "c": False}, 0.5, 2 / 3, True),
        ({"a": True, "b": True, "c": False}, 2 / 3, 2 / 3, True),  # exactly the share passes
        ({"a": True, "b": True, "c": False}, 0.7, 2 / 3, False),
        ({"a": True, "b": None, "c": None}, 0.34, 1 / 3, False),  # a failed vote counts as no
        ({"a": True, "b": True, "c": True, "d": False, "e": False}, 0.6, 0.6, True),
    ],
)
def test_tally_counts_yes_votes_against_the_threshold(votes, threshold, share, accepted):
    assert tally(votes, threshold) == (pytest.approx(share), accepted)


@pytest.mark.parametrize("group, language", [("T", "en"), ("P", "en"), ("E", "zh"), ("T", "zh")])
def test_experts_of_a_group_have_distinct_personas(group, language):
    experts = group_experts(group, 7, language)
    assert len(experts) == 7  # the paper's Fig. 4 shows groups of 3, 5 and 7 voters
    for field in ("id", "name", "dimension", "profile"):
        assert len({getattr(e, field) for e in experts}) == 7, field
    assert group_experts(group, 3, language) == experts[:3]


def test_groups_run_in_order_and_each_refines_the_previous_reply():
    (dialogue,), (trace,), scripted, retriever, llm_for = run(config())
    turn = dialogue.turns[0]
    assert turn.rejected == DRAFT
    assert turn.chosen == f"E:Ms. Reyes[P:Dr. Hart[T:Ms. Lin[{DRAFT}]]]"
    assert [g.group for g in turn.groups] == ["T", "P", "E"]
    assert [g.reply_in for g in turn.groups] == [DRAFT, f"T:Ms. Lin[{DRAFT}]", f"P:Dr. Hart[T:Ms. Lin[{DRAFT}]]"]
    assert [group for group, _ in retriever.queries] == ["teacher", "psychologist", "ethics"]
    assert DRAFT in retriever.queries[0][1] and "he went to sea" in retriever.queries[0][1]
    assert sorted(set(llm_for.roles)) == ["drafter", "expert", "student", "synthesizer"]
    assert dialogue.failures == 0


@pytest.mark.parametrize("vote_call", ["per_expert", "per_document"])
def test_votes_accept_by_share_and_every_vote_is_traced(vote_call):
    (dialogue,), (trace,), scripted, *_ = run(config(reflection={"candidates": 3, "vote_call": vote_call}))
    t_group = dialogue.turns[0].groups[0]
    assert t_group.retrieved == 3 and t_group.accepted == 2  # "good teaching idea", "good example"
    assert [v["accepted"] for v in t_group.votes] == [True, False, True]
    assert t_group.votes[1] == {
        "document": "teacher/1",
        "votes": {"style": False, "knowledge": False, "logic": False},
        "share": 0.0,
        "accepted": False,
    }
    assert t_group.votes[0]["votes"] == {"style": True, "knowledge": True, "logic": True}
    if vote_call == "per_expert":  # one ballot per expert and group, listing every candidate
        ballots = [r for r in trace.rows if r["agent"] == "ballot"]
        assert len(ballots) == 3 * 3 and not [r for r in trace.rows if r["agent"] == "voter"]
        t_ballots = {r["expert"]: r for r in ballots if r["group"] == "T"}
        assert sorted(t_ballots) == ["knowledge", "logic", "style"]
        assert t_ballots["style"]["documents"] == ["teacher/0", "teacher/1", "teacher/2"]
        assert t_ballots["style"]["parsed"] == [True, False, True]
        assert t_ballots["style"]["step"] == "ballot" and t_ballots["style"]["role"] == "expert"
        assert sum(1 for m in scripted.calls if "Judge every document" in m[0]["content"]) == 9
    else:  # one call per (expert, candidate)
        vote_rows = [r for r in trace.rows if r["agent"] == "voter"]
        assert len(vote_rows) == 3 * 3 + 2 * 3 + 2 * 3  # candidates x experts, per group
        assert {(r["group"], r["expert"], r["document"]) for r in vote_rows if r["group"] == "T"} == {
            ("T", e, f"teacher/{d}") for e in ("style", "knowledge", "logic") for d in range(3)
        }
    retrieval = [r for r in trace.rows if r["agent"] == "retrieval"]
    assert [r["group"] for r in retrieval] == ["T", "P", "E"]
    assert retrieval[0]["parsed"]["hits"][0]["scores"] == {"dense": 1.0, "rrf": pytest.approx(1 / 60)}
    reflection = next(r for r in trace.rows if r["agent"] == "reflection" and r["group"] == "T")
    assert reflection["parsed"]["threshold"] == 0.5 and len(reflection["parsed"]["documents"]) == 3


def test_seven_experts_per_group_vote_and_revise_as_in_the_papers_largest_group():
    def ballot(messages):  # a split group: the first four experts of each group say yes to "good" documents
        expert = re.match(r"You are (.+?),", messages[0]["content"]).group(1)
        keen = expert in {"Ms. Lin", "Mr. Chen", "Ms. Zhou", "Mr. Wang", "Dr. Hart", "Dr. Osei", "Dr. Novak"}
        keen = keen or expert in {"Dr. Lindqvist", "Ms. Reyes", "Mr. Okafor", "Ms. Sato", "Mr. Haddad"}
        blocks = re.findall(r"^Document (\d+):\n(.*)$", messages[-1]["content"], re.M)
        return "\n".join(f"{n}: {'yes' if keen and 'good' in text else 'no'}" for n, text in blocks)

    scripted = ScriptedBackend([(r"Judge every document", ballot)] + rules())
    cfg = config(experts_per_group=7, reflection={"candidates": 3, "accept_share": 4 / 7})
    (dialogue,), (trace,), *_ = run(cfg, scripted=scripted)
    t_group = dialogue.turns[0].groups[0]
    assert [len(v["votes"]) for v in t_group.votes] == [7, 7, 7]
    assert [v["share"] for v in t_group.votes] == [pytest.approx(4 / 7, abs=1e-4), 0.0, pytest.approx(4 / 7, abs=1e-4)]
    assert [v["accepted"] for v in t_group.votes] == [True, False, True]  # 4 of 7 meets the share
    experts = [r for r in trace.rows if r["agent"] == "analyst_reviser" and r["group"] == "T"]
    assert len(experts) == 7 and len({r["expert"] for r in experts}) == 7
    assert sorted(r["document"] for r in experts if r["document"]) == ["teacher/0", "teacher/2"]
    (synthesis,) = [r for r in trace.rows if r["agent"] == "synthesizer" and r["group"] == "T"]
    assert "Version 7: T:Ms. Garcia[" in synthesis["prompt"][1]["content"]


def test_a_ballot_that_skips_a_document_counts_it_as_no_and_a_failed_ballot_as_all_no():
    partial = [(r"Judge every document", "1: yes")] + rules()  # votes on document 1 only
    (dialogue,), (trace,), *_ = run(
        config(reflection={"candidates": 3, "accept_share": 0.5}, ablation={"skip_groups": ["P", "E"]}),
        scripted=ScriptedBackend(partial),
    )
    group = dialogue.turns[0].groups[0]
    assert [v["votes"] for v in group.votes][1] == {"style": None, "knowledge": None, "logic": None}
    assert [v["accepted"] for v in group.votes] == [True, False, False]
    assert group.failures == 2 * 3  # two skipped documents x three experts
    broken = [(r"Judge every document", "I cannot decide.")] + rules()
    (dialogue,), (trace,), *_ = run(
        config(reflection={"candidates": 3}, ablation={"skip_groups": ["P", "E"]}), scripted=ScriptedBackend(broken)
    )
    group = dialogue.turns[0].groups[0]
    assert group.accepted == 0 and group.failures >= 9
    assert all(set(v["votes"].values()) == {None} for v in group.votes)
    ballots = [r for r in trace.rows if r["agent"] == "ballot"]
    assert len(ballots) == 3 and all(not r["ok"] and r["calls"] == 2 for r in ballots)  # re-asked once


EXPERT_STEPS = ("analyst", "analyst_reviser")  # the call that reads an expert's reference


def test_each_expert_analyses_a_distinct_accepted_reference_then_revises_in_one_call():
    (dialogue,), (trace,), *_ = run(config())
    assert config().expert_call == "joint"
    calls = [r for r in trace.rows if r["agent"] == "analyst_reviser" and r["group"] == "T"]
    references = {r["expert"]: r["document"] for r in calls}
    assert references == {"style": "teacher/0", "knowledge": "teacher/2", "logic": None}
    by_expert = {r["expert"]: r for r in calls}
    assert "good teaching idea" in by_expert["style"]["prompt"][1]["content"]
    assert "You have no reference" in by_expert["logic"]["prompt"][1]["content"]
    assert by_expert["style"]["parsed"] == {
        "analysis": "The student feels curious; the reply could ask more.",
        "reply": f"T:Ms. Lin[{DRAFT}]",
    }
    assert not [r for r in trace.rows if r["agent"] in ("analyst", "reviser")]
    synthesis = [r for r in trace.rows if r["agent"] == "synthesizer"]
    assert [r["group"] for r in synthesis] == ["T", "P", "E"]
    assert "Version 1: T:Ms. Lin[" in synthesis[0]["prompt"][1]["content"]


def test_separate_expert_calls_analyse_then_revise_with_the_analysis():
    (dialogue,), (trace,), *_ = run(config(expert_call="separate"))
    analyses = [r for r in trace.rows if r["agent"] == "analyst" and r["group"] == "T"]
    assert {r["expert"]: r["document"] for r in analyses} == {
        "style": "teacher/0",
        "knowledge": "teacher/2",
        "logic": None,
    }
    by_expert = {r["expert"]: r for r in analyses}
    assert "good teaching idea" in by_expert["style"]["prompt"][1]["content"]
    assert "You have no reference" in by_expert["logic"]["prompt"][1]["content"]
    revisions = [r for r in trace.rows if r["agent"] == "reviser" and r["group"] == "T"]
    assert len(revisions) == 3 and all("The student feels curious" in r["prompt"][1]["content"] for r in revisions)
    assert not [r for r in trace.rows if r["agent"] == "analyst_reviser"]
    assert dialogue.turns[0].chosen == f"E:Ms. Reyes[P:Dr. Hart[T:Ms. Lin[{DRAFT}]]]"


def test_threshold_one_accepts_only_unanimous_documents():
    scripted = ScriptedBackend(rules())
    (dialogue,), *_ = run(config(reflection={"candidates": 3, "accept_share": 1.0}), scripted=scripted)
    assert [g.accepted for g in dialogue.turns[0].groups] == [2, 1, 1]


@pytest.mark.parametrize(
    "ablation, groups",
    [({"skip_groups": ["P"]}, ["T", "E"]), ({"skip_groups": ["E"]}, ["T", "P"]), ({"skip_groups": ["P", "E"]}, ["T"])],
)
def test_ablations_skip_groups(ablation, groups):
    (dialogue,), (trace,), _, retriever, _ = run(config(ablation=ablation))
    assert [g.group for g in dialogue.turns[0].groups] == groups
    assert len(retriever.queries) == len(groups)
    expected, first = DRAFT, {"T": "Ms. Lin", "P": "Dr. Hart", "E": "Ms. Reyes"}
    for g in groups:
        expected = f"{g}:{first[g]}[{expected}]"
    assert dialogue.turns[0].chosen == expected


def test_ablation_one_expert_per_group():
    cfg = config(ablation={"one_expert": True}, reflection={"candidates": 3, "vote_call": "per_document"})
    (dialogue,), (trace,), *_ = run(cfg)
    votes = [r for r in trace.rows if r["agent"] == "voter"]
    assert len(votes) == 3 + 2 + 2  # one expert x candidates
    assert {r["expert"] for r in votes} == {"style", "emotion", "safety"}
    assert all(len(v["votes"]) == 1 for g in dialogue.turns[0].groups for v in g.votes)


def test_ablation_voting_off_takes_the_top_retrieved_documents():
    (dialogue,), (trace,), scripted, *_ = run(config(ablation={"selection": "similarity"}))
    assert not [r for r in trace.rows if r["agent"] in ("ballot", "voter", "reflection")]
    assert not any("Judge" in m[0]["content"] for m in scripted.calls)
    analyses = {r["expert"]: r["document"] for r in trace.rows if r["agent"] in EXPERT_STEPS and r["group"] == "T"}
    assert analyses == {"style": "teacher/0", "knowledge": "teacher/1", "logic": "teacher/2"}


class ReverseReranker:
    """Scores later documents higher (test double of the cross-encoder)."""

    def __init__(self):
        self.seen = []

    def score(self, query, passages):
        self.seen.append((query, passages))
        return [float(i) for i in range(len(passages))]


def test_ablation_reranker_instead_of_votes():
    reranker = ReverseReranker()
    (dialogue,), (trace,), *_ = run(config(ablation={"selection": "rerank"}), reranker=reranker)
    assert not [r for r in trace.rows if r["agent"] in ("ballot", "voter")]
    analyses = {r["expert"]: r["document"] for r in trace.rows if r["agent"] in EXPERT_STEPS and r["group"] == "T"}
    assert analyses == {"style": "teacher/2", "knowledge": "teacher/1", "logic": "teacher/0"}
    assert len(reranker.seen) == 3


def test_rerank_without_a_reranker_is_refused():
    with pytest.raises(ValueError, match="needs a reranker"):
        Ram2cTeam(config(ablation={"selection": "rerank"}), scripted_llm_for(backend()), FakeRetriever(DOCS))


def test_multi_turn_history_uses_the_chosen_replies():
    (dialogue,), (trace,), *_ = run(config(turns=3))
    assert [t.turn for t in dialogue.turns] == [1, 2, 3]
    third = dialogue.turns[2].prompt
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert third[2]["content"] == dialogue.turns[0].chosen and third[4]["content"] == dialogue.turns[1].chosen
    student_turn2 = next(r for r in trace.rows if r["agent"] == "student" and r["turn"] == 2)
    assert dialogue.turns[0].chosen in student_turn2["prompt"][1]["content"]


@pytest.mark.parametrize(
    "expert_call, revising", [("joint", "Answer in two parts"), ("separate", "rewrite the teacher")]
)
def test_failed_synthesis_keeps_the_first_revision_and_failed_revisions_pass_through(expert_call, revising):
    broken = [r for r in rules() if "merge" not in r[0]] + [(r"You merge several", "")]
    cfg = config(ablation={"skip_groups": ["P", "E"]}, expert_call=expert_call)
    (dialogue,), *_ = run(cfg, scripted=ScriptedBackend(broken))
    group = dialogue.turns[0].groups[0]
    assert group.reply_out == f"T:Ms. Lin[{DRAFT}]" and not group.synthesized and group.failures == 1
    no_revisions = [(revising, "   ")] + [r for r in rules() if revising not in r[0]]
    (dialogue,), (trace,), *_ = run(cfg, scripted=ScriptedBackend(no_revisions))
    assert dialogue.turns[0].chosen == DRAFT and dialogue.turns[0].groups[0].failures == 3
    assert not [r for r in trace.rows if r["agent"] == "synthesizer"]


def test_experts_of_a_group_and_dialogues_run_concurrently():
    slow = ScriptedBackend(rules(), delay_s=0.1)
    start = time.perf_counter()
    results, *_ = run(config(), scripted=slow, plans=[plan(i) for i in range(4)])
    wall = time.perf_counter() - start
    # depth per dialogue: student, drafter, then 3 per group (ballots, analysis + revision, synthesis) = 11 calls
    assert all(len(d.turns) == 1 for d in results)
    assert len(slow.calls) == 4 * (2 + 3 * (3 + 3 + 1))  # ballots, analyses with revisions, synthesis
    assert wall < 3.5, wall  # 11 x 0.1 s in depth; one call at a time would take 92 x 0.1 s = 9.2 s


def test_zh_dialogue_runs_through_the_groups():
    (dialogue,), (trace,), *_ = run(config(language="zh"), plans=[plan(0, "zh")])
    assert dialogue.turns[0].chosen.startswith("E:许老师[P:何博士[T:林老师[")


def test_one_query_rewrite_per_turn_runs_beside_the_drafter_and_serves_every_group():
    from pipelines.llm.client import LLM
    from pipelines.retrieval.rewrite import QueryRewriter

    slow = ScriptedBackend(rules(), delay_s=0.2)
    retriever = FakeRetriever(DOCS, rewriter=QueryRewriter(LLM(slow, role="query_rewriter"), 2))
    team = Ram2cTeam(config(turns=2), scripted_llm_for(slow), retriever)
    trace = SampleTrace("d0")
    start = time.perf_counter()
    dialogue = asyncio.run(team.dialogue(plan(), trace))
    wall = time.perf_counter() - start
    rewrites = [r for r in trace.rows if r["agent"] == "query_rewriter"]
    assert [r["turn"] for r in rewrites] == [1, 2] and all(r["step"] == "query_rewriter" for r in rewrites)
    first = dialogue.turns[0]
    answer = "I think he was brave because he went to sea."
    assert rewrites[0]["prompt"][1]["content"].endswith(f"{dialogue.topic}\n{answer}")
    assert retriever.rewrites == [["why he went to sea", "reasons for sailing"]] * 6  # 3 groups x 2 turns, shared
    assert [g for g, _ in retriever.queries] == ["teacher", "psychologist", "ethics"] * 2
    assert first.rejected in retriever.queries[0][1]  # the original query still holds the current reply
    assert dialogue.calls == 2 * (2 + 1 + 3 * 7)  # student, drafter, one rewrite, 3 groups x 7 per turn
    # depth per turn: student, drafter (rewrite beside it), 3 x 3 in the groups = 11 calls of 0.2 s
    assert wall < 2 * 11 * 0.2 + 1.5, wall


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_group_retrieves_in_the_dialogue_language(language):
    _, _, _, retriever, _ = run(config(language=language), plans=[plan(language=language)])
    assert retriever.languages == [language] * 3
