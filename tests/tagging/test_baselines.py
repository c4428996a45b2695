"""Baselines: threshold tuning, embedding similarity with the packaged MiniLM, PLM fine-tuning."""

import dataclasses

import numpy as np
import pytest
from pydantic import ValidationError

from pipelines.tagging.baselines.embedding import EmbeddingBaselineConfig, best_threshold, load_embedder, predict
from pipelines.tagging.baselines.plm import PLMBaselineConfig, train_and_predict, validation_split
from pipelines.tagging.data import TaggingExample
from tests.tiny_models import minilm_dir

DEF = "Counting combinations: how many different outfits can be made from shirts and trousers."


def ex(i, question, label, kid="comb", definition=DEF):
    return TaggingExample(f"e{i}", kid, definition, question, label)


EVAL = [
    ex(0, "Lily has 3 shirts and 4 pairs of trousers. How many different outfits can she make?", 1),
    ex(1, "A train travels 120 km in the morning and 80 km in the afternoon. How far does it go?", 0),
    ex(2, "Tom has 2 hats and 5 scarves. How many different hat-and-scarf outfits are possible?", 1),
    ex(3, "The temperature dropped from 12 degrees to 3 degrees. By how much did it fall?", 0),
]


def test_best_threshold_separates_scores():
    scores = np.array([0.1, 0.2, 0.7, 0.9])
    cut = best_threshold(scores, [0, 0, 1, 1])
    assert 0.2 < cut < 0.7
    assert best_threshold(np.array([0.5, 0.6]), [1, 1]) < 0.5


@pytest.fixture(scope="module")
def embed():
    return load_embedder(minilm_dir())


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


@pytest.mark.slow
def test_plm_fine_tuning_learns_a_separable_training_set(one_torch_thread):
    train = [
        ex(10 + i, q, y)
        for i, (q, y) in enumerate(
            [
                ("Ann has 2 shirts and 3 skirts. How many outfits?", 1),
                ("Ben has 4 caps and 2 coats. How many different outfits?", 1),
                ("Cara has 3 tops and 3 trousers. How many outfits can she make?", 1),
                ("A car drives 50 km and then 70 km. How far in total?", 0),
                ("A bus drives 30 km and then 90 km. How far in total?", 0),
                ("A bike rides 15 km and then 25 km. How far in total?", 0),
            ]
        )
    ]
    cfg = PLMBaselineConfig(model=str(minilm_dir()), epochs=4, batch_size=6, learning_rates=[5e-4], max_length=48)
    preds, probs, _ = train_and_predict(cfg, train, train + EVAL)
    assert len(preds) == len(probs) == 10 and all(0.0 <= p <= 1.0 for p in probs)
    assert preds == [int(p >= 0.5) for p in probs]
    assert min(probs[:3]) > max(probs[3:6])  # after 4 steps it already separates its training pairs


# issue 11, defect 11: the threshold is fitted with a class prior; the PLM sweeps its learning rate
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


def test_validation_split_is_stratified_disjoint_and_seeded():
    rows = [ex(i, f"q{i}", i % 2) for i in range(12)]
    train, val = validation_split(rows, 0.25, seed=0)
    assert len(val) == 4 and {e.id for e in train}.isdisjoint({e.id for e in val}) and len(train) == 8
    assert {e.label for e in val} == {0, 1}
    assert [e.id for e in validation_split(rows, 0.25, seed=0)[1]] == [e.id for e in val]
    assert validation_split(rows[:2], 0.25, seed=0) == (rows[:2], [])  # too few rows: no validation part


@pytest.mark.slow
def test_plm_sweeps_learning_rates_on_a_validation_part(one_torch_thread):
    rows = [
        ex(30 + i, q, y)
        for i, (q, y) in enumerate(
            [
                ("Ann has 2 shirts and 3 skirts. How many outfits?", 1),
                ("Ben has 4 caps and 2 coats. How many different outfits?", 1),
                ("Cara has 3 tops and 3 trousers. How many outfits can she make?", 1),
                ("Dan has 5 ties and 2 shirts. How many outfits?", 1),
                ("A car drives 50 km and then 70 km. How far in total?", 0),
                ("A bus drives 30 km and then 90 km. How far in total?", 0),
                ("A bike rides 15 km and then 25 km. How far in total?", 0),
                ("A boat sails 20 km and then 40 km. How far in total?", 0),
            ]
        )
    ]
    cfg = PLMBaselineConfig(model=str(minilm_dir()), epochs=1, batch_size=8, learning_rates=[1e-3, 1e-5], max_length=32)
    preds, probs, info = train_and_predict(cfg, rows, EVAL)
    assert len(preds) == 4 and set(info["sweep"]) == {"0.001", "1e-05"}
    assert info["validation_rows"] == 2 and info["train_rows"] == 6
    best = max(info["sweep"].items(), key=lambda kv: (kv[1]["accuracy"], -kv[1]["log_loss"]))[0]
    assert info["learning_rate"] == float(best)
