"""The textbook report's two readings of training accuracy: the running mean in training mode (Keras's
``fit``) and the kept weights scored in eval mode."""

from vitlab.experiments.aggregates import Aggregate
from vitlab.experiments.textbook_report import train_reading_lines


def agg(label, kind, running, evaluated):
    mean = {"final_train_acc": running, "train_eval_acc": evaluated, "best_val_acc": 0.7}
    std = {k: 0.01 for k in mean}
    return Aggregate(kind, label, {"rows": 1000}, 1000, 3, mean, std, {})


def test_both_readings_side_by_side_with_their_largest_difference():
    lines = train_reading_lines([agg("ViT patch 7", "vit", 0.76, 0.77), agg("CNN 28-56-111", "cnn", 0.87, 0.84)])
    text = "\n".join(lines)
    assert "what Keras's `fit` reports" in text and "differ by at most 0.0300" in text
    assert "| ViT | 1,000 | 0.7600 ± 0.0100 | 0.7700 ± 0.0100 | 0.7000 ± 0.0100 |" in lines


def test_no_eval_mode_reading_no_paragraph():
    assert train_reading_lines([agg("ViT patch 7", "vit", 0.76, None)]) == []
