"""The whole team on scripted replies: verdicts from the sandboxed numbers, AND semantics, the
failure policy, plan sharing, per-role LLMs and concurrency of independent agents."""

import asyncio
import time

import pytest

from pipelines.agents import SampleTrace
from pipelines.agents.sandbox import SandboxLimits
from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.tagging.agents.worked_examples import SemanticExamples
from pipelines.tagging.data import TaggingExample
from pipelines.tagging.team import TaggingTeam, TeamConfig
from tests.tagging.scripted import team_rules

DEFINITION = "Multiplying a two-digit number by a one-digit number."


def example(n, i=0, definition=DEFINITION, language="en"):
    return TaggingExample(
        f"q{i}", "mul", definition, f"A box holds {n} pens. How many pens are in 3 boxes?", 1, language
    )


def run_team(examples, rules=None, cfg=None, backend=None):
    backend = backend or ScriptedBackend(rules or team_rules())
    roles = []

    def llm_for(role):
        roles.append(role)
        return LLM(backend, role=role)

    team = TaggingTeam(llm_for, cfg or TeamConfig())

    async def main():
        traces = [SampleTrace(e.id) for e in examples]
        results = await asyncio.gather(*(team.tag(e, t) for e, t in zip(examples, traces, strict=True)))
        return results, traces

    results, traces = asyncio.run(main())
    return results, traces, backend, roles


def test_numerical_judge_decides_from_the_sandbox_and_traces_everything():
    (yes, no), (trace_yes, trace_no), backend, roles = run_team([example(45, 0), example(150, 1)])
    assert yes.verdict is True and yes.failures == 0
    assert no.verdict is False and no.failures == 0
    assert [(c.kind, c.verdict, c.settled_by) for c in no.constraints] == [
        ("semantic", True, "semantic_judge"),
        ("numerical", False, "numerical_judge"),
    ]
    assert no.constraints[1].arguments == "first = 150"
    assert sorted(set(roles)) == ["numerical_judge", "planner", "semantic_judge", "solver"]
    agents = [row["agent"] for row in trace_no.rows]
    assert sorted(agents) == ["arg_extractor", "planner", "program_writer", "semantic_judge", "solver"]
    program_row = next(r for r in trace_no.rows if r["agent"] == "program_writer")
    assert program_row["code"] == "first = 150\n\nprint(10 <= first <= 99)\n"
    assert program_row["sandbox"]["stdout"].strip() == "False" and program_row["sandbox"]["verdict"] is False
    assert program_row["role"] == "numerical_judge" and program_row["usage"]["completion_tokens"] > 0
    # the plan depends only on the definition: one planner call for both questions
    assert sum("task planner" in c[0]["content"] for c in backend.calls) == 1
    assert [r["shared"] for r in trace_yes.rows + trace_no.rows if r["agent"] == "planner"] == [False, True]


def test_verdict_is_the_and_of_sub_constraints():
    (result,), _, _, _ = run_team([example(45)], team_rules(semantic="It asks for a sum. <No>"))
    assert [c.verdict for c in result.constraints] == [False, True]
    assert result.verdict is False and result.failures == 0


@pytest.mark.parametrize(
    "policy, verdict, settled",
    [("no", False, "policy:no"), ("semantic", True, "policy:semantic")],
)
def test_unparseable_program_is_counted_and_settled_by_policy(policy, verdict, settled):
    rules = team_rules()
    rules[4] = (r"Second step: write", "I cannot write code for this.")
    cfg = TeamConfig(failure_policy=policy, max_attempts=2)
    (result,), (trace,), backend, _ = run_team([example(45)], rules, cfg)
    numerical = result.constraints[1]
    assert result.verdict is verdict and numerical.settled_by == settled
    assert result.failures == 1 and numerical.error.startswith("program_writer: parse (attempt 2/2)")
    writer_rows = [r for r in trace.rows if r["agent"] == "program_writer"]
    assert len(writer_rows) == 1 and writer_rows[0]["ok"] is False and writer_rows[0]["calls"] == 2
    judged = [r["constraint_index"] for r in trace.rows if r["agent"] == "semantic_judge"]
    assert judged == ([0] if policy == "no" else sorted([0, 1]))


