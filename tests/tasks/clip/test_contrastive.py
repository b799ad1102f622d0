"""Symmetric InfoNCE against a hand computation; recall@k on constructed similarity matrices."""

import math

import pytest
import torch

from vitlab.errors import DataError
from vitlab.tasks.clip import clip_loss, recall_at_k, retrieval_metrics


def hand_infonce(logits: list[list[float]], positives: list[list[bool]]) -> float:
    """Each image's row and each text's column: -mean over its positives of log softmax, averaged both ways;
    a text column with no positive takes no part in the text direction."""
    n, m = len(logits), len(logits[0])

    def direction(rows: list[list[float]], pos: list[list[bool]]) -> float:
        total, used = 0.0, 0
        for row, p in zip(rows, pos):
            hits = [v for v, ok in zip(row, p) if ok]
            if hits:
                log_z = math.log(sum(math.exp(v) for v in row))
                total, used = total - sum(v - log_z for v in hits) / len(hits), used + 1
        return total / used

    columns = [[logits[i][j] for i in range(n)] for j in range(m)]
    column_pos = [[positives[i][j] for i in range(n)] for j in range(m)]
    return (direction(logits, positives) + direction(columns, column_pos)) / 2


def test_infonce_equals_a_hand_computation_and_is_symmetric():
    logits = torch.randn(5, 5, generator=torch.Generator().manual_seed(0)) * 3
    eye = torch.eye(5, dtype=torch.bool)
    expected = hand_infonce(logits.tolist(), eye.tolist())
    assert clip_loss(logits).item() == pytest.approx(expected, rel=1e-6)
    assert clip_loss(logits, eye).item() == pytest.approx(expected, rel=1e-6)
    assert clip_loss(logits.T).item() == pytest.approx(expected, rel=1e-6)  # images and texts swap roles


def test_several_positives_spread_the_target():
    logits = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    positives = torch.tensor([[1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 1], [0, 0, 1, 0, 0, 0], [0, 0, 0, 1, 1, 0]]).bool()
    expected = hand_infonce(logits.tolist(), positives.tolist())
    assert clip_loss(logits, positives).item() == pytest.approx(expected, rel=1e-6)
    assert clip_loss(logits.T, positives.T).item() == pytest.approx(expected, rel=1e-6)


def test_texts_true_of_no_image_are_negatives_of_the_images_only():
    logits = torch.randn(3, 5, generator=torch.Generator().manual_seed(2)) * 2
    positives = torch.zeros(3, 5, dtype=torch.bool)
    positives[[0, 1, 2, 0], [0, 1, 2, 1]] = True  # texts 3 and 4: hard negatives
    expected = hand_infonce(logits.tolist(), positives.tolist())
    assert clip_loss(logits, positives).item() == pytest.approx(expected, rel=1e-6)
    raised = logits.clone()
    raised[:, 3:] += 5.0  # the negatives win the images' rows: the loss rises
    assert clip_loss(raised, positives) > clip_loss(logits, positives) + 1.0
    square = clip_loss(logits[:, :3], positives[:, :3])
    assert clip_loss(torch.cat([logits[:, :3], logits.new_full((3, 2), -1e4)], 1), positives).item() == pytest.approx(
        square.item(), rel=1e-5
    )  # negatives nobody scores change nothing


def test_perfect_separation_drives_the_loss_to_zero_and_missing_positives_are_refused():
    assert clip_loss(torch.eye(3) * 100).item() < 1e-6
    with pytest.raises(DataError, match="every image at least one positive"):
        clip_loss(torch.zeros(2, 2), torch.tensor([[True, False], [False, False]]))
    with pytest.raises(DataError, match="not square"):
        clip_loss(torch.zeros(2, 3))


def test_recall_at_k_on_a_constructed_similarity_matrix():
    similarity = torch.tensor(
        [
            [0.9, 0.1, 0.5, 0.0],  # relevant 0: rank 1
            [0.8, 0.2, 0.7, 0.1],  # relevant 1: rank 3
            [0.1, 0.2, 0.3, 0.9],
        ]
    )  # relevant 2: rank 2
    relevant = torch.eye(3, 4, dtype=torch.bool)
    assert recall_at_k(similarity, relevant, 1) == pytest.approx(1 / 3)
    assert recall_at_k(similarity, relevant, 2) == pytest.approx(2 / 3)
    assert recall_at_k(similarity, relevant, 3) == 1.0
    relevant[1, 0] = True  # a second caption true of image 1, ranked first
    assert recall_at_k(similarity, relevant, 1) == pytest.approx(2 / 3)


def test_retrieval_metrics_read_both_directions():
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    texts = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])  # texts 1 and 2 swapped against the images
    metrics = retrieval_metrics(images, texts, torch.eye(3, dtype=torch.bool), ks=(1, 2))
    assert metrics == {"i2t_r1": pytest.approx(1 / 3), "t2i_r1": pytest.approx(1 / 3), "i2t_r2": 1.0, "t2i_r2": 1.0}
