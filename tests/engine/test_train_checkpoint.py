import os
import pickle

import pytest
import torch

from vitlab.models import create_model
from vitlab.train.checkpoint import (atomic_write, load_checkpoint, load_state, read_metadata, save_state,
                                     save_weights, weights_path)


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "file.bin"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert os.listdir(target.parent) == ["file.bin"]


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    target = tmp_path / "file.bin"
    atomic_write(target, b"old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["file.bin"]


def test_weights_roundtrip_rebuilds_model_from_metadata(tmp_path):
    model = create_model("vit-digits", depth=1, embed_dim=32, num_classes=7).eval()
    save_weights(model, tmp_path / "ckpt" / "model.safetensors",
                 {"model": "vit-digits", "config": model.config.to_dict(), "mean": [0.3], "epoch": 3})
    assert read_metadata(tmp_path / "ckpt" / "model.safetensors")["epoch"] == 3
    assert weights_path(tmp_path / "ckpt") == tmp_path / "ckpt" / "model.safetensors"
    ckpt = load_checkpoint(tmp_path / "ckpt")
    assert ckpt.model.num_classes == 7 and ckpt.metadata["mean"] == [0.3]
    x = torch.rand(2, 1, 8, 8)
    torch.testing.assert_close(ckpt.model(x), model(x), rtol=0, atol=0)


def test_missing_checkpoint_says_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="run folder"):
        load_checkpoint(tmp_path)


class NotATensor:
    pass


def test_state_file_loads_optimizer_state_but_never_unpickles_objects(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.rand(4, 3)).sum().backward()
    opt.step()
    save_state(tmp_path / "state.pt", {"epoch": 2, "optimizer": opt.state_dict(), "history": [{"acc": 0.5}]})
    state = load_state(tmp_path / "state.pt")
    assert state["epoch"] == 2 and state["history"] == [{"acc": 0.5}]
    torch.testing.assert_close(state["optimizer"]["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    torch.save({"evil": NotATensor()}, tmp_path / "evil.pt")
    with pytest.raises(pickle.UnpicklingError):
        load_state(tmp_path / "evil.pt")
