import math

import pytest
import torch

from vitlab.engine.metrics import (
    accuracy,
    calibration_bins,
    confusion_matrix,
    ece,
    fit_temperature,
    nll,
    per_class_accuracy,
    reliability,
)


def hand_example():
    # confidences 0.95 (right), 0.95 (wrong), 0.55 (right), 0.70 (wrong) -- 3 classes
    probs = torch.tensor([[0.95, 0.03, 0.02], [0.02, 0.95, 0.03], [0.20, 0.25, 0.55], [0.10, 0.70, 0.20]])
    labels = torch.tensor([0, 0, 2, 0])
    return probs, labels


def test_ece_matches_hand_computation():
    probs, labels = hand_example()
    # 15 bins of width 1/15: 0.95 -> bin 14 (acc 1/2, conf .95), 0.55 -> bin 8, 0.70 -> bin 10
    expected = 2 / 4 * abs(0.5 - 0.95) + 1 / 4 * abs(1 - 0.55) + 1 / 4 * abs(0 - 0.70)
    assert ece(probs, labels) == pytest.approx(expected)  # 0.5125
    assert ece(probs, labels, n_bins=1) == pytest.approx(abs(0.5 - (0.95 + 0.95 + 0.55 + 0.70) / 4))


def test_reliability_bins_and_empty_bins():
    probs, labels = hand_example()
    rel = reliability(probs, labels, n_bins=15)
    assert len(rel["edges"]) == 16 and sum(rel["count"]) == 4
    assert rel["count"][14] == 2 and rel["accuracy"][14] == 0.5 and rel["confidence"][14] == pytest.approx(0.95)
    assert rel["count"][8] == 1 and rel["count"][10] == 1
    assert rel["accuracy"][0] is None and rel["confidence"][3] is None


def test_calibration_bins_sum_over_shards():
    probs = torch.softmax(torch.randn(50, 4) * 2, dim=1)
    labels = torch.randint(0, 4, (50,))
    whole = calibration_bins(probs, labels)
    parts = calibration_bins(probs[::2], labels[::2]) + calibration_bins(probs[1::2], labels[1::2])
    torch.testing.assert_close(whole, parts)
    assert whole[2].sum() == (probs.argmax(1) == labels).sum()


def test_accuracy_nll():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]])
    labels = torch.tensor([0, 0, 0])
    assert accuracy(logits, labels) == pytest.approx(2 / 3)
    expected = (
        -(
            math.log(math.exp(2) / (math.exp(2) + 1))
            + math.log(1 / (1 + math.e))
            + math.log(math.exp(3) / (math.exp(3) + 1))
        )
        / 3
    )
    assert nll(logits, labels) == pytest.approx(expected, rel=1e-6)
    assert nll(logits, labels, temperature=2.0) == pytest.approx(nll(logits / 2, labels), rel=1e-6)


def test_confusion_and_per_class_accuracy():
    predicted = torch.tensor([0, 1, 1, 2, 0, 0])
    labels = torch.tensor([0, 1, 2, 2, 1, 0])
    cm = confusion_matrix(predicted, labels, 4)
    assert cm.tolist() == [[2, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    acc = per_class_accuracy(cm)
    assert acc[:3].tolist() == [1.0, 0.5, 0.5] and math.isnan(acc[3])


def test_fit_temperature_recovers_overconfidence():
    torch.manual_seed(1)
    true_logits = torch.randn(4000, 5) * 1.5
    labels = torch.multinomial(true_logits.softmax(1), 1).squeeze(1)
    logits = true_logits * 3.0  # an overconfident model: T should be ~3
    t = fit_temperature(logits, labels)
    assert t == pytest.approx(3.0, rel=0.1)
    assert nll(logits, labels, t) < nll(logits, labels)
    assert ece((logits / t).softmax(1), labels) < ece(logits.softmax(1), labels)
