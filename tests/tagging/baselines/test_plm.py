"""The PLM baseline (``pipelines/tagging/baselines/plm.py``): fine-tuning, the validation part and
the learning-rate sweep."""

import pytest

from pipelines.tagging.baselines.plm import PLMBaselineConfig, train_and_predict, validation_split
from tests.tagging.baselines.rows import EVAL, ex
from tests.tiny_models import minilm_dir


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


def test_validation_split_is_stratified_disjoint_and_seeded():
    rows = [ex(i, f"q{i}", i % 2) for i in range(12)]
    train, val = validation_split(rows, 0.25, seed=0)
    assert len(val) == 4 and {e.id for e in train}.isdisjoint({e.id for e in val}) and len(train) == 8
    assert {e.label for e in val} == {0, 1}
    assert [e.id for e in validation_split(rows, 0.25, seed=0)[1]] == [e.id for e in val]
    assert validation_split(rows[:2], 0.25, seed=0) == (rows[:2], [])  # too few rows: no validation part


# issue 11, defect 11: the PLM sweeps its learning rate
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