def test_sandbox_error_and_timeout_are_failures_with_the_sandbox_result_traced():
    rules = team_rules(program="print(undefined_name > 1)")
    (result,), (trace,), _, _ = run_team([example(45)], rules)
    assert result.verdict is False and result.failures == 1
    assert "sandbox: no boolean printed" in result.constraints[1].error
    row = next(r for r in trace.rows if r["agent"] == "program_writer")
    assert row["sandbox"]["exit_code"] != 0 and "NameError" in row["sandbox"]["stderr"]

    cfg = TeamConfig(failure_policy="semantic", sandbox=SandboxLimits(wall_time_s=0.5, cpu_time_s=1.0))
    (result,), (trace,), _, _ = run_team([example(45)], team_rules(program="while True:\n    pass\nprint(True)"), cfg)
    row = next(r for r in trace.rows if r["agent"] == "program_writer")
    assert row["sandbox"]["timed_out"] or row["sandbox"]["killed_reason"]
    assert result.failures == 1 and result.verdict is True  # re-judged semantically
    assert result.constraints[1].settled_by == "policy:semantic"


def test_failed_plan_falls_back_to_the_whole_definition():
    rules = team_rules(plan="I am not sure what you mean.")
    (result,), _, _, _ = run_team([example(45)], rules, TeamConfig(max_attempts=1))
    assert result.failures == 1 and len(result.constraints) == 1
    assert result.constraints[0].text == "Does the question satisfy the whole definition?"
    assert result.verdict is True


def test_chinese_question_uses_chinese_prompts():
    plan = "<semantic> 题目是否要求计算乘积？\n<numerical> 第一个数是否是两位数？"
    zh = TaggingExample("z", "mul", "两位数乘一位数。", "每盒有 47 支笔，3 盒有多少支？", 1, "zh")
    (result,), (trace,), backend, _ = run_team([zh], team_rules(plan=plan))
    assert result.verdict is True
    assert all("知识点标注团队" in c[0]["content"] for c in backend.calls)


def test_independent_agents_run_concurrently():
    spans = []

    class Timed(ScriptedBackend):
        async def chat(self, messages, params):
            start = time.perf_counter()
            result = await super().chat(messages, params)
            spans.append((messages[0]["content"][:40], start, time.perf_counter()))
            return result

    rules = team_rules(plan="<numerical> Is the first number below 100?\n<numerical> Is the first number above 9?")
    run_team([example(45)], backend=Timed(rules, delay_s=0.3))

    def span(word):
        return [s for s in spans if word in s[0]]

    def overlap(a, b):
        return a[1] < b[2] and b[1] < a[2]

    assert overlap(span("task planner")[0], span("question solver")[0])
    first, second = span("numerical judge")[:2]  # the two arg extractions, one per sub-constraint
    assert overlap(first, second)


# issue 11, defect 10: a transient planner error is retried and never shared as the plan
def test_a_transient_planner_error_is_retried_and_not_cached():
    from pipelines.llm.types import LLMError

    failures = {"left": 1}

    def plan(messages):
        if failures["left"]:
            failures["left"] -= 1
            raise LLMError("server busy (503)")
        return "<semantic> Does the question ask for a product?\n<numerical> Is the first number a two-digit number?"

    rules = team_rules()
    rules[0] = (r"task planner", plan)
    results, traces, _, _ = run_team([example(45, i) for i in range(3)], rules)
    assert [r.failures for r in results] == [0, 0, 0]
    assert all(len(r.constraints) == 2 for r in results)
    assert not any(row.get("error_kind") == "llm" for t in traces for row in t.rows)


def test_a_planner_that_keeps_failing_is_tried_again_by_the_next_question():
    from pipelines.llm.types import LLMError

    calls = {"n": 0}

    def plan(messages):
        calls["n"] += 1
        if calls["n"] <= 2:  # both tries of the first question fail
            raise LLMError("server down")
        return "<semantic> Does the question ask for a product?"

    rules = team_rules()
    rules[0] = (r"task planner", plan)
    backend = ScriptedBackend(rules)
    team = TaggingTeam(lambda role: LLM(backend, role=role), TeamConfig(plan_attempts=2))

    async def main():
        first = await team.tag(example(45, 0), SampleTrace("q0"))
        second = await team.tag(example(45, 1), SampleTrace("q1"))
        return first, second

    first, second = asyncio.run(main())
    assert first.failures == 1 and first.constraints[0].text == "Does the question satisfy the whole definition?"
    assert second.failures == 0 and second.constraints[0].text == "Does the question ask for a product?"


