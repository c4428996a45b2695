"""Baselines: threshold tuning, embedding similarity with the packaged MiniLM, PLM fine-tuning."""

import numpy as np
import pytest

from pipelines.tagging.baselines.embedding import EmbeddingBaselineConfig, best_threshold, load_embedder, predict
from pipelines.tagging.baselines.plm import PLMBaselineConfig, train_and_predict
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


def test_embedding_baseline_threshold_and_top_k(embed, one_torch_thread):
    preds, scores, threshold = predict(EmbeddingBaselineConfig(threshold=None), embed, EVAL, EVAL)
    assert scores[0] > scores[1] and scores[2] > scores[3]  # outfit questions are closer to the definition
    assert preds == [1, 0, 1, 0] and threshold is not None
    fixed, _, used = predict(EmbeddingBaselineConfig(threshold=0.99), embed, EVAL, [])
    assert fixed == [0, 0, 0, 0] and used == 0.99
    top, _, none = predict(EmbeddingBaselineConfig(mode="top_k", top_k=1), embed, EVAL, [])
    assert none is None and sum(top) == 1 and top[int(np.argmax(scores))] == 1


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
    cfg = PLMBaselineConfig(model=str(minilm_dir()), epochs=4, batch_size=6, learning_rate=5e-4, max_length=48)
    preds, probs = train_and_predict(cfg, train, train + EVAL)
    assert len(preds) == len(probs) == 10 and all(0.0 <= p <= 1.0 for p in probs)
    assert preds == [int(p >= 0.5) for p in probs]
    assert min(probs[:3]) > max(probs[3:6])  # after 4 steps it already separates its training pairs
