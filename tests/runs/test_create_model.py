"""``vitlab.create_model``: the one public builder, a registered name and optionally a checkpoint's weights."""

import pytest
import torch

import vitlab
from vitlab.errors import CheckpointError
from vitlab.models import build_registered
from vitlab.runs import DataConfig, save_checkpoint

DATA = DataConfig((8, 8), 1, (0.3,), (0.2,), [str(i) for i in range(10)], dataset="digits", seed=3, rows=100)
SMALL = dict(depth=1, embed_dim=16, num_heads=2)


def test_without_a_checkpoint_it_is_the_registry_builder():
    torch.manual_seed(0)
    built = build_registered("vit-digits", **SMALL)
    torch.manual_seed(0)
    public = vitlab.create_model("vit-digits", **SMALL)
    assert public.registered_name == built.registered_name == "vit-digits"
    assert all(torch.equal(a, b) for a, b in zip(built.state_dict().values(), public.state_dict().values()))


def test_a_checkpoint_fills_every_weight_or_is_refused(tmp_path):
    trained = build_registered("vit-digits", **SMALL)
    path = save_checkpoint(trained, tmp_path / "model.safetensors", "classifier", DATA)
    model = vitlab.create_model("vit-digits", checkpoint_path=path, **SMALL)
    assert all(torch.equal(trained.state_dict()[k], v) for k, v in model.state_dict().items())
    assert model.pretrained_cfg["num_classes"] == 10
    with pytest.raises(CheckpointError, match="does not fit vit-digits"):
        vitlab.create_model("vit-digits", checkpoint_path=path, depth=2, embed_dim=16, num_heads=2)