# issue 11, defect 6: a verdict that hangs on a failed sub-task is not an answer
def test_a_verdict_decided_by_a_failed_sub_task_is_unanswered():
    rules = team_rules()
    rules[4] = (r"Second step: write", "I cannot write code for this.")
    (result,), _, _, _ = run_team([example(45)], rules, TeamConfig(failure_policy="no"))
    assert result.verdict is False and result.answered is False
    rules = team_rules(semantic="It asks for a sum. <No>")
    rules[4] = (r"Second step: write", "I cannot write code for this.")
    (result,), _, _, _ = run_team([example(45)], rules, TeamConfig(failure_policy="no"))
    assert result.verdict is False and result.answered is True  # the semantic No decides the AND
    (result,), _, _, _ = run_team([example(45)])
    assert result.answered is True


# issue 11, defect 4 and issue 21: the semantic judge sees a positive and a negative example, by semantic label
def test_semantic_judge_sees_a_positive_and_a_negative_example():
    demo_yes = TaggingExample("d1", "mul", DEFINITION, "A crate has 21 jars. How many jars are in 4 crates?", 1)
    demo_num_no = TaggingExample("d2", "mul", DEFINITION, "A crate has 210 jars. How many in 4 crates?", 0)
    demo_sem_no = TaggingExample("d3", "mul", DEFINITION, "What is 21 + 4?", 0, semantic_label=0)

    def semantic_prompt(rows):
        backend = ScriptedBackend(team_rules())
        team = TaggingTeam(lambda role: LLM(backend, role=role), TeamConfig(), {("mul", "en"): rows})
        asyncio.run(team.tag(example(45), SampleTrace("q0")))
        return next(c for c in backend.calls if "semantic judge" in c[0]["content"])

    system, user = (m["content"] for m in semantic_prompt([demo_num_no, demo_yes, demo_sem_no]))
    assert "two examples" in system
    assert "21 jars" in user and "210 jars" not in user  # a numerical-only negative is no semantic No
    assert user.index("21 jars. How many jars are in 4 crates?\nExample judgment: <Yes>") < user.index(
        "What is 21 + 4?\nExample judgment: <No>"
    )
    # no semantic negative among the concept's rows: the shipped judged sub-constraint stands in
    shipped = SemanticExamples().pair_for(DEFINITION, "en").negative
    user = semantic_prompt([demo_yes, demo_num_no])[-1]["content"]
    assert f"Example sub-constraint: {shipped.constraint}\nExample question: {shipped.question}" in user
    assert f"Example judgment: {shipped.reasoning} <No>" in user and "21 jars" in user
    user = semantic_prompt([])[-1]["content"]  # nothing labelled: both from the shipped pair
    assert user.count("Example judgment:") == 2 and "<Yes>" in user and "<No>" in user
    assert "Example question: A box holds 45 pens" not in user  # never the question itself


def json_rules(program: str = '{"code": "print(10 <= first <= 99)"}'):
    """JSON replies for every agent (json mode), the program naming the extracted variable."""
    return [
        (
            r"task planner",
            '{"constraints": [{"kind": "semantic", "text": "Does the question ask for a product?"}, '
            '{"kind": "numerical", "text": "Is the first number a two-digit number?"}]}',
        ),
        (r"question solver", '{"final_answer": "135", "reasoning": "45 x 3 = 135."}'),
        (r"semantic judge", '{"answer": "Yes", "reasoning": "It multiplies."}'),
        (r"First step: extract", '{"arguments": [{"name": "first", "value": 45}]}'),
        (r"Second step: write", program),
    ]


COMPARISONS = (
    '{"comparisons": [{"left": "first", "op": ">=", "right": "10"}, {"left": "first", "op": "<=", "right": "99"}]}'
)


