"""torchrun / DDP helpers; two gloo processes with batch 32 each match one process with batch 64."""

import pytest
import torch
import torch.multiprocessing as mp
from tests.gloo import as_torchrun_rank, free_port

from vitlab.data import load_dataset
from vitlab.engine import seed_everything
from vitlab.engine.distributed import all_reduce_sum, resolve_device, setup
from vitlab.errors import ConfigError
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig, build_model

CONFIG = dict(
    model="vit-digits",
    model_overrides={"depth": 1, "embed_dim": 32, "num_heads": 2},
    rows=256,
    epochs=2,
    augment="none",
    warmup_epochs=1.0,
    device="cpu",
)  # 256 / 64 = 4 steps per epoch


def worker(rank: int, world_size: int, port: int, out: str) -> None:
    as_torchrun_rank(rank, world_size, port)
    result = run("classify", TrainConfig(batch_size=32, **CONFIG))
    if rank == 0:
        torch.save({"weights": result.model.state_dict(), "history": result.history}, out)


@pytest.mark.slow
def test_two_processes_match_one_process_with_twice_the_batch(tmp_path):
    out = str(tmp_path / "ddp.pt")
    mp.spawn(worker, args=(2, free_port(), out), nprocs=2, join=True)
    ddp = torch.load(out, weights_only=True)
    single = run("classify", TrainConfig(batch_size=64, **CONFIG))
    weights = single.model.state_dict()
    assert ddp["weights"].keys() == weights.keys()
    for key, value in weights.items():
        torch.testing.assert_close(ddp["weights"][key], value, rtol=0, atol=1e-5, msg=key)
    seed_everything(0)
    initial = build_model(single.config, load_dataset("digits", rows=256)).state_dict()
    assert not torch.allclose(initial["head.weight"], weights["head.weight"], atol=1e-3)  # training moved them
    for a, b in zip(ddp["history"], single.history):  # all-reduced metrics = global metrics
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-5)
        assert a["val_acc"] == pytest.approx(b["val_acc"]) and a["val_loss"] == pytest.approx(b["val_loss"], abs=1e-5)


def test_single_process_without_torchrun_env(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    env = setup("cpu")
    assert (env.rank, env.world_size, env.is_main, env.owns_group) == (0, 1, True, False)
    assert all_reduce_sum(torch.ones(2)).tolist() == [1.0, 1.0]


def test_resolve_device_gives_each_rank_its_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda", local_rank=1) == torch.device("cuda", 1)
    assert resolve_device("cuda:0", local_rank=1) == torch.device("cuda", 0)
    assert resolve_device("cpu", local_rank=1) == torch.device("cpu")
    assert resolve_device("auto", local_rank=1) == torch.device("cuda", 1)
    with pytest.raises(ConfigError, match="2 CUDA device"):
        resolve_device("cuda:2")


def test_resolve_device_refuses_a_device_the_machine_lacks(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ConfigError, match="no CUDA GPU: use --device cpu"):
        resolve_device("cuda")
    with pytest.raises(ConfigError, match="unknown device 'gpu'"):
        resolve_device("gpu")
