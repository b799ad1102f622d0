"""Hungarian matching: optimal on hand-made and random costs, invariant to target order."""

import itertools

import pytest
import torch

from vitlab.tasks.dense.matching import detection_cost, hungarian_match


def brute_force(cost: torch.Tensor) -> float:
    q, t = cost.shape
    return min(sum(float(cost[p[j], j]) for j in range(t)) for p in itertools.permutations(range(q), t))


def test_hand_made_cost_picks_the_off_diagonal():
    # the greedy choice (row 0 -> col 0, cost 1) forces row 1 -> col 1 (cost 10): total 11;
    # the optimum is 0 -> 1, 1 -> 0: 2 + 3 = 5
    cost = torch.tensor([[1.0, 2.0], [3.0, 10.0], [9.0, 9.0]])
    rows, cols = hungarian_match(cost)
    assert dict(zip(cols.tolist(), rows.tolist())) == {1: 0, 0: 1}
    assert float(cost[rows, cols].sum()) == 5.0


@pytest.mark.parametrize("seed", range(5))
def test_matching_is_optimal_against_brute_force(seed):
    cost = torch.rand(5, 3, generator=torch.Generator().manual_seed(seed))
    rows, cols = hungarian_match(cost)
    assert len(set(rows.tolist())) == 3 and sorted(cols.tolist()) == [0, 1, 2]
    assert float(cost[rows, cols].sum()) == pytest.approx(brute_force(cost))


def test_matching_is_invariant_to_target_order():
    g = torch.Generator().manual_seed(0)
    logits, boxes = torch.randn(6, 5, generator=g), torch.rand(6, 4, generator=g) * 0.5 + 0.25
    labels, targets = torch.tensor([0, 3, 1, 2]), torch.rand(4, 4, generator=g) * 0.5 + 0.25
    rows, cols = hungarian_match(detection_cost(logits, boxes, labels, targets))
    pairs = {(int(r), int(c)) for r, c in zip(rows, cols)}
    perm = torch.tensor([2, 0, 3, 1])
    rows2, cols2 = hungarian_match(detection_cost(logits, boxes, labels[perm], targets[perm]))
    assert {(int(r), int(perm[c])) for r, c in zip(rows2, cols2)} == pairs


def test_fewer_queries_than_targets_is_a_clear_error():
    with pytest.raises(ValueError, match="more queries"):
        hungarian_match(torch.rand(2, 3))