@pytest.mark.parametrize(
    ("form", "reply", "program"),
    [
        ("python", None, "print(10 <= first <= 99)"),
        ("comparisons", COMPARISONS, "print(bool((first) >= (10) and (first) <= (99)))"),
    ],
)
def test_json_mode_caps_each_agent_at_its_schema_and_narrows_the_program_to_the_variables(form, reply, program):
    from pipelines.agents.reply_bounds import max_reply_bytes

    class Recording(ScriptedBackend):
        def __init__(self, rules):
            super().__init__(rules)
            self.params = []

        async def chat(self, messages, params):
            self.params.append((messages, params))
            return await super().chat(messages, params)

    backend = Recording(json_rules(reply) if reply else json_rules())
    cfg = TeamConfig(max_constraints=2, program=form)
    team = TaggingTeam(lambda role: LLM(backend, role=role), cfg, mode="json")
    trace = SampleTrace("q0")
    result = asyncio.run(team.tag(example(45), trace))
    assert result.verdict is True and result.failures == 0
    assert result.constraints[1].program == program and result.constraints[1].settled_by == "numerical_judge"
    assert team.numerical() == {"checks": 1, "no_arguments": 0, "no_program": 0, "programs_run": 1, "verdicts": 1,
                                "no_verdict": 0, "printed_true": 1}  # fmt: skip
    by_agent = {}
    for messages, params in backend.params:
        agent = next(a for a in AGENT_MARKERS if AGENT_MARKERS[a] in messages[0]["content"])
        by_agent[agent] = (messages, params)
    for name in ("planner", "solver", "semantic_judge", "arg_extractor"):
        agent = getattr(team, name)
        assert by_agent[name][1].json_schema == agent.json_schema
        assert by_agent[name][1].max_tokens == max_reply_bytes(agent.json_schema)
    messages, params = by_agent["program_writer"]
    if form == "python":
        pattern = params.json_schema["properties"]["code"]["pattern"]
    else:
        pattern = params.json_schema["$defs"]["Comparison"]["properties"]["left"]["pattern"]
    assert "(first)" in pattern and "[A-Za-z_]" not in pattern  # only the extracted name, no free identifier
    assert params.max_tokens == max_reply_bytes(team.program_writer.json_schema) >= max_reply_bytes(params.json_schema)
    # the prompt shows the declared schema, so the system text is the same for every call
    assert team.program_writer.output_schema_text() in messages[0]["content"]
    # the writer and the extractor get the definition and the question, as the paper's prompts do
    for name in ("arg_extractor", "program_writer"):
        user = by_agent[name][0][-1]["content"]
        assert f"Definition: {DEFINITION}" in user and "Question: A box holds 45 pens" in user
    row = next(r for r in trace.rows if r["agent"] == "program_writer")
    assert row["code"] == f"first = 45\n\n{program}\n" and row["sandbox"]["verdict"] is True


def test_numerical_counts_say_how_each_check_went():
    rules = team_rules()
    rules[4] = (r"Second step: write", "```python\nprint(10 <= first <= 99)\nraise SystemExit(3)\n```")
    (result,), _, _, _ = run_team([example(45)], rules)
    assert result.failures == 1 and result.constraints[1].error.startswith("sandbox: no boolean printed")
    team = TaggingTeam(lambda role: LLM(ScriptedBackend(rules), role=role), TeamConfig())
    asyncio.run(team.tag(example(45), SampleTrace("q0")))
    assert team.numerical()["programs_run"] == 1 and team.numerical()["no_verdict"] == 1
    rules[3] = (r"First step: extract", "no numbers")
    team = TaggingTeam(lambda role: LLM(ScriptedBackend(rules), role=role), TeamConfig())
    asyncio.run(team.tag(example(45), SampleTrace("q0")))
    assert team.numerical() == {"checks": 1, "no_arguments": 1, "no_program": 0, "programs_run": 0, "verdicts": 0,
                                "no_verdict": 0, "printed_true": 0}  # fmt: skip


AGENT_MARKERS = {
    "planner": "task planner",
    "solver": "question solver",
    "semantic_judge": "semantic judge",
    "arg_extractor": "First step: extract",
    "program_writer": "Second step: write",
}
