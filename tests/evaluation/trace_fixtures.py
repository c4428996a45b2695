"""Trace rows of three teams in the shared shape (AgentRecord.to_trace + non-LLM result rows)."""

from pipelines.agents import AgentRecord, SampleTrace


def call(sample_id, agent, reply, parsed, *, ok=True, error=None, role=None, **extra):
    record = AgentRecord(
        agent=agent,
        role=role or agent,
        prompt=[
            {"role": "system", "content": f"You are the {agent}."},
            {"role": "user", "content": f"Task of {agent}"},
        ],
        reply=reply,
        parsed=parsed,
        ok=ok,
        error=error,
        usage={"prompt_tokens": 12, "completion_tokens": 5},
        calls=1 if ok else 2,
        replies=[reply] if ok else ["garbage", reply],
    )
    return record.to_trace(sample_id, **extra)


def tagging_rows(n_extra: int = 0):
    rows = []
    for sid, label, verdict in (("q-correct", 1, True), ("q-wrong", 1, False)):
        rows.append(call(sid, "planner", "1. numbers <numerical>", {"constraints": [{"kind": "numerical"}]}))
        rows.append(
            call(
                sid, "program_writer", "```python\nprint(x > 3)\n```", {"code": "print(x > 3)"},
                code="x = 5\nprint(x > 3)",
                sandbox={"stdout": "True\n", "stderr": "", "exit_code": 0, "timed_out": False, "killed_reason": None,
                         "verdict": True, "duration_s": 0.01},
                constraint_index=0,
            )
        )  # fmt: skip
        rows.append(
            {"sample_id": sid, "agent": "team", "role": "aggregate", "prompt": None, "reply": None,
             "parsed": {"verdict": verdict, "failures": 0}, "ok": True, "error": None, "usage": {},
             "cached": False, "label": label}
        )  # fmt: skip
    rows.append(call("q-failed", "solver", "???", None, ok=False, error="parse (attempt 2/2): no answer"))
    for i in range(n_extra):
        rows.append(call(f"q-extra-{i}", "solver", "x", {"answer": i}, outcome="correct" if i % 5 else "wrong"))
    return rows


def kgc_rows():
    rows = []
    rounds = {
        "ner": [[["PER", "Messi"]], [["PER", "Messi"], ["DATE", "1987"]], [["PER", "Messi"], ["DATE", "1987"]]],
        "re": [[["Messi", "born_in", "Rosario"]], [["Messi", "born_in", "Rosario"]], [["Messi", "born_on", "1987"]]],
    }
    for r in range(3):
        for expert, by_round in rounds.items():
            kept = "\n".join(str(tuple(x)) for x in by_round[r])
            parsed = {"items": by_round[r], "malformed": 0, "reason": ""}
            rows.append(call("sent-1", f"{expert}_expert", f"round {r}", parsed, round=r, expert=expert, kept=kept))
    rows.append({"sample_id": "sent-1", "agent": "kgc", "role": "score", "ok": True, "correct": False, "f1": 0.5})
    rows.append(call("sent-2", "ner_expert", "r0", [["ORG", "FIFA"]], round=0, expert="ner", correct=True))
    return rows


def ram2c_rows():
    sid = "topic-7"
    hits = [
        {"id": "doc-4", "kind": "dialogue", "score": 0.91, "text": "Teacher: what would you do alone?"},
        {"id": "doc-15", "kind": "theory", "score": 0.52, "text": "Heuristic questions <invite> analysis."},
    ]
    trace = SampleTrace(sid)
    trace.add_result("retrieval", "T", inputs={"queries": ["diary loneliness"]}, result={"hits": hits}, latency_s=0.05)
    rows = trace.rows
    for e, votes in enumerate(({"doc-4": 1, "doc-15": 5}, {"doc-4": 2, "doc-15": 4})):
        rows.append(call(sid, "voter", "votes...", {"votes": votes}, group="T", expert=f"T{e + 1}"))
    for group, revision in (("T", "Great point! What would you write first?"), ("P", "I can feel you care.")):
        rows.append(call(sid, "synthesizer", "revised", {"revision": revision}, group=group))
    rows.append(
        {"sample_id": sid, "agent": "ram2c", "role": "pair", "ok": True, "prompt": None,
         "result": {"chosen": "I can feel you care.", "rejected": "Write a diary."}}
    )  # fmt: skip
    return rows
