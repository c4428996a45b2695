"""Batches split by prompt length (transformers backend): the padded prompt area falls, every
request lands in exactly one group, and similar lengths stay in one generate call."""

from __future__ import annotations

from pipelines.llm.transformers_backend import length_groups


def _area(lengths, rows, groups):
    return sum(sum(rows[i] for i in g) * max(lengths[i] for i in g) for g in groups)


def test_one_long_prompt_gets_its_own_generate():
    lengths = [215, 335, 440, 170, 900, 465, 210, 330, 1500, 160, 430, 420, 880, 300, 250, 190]
    rows = [1] * len(lengths)
    groups = length_groups(lengths, rows, 1024)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert groups[0] == [8] and [lengths[i] for i in groups[1]] == [900, 880]
    assert _area(lengths, rows, groups) == 8055 < 16 * 1500
    assert length_groups(lengths, rows, None) == [sorted(range(16), key=lambda i: -lengths[i])]


def test_similar_lengths_and_single_requests_stay_together():
    assert length_groups([100, 101, 102, 99], [1, 1, 1, 1], 1024) == [[2, 1, 0, 3]]
    assert length_groups([5], [1], 1024) == [[0]]
    assert length_groups([], [], 1024) == []


def test_rows_of_a_request_weigh_in():
    # 8 choices of a short prompt are worth their own call next to one long prompt; 1 choice is not
    assert length_groups([100, 900], [8, 1], 512) == [[1], [0]]
    assert length_groups([100, 900], [1, 1], 1024) == [[1, 0]]
