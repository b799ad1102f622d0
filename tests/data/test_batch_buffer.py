"""A loop's float input batch is one tensor used again step after step, and never while anything still refers to
the last batch: its values are ``x / 255`` exactly as a new tensor's, and a holder of the last batch keeps it."""

import gc

import numpy as np
import pytest
import torch

import vitlab.data.preprocess as preprocess
from vitlab.data.preprocess import BatchBuffer, unit_pixels

CPU = torch.device("cpu")


def _batch(seed: int, shape=(4, 3, 8, 8)) -> torch.Tensor:
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def test_a_free_buffer_is_used_again_with_the_values_of_a_new_tensor():
    buffer = BatchBuffer()
    first = unit_pixels(_batch(0), buffer)
    address = first.data_ptr()
    del first
    for seed in range(1, 6):
        pixels = _batch(seed)
        reused = unit_pixels(pixels, buffer)
        assert reused.data_ptr() == address  # no new batch-sized allocation
        assert torch.equal(reused, unit_pixels(pixels))  # bit for bit what a new tensor holds
        del reused


def _keep_a_list(t):
    return [t]


def _keep_a_view(t):
    return t[1:, :, 2:]


def _keep_numpy(t):
    return t.numpy()


def _keep_the_graph(t):
    weight = torch.ones(3, 3, 2, 2, requires_grad=True)
    return torch.nn.functional.conv2d(t, weight).sum()  # conv2d saves its input for the weight's gradient


def _keep_a_reshape(t):
    return t.reshape(4, -1)


@pytest.mark.parametrize("keep", [_keep_a_list, _keep_a_view, _keep_numpy, _keep_the_graph, _keep_a_reshape])
def test_a_batch_anything_still_refers_to_is_never_written_over(keep):
    buffer = BatchBuffer()
    first_pixels = _batch(0)
    first = unit_pixels(first_pixels, buffer)
    kept = keep(first)
    del first
    gc.collect()
    second = unit_pixels(_batch(1), buffer)
    again = unit_pixels(first_pixels)
    if isinstance(kept, list):
        assert torch.equal(kept[0], again)
    elif isinstance(kept, np.ndarray):
        np.testing.assert_array_equal(kept, again.numpy())
    elif kept.requires_grad:
        kept.backward()  # the saved input is still the first batch: no "modified by an inplace operation"
    else:
        assert torch.equal(kept, keep(again))
    assert second.data_ptr() != again.data_ptr()
    del kept, second
    gc.collect()
    assert unit_pixels(_batch(2), buffer).data_ptr() == buffer._tensor.data_ptr()  # free again: the newer one


def test_another_shape_or_dtype_is_served_as_it_comes():
    buffer = BatchBuffer()
    a = unit_pixels(_batch(0), buffer)
    del a
    smaller = unit_pixels(_batch(1, (2, 3, 8, 8)), buffer)  # a last, smaller batch
    assert smaller.shape == (2, 3, 8, 8) and torch.equal(smaller, unit_pixels(_batch(1, (2, 3, 8, 8))))
    floats = torch.rand(2, 3, 8, 8)
    assert unit_pixels(floats, buffer) is floats  # already in [0, 1]: as it is


def test_where_torch_cannot_count_a_storages_users_every_batch_is_new(monkeypatch):
    monkeypatch.setattr(preprocess, "_storage_users", None)
    buffer = BatchBuffer()
    buffer.take((4, 3, 8, 8), CPU)  # handed out and dropped at once: free
    made = buffer._tensor
    second = unit_pixels(_batch(1), buffer)
    assert buffer._tensor is not made and torch.equal(second, unit_pixels(_batch(1)))
