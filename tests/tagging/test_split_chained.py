"""Split by concept when shared questions chain every knowledge id together (issue 36, item 8): the
evaluation side still takes ``evaluation_share`` of the rows; the generation rows of questions that
are also evaluated are left out and counted, never leaked; unchained data splits as before."""

import pytest

from pipelines.tagging.data import TaggingDataConfig, TaggingExample, read_examples
from pipelines.tagging.split import SplitConfig, question_key, split_examples
from tests.tagging.test_split import ROOT, SHARED_CSV, mathfish_params_from_readme


def chained(n: int = 40) -> list[TaggingExample]:
    """Question i is paired with standards i and i+1: one chain through every knowledge id."""
    rows = []
    for i in range(n):
        rows.append(TaggingExample(f"a{i}", f"std-{i}", f"Standard {i}.", f"Question {i}?", 1))
        rows.append(TaggingExample(f"b{i}", f"std-{i + 1}", f"Standard {i + 1}.", f"Question {i}?", 0))
    return rows


def _check(split, rows):
    held_out = {question_key(e.question) for e in split.evaluation}
    assert not held_out & {question_key(e.question) for e in split.generation}  # no evaluated question leaks
    assert not {e.knowledge_id for e in split.evaluation} & {e.knowledge_id for e in split.generation}
    assert len(split.generation) + len(split.evaluation) + len(split.left_out) == len(rows)


@pytest.mark.parametrize("share", [0.67, 0.3, 0.1])
def test_a_chained_set_honours_the_share_and_counts_what_it_leaves_out(share, caplog):
    rows = chained()
    split = split_examples(rows, SplitConfig(by="concept", evaluation_share=share))
    _check(split, rows)
    assert abs(len(split.evaluation) - share * len(rows)) <= 2  # was: every row evaluated, 0 generation
    assert split.generation and 0 < len(split.left_out) < len(rows) - len(split.evaluation)
    record = split.record()
    assert record["counts"]["left_out"] == len(split.left_out) and record["bridging_questions"] > 0
    assert set(record["ids"]["left_out"]) == {e.id for e in split.left_out}
    assert "question(s) are paired with knowledge ids on both sides" in caplog.text


def test_an_unchained_set_splits_as_before_and_leaves_nothing_out():
    rows = read_examples(TaggingDataConfig(), ROOT)
    split = split_examples(rows, SplitConfig(by="concept", evaluation_share=0.5, seed=0))
    _check(split, rows)
    assert split.left_out == [] and split.record()["bridging_questions"] == 0
    assert len({e.knowledge_id for e in split.evaluation}) == 3 and len(split.evaluation) == 54


def test_mathfish_by_concept_honours_the_share():
    if not SHARED_CSV.exists():
        pytest.skip(f"shared data not found at {SHARED_CSV} (optional)")
    data = TaggingDataConfig.model_validate({**mathfish_params_from_readme()["data"], "path": str(SHARED_CSV)})
    rows = read_examples(data)
    for share in (0.67, 0.3, 0.1):
        split = split_examples(rows, SplitConfig(by="concept", evaluation_share=share))
        _check(split, rows)
        assert split.generation and abs(len(split.evaluation) - share * len(rows)) <= 0.05 * len(rows)
