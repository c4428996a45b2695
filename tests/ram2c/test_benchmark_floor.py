"""The schedule floor printed by benchmarks/ram2c_throughput.py: rounds a first-come-first-served
limiter needs when every call costs exactly one latency."""

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "ram2c_throughput", Path(__file__).resolve().parents[2] / "benchmarks" / "ram2c_throughput.py"
)
BENCH = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(BENCH)
WIDTHS = [1, 2] + [3, 3, 3, 1] * 3  # student; drafter + rewrite; per group ballots, analyses, revisions, synthesis
JOINT = [1, 2] + [3, 3, 1] * 3  # per group ballots, analyses with their revisions, synthesis


def test_step_widths_of_both_expert_calls():
    assert BENCH.step_widths(experts=3, votes=3, expert_call="separate") == WIDTHS
    assert BENCH.step_widths(experts=3, votes=3, expert_call="joint") == JOINT
    assert BENCH.step_widths(experts=1, votes=3, expert_call="joint", groups=1) == [1, 2, 3, 1, 1]


def test_depth_is_reached_when_the_slots_suffice():
    assert BENCH.greedy_rounds(10, 128, WIDTHS) == 15 == 1 + len(WIDTHS)
    assert BENCH.greedy_rounds(10, 128, JOINT) == 12 == 1 + len(JOINT)
    assert BENCH.greedy_rounds(1, 1, [1, 2, 3]) == 1 + 1 + 2 + 3  # one slot: every call in turn


def test_steps_wider_than_the_free_slots_wait():
    assert BENCH.greedy_rounds(50, 128, WIDTHS) == 17  # 150-call expert steps on 128 slots
    assert BENCH.greedy_rounds(50, 128, JOINT) == 13  # one round over the depth of 12
    per_document = [1, 2] + [9, 3, 3, 1] * 3  # 3 experts x 3 documents, one call each
    assert BENCH.greedy_rounds(50, 128, per_document) == 23
    assert BENCH.greedy_rounds(50, 10_000, per_document) == 15
