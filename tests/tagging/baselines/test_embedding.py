"""The embedding baseline (``pipelines/tagging/baselines/embedding.py``): threshold tuning and
embedding similarity with the packaged MiniLM."""

import dataclasses

import numpy as np
import pytest
from pydantic import ValidationError

from pipelines.tagging.baselines.embedding import EmbeddingBaselineConfig, best_threshold, load_embedder, predict
from tests.tagging.baselines.rows import EVAL, ex
from tests.tiny_models import minilm_dir


@pytest.fixture(scope="module")
def embed():
    return load_embedder(minilm_dir())


def test_best_threshold_separates_scores():
    scores = np.array([0.1, 0.2, 0.7, 0.9])
    cut = best_threshold(scores, [0, 0, 1, 1])
    assert 0.2 < cut < 0.7
    assert best_threshold(np.array([0.5, 0.6]), [1, 1]) < 0.5


def test_embedding_baseline_top_k_as_the_paper_and_threshold(embed, one_torch_thread):
    train = [ex(10, "Sam has 4 cups and 3 plates. How many cup-and-plate sets?", 1), ex(11, "What is 5 + 6?", 0)]
    preds, scores, info = predict(EmbeddingBaselineConfig(), embed, EVAL, train)
    assert scores[0] > scores[1] and scores[2] > scores[3]  # outfit questions are closer to the definition
    assert preds == [1, 0, 1, 0]  # K = 4 candidates x the generation split's share 1/2 = 2
    assert info["mode"] == "top_k" and info["top_k"] == {"comb/en": 2} and info["candidates"] == 4
    assert "generation-split share of positives" in info["source"] and "labels unread" in info["source"]
    top, _, one = predict(EmbeddingBaselineConfig(top_k=1), embed, EVAL, [])
    assert sum(top) == 1 and top[int(np.argmax(scores))] == 1 and one["top_k"] == {"comb/en": 1}
    # one evaluated pair is ranked among all its definition's candidates, not alone
    alone, _, _ = predict(EmbeddingBaselineConfig(), embed, [EVAL[1]], train)
    ranked, _, _ = predict(EmbeddingBaselineConfig(), embed, [EVAL[1]], train, candidates=EVAL)
    assert alone == [1] and ranked == [0]
    fitted, _, info = predict(EmbeddingBaselineConfig(mode="threshold"), embed, EVAL, EVAL)
    assert fitted == [1, 0, 1, 0] and info["threshold"] is not None
    assert info["source"] == "fitted on 4 generation-split pairs, the generation split's own prior 0.50"
    fixed, _, used = predict(EmbeddingBaselineConfig(mode="threshold", threshold=0.99), embed, EVAL, [])
    assert fixed == [0, 0, 0, 0] and used == {
        "mode": "threshold",
        "threshold": 0.99,
        "source": "embedding.threshold in params",
    }


def test_missing_model_folder_says_how_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare_models"):
        load_embedder(tmp_path / "nope")


# issue 11, defect 11: the threshold is fitted with a class prior
def test_threshold_fitted_with_a_prior_weights_the_classes():
    scores = np.array([0.3, 0.8, 0.9, 0.2, 0.4, 0.5])
    labels = [1, 1, 1, 0, 0, 0]
    assert best_threshold(scores, labels) == pytest.approx(0.65)
    assert best_threshold(scores, labels, prior=0.9) == pytest.approx(0.25)  # mostly positives: cut low
    assert best_threshold(scores, labels, prior=0.5) == pytest.approx(0.65)


# issue 21: neither mode reads the evaluation split's labels or prior
def test_embedding_baseline_never_reads_evaluation_labels(embed, one_torch_thread):
    train = EVAL[:2] + [ex(9, "Sam has 4 cups and 3 plates. How many different cup-and-plate sets?", 1)]
    evaluation = EVAL + [ex(20 + i, f"A shop sold {i} apples. How many are left of {i + 9}?", 0) for i in range(4)]
    flipped = [dataclasses.replace(e, label=1 - e.label) for e in evaluation]
    for cfg in (EmbeddingBaselineConfig(), EmbeddingBaselineConfig(mode="threshold")):
        assert predict(cfg, embed, evaluation, train) == predict(cfg, embed, flipped, train)
    _, _, info = predict(EmbeddingBaselineConfig(mode="threshold"), embed, evaluation, train)
    assert info["source"].endswith("the generation split's own prior 0.67")
    _, _, info = predict(EmbeddingBaselineConfig(mode="threshold", prior=0.25), embed, evaluation, train)
    assert info["source"].endswith("reweighted to the prior 0.25 in params")
    with pytest.raises(ValidationError, match="evaluation split's labels"):
        EmbeddingBaselineConfig(prior="evaluation")
    assert EmbeddingBaselineConfig(prior="training").prior == "generation"  # the former name of the same prior
