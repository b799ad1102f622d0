"""FSDP (``--set distributed=fsdp``) and activation checkpointing (``--set grad_checkpointing=true``).

Two gloo processes sharding the model with ``fully_shard`` train as one process with twice the batch; their
run folder holds the files of a one-process run (weights, optimiser state) and resumes exactly.
"""

import shutil

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tests.gloo import as_torchrun_rank, free_port

from vitlab.cli.main import main
from vitlab.data import load_dataset
from vitlab.engine import Reporter
from vitlab.errors import ConfigError
from vitlab.runs import RunDir, create_model, load_checkpoint
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig

CONFIG = dict(
    model="vit-digits",
    model_overrides={"depth": 2, "embed_dim": 32, "num_heads": 2},
    rows=192,
    epochs=1,
    augment="none",
    warmup_epochs=0.5,
    device="cpu",
)  # 192 / 64 = 3 optimiser steps per epoch


class KilledError(Exception):
    pass


class StopAfterFirstEpoch(Reporter):
    """Stops the run once its first epoch's files are committed, as a kill would."""

    def epoch(self, record):
        raise KilledError


def fsdp_worker(rank: int, port: int, tmp: str) -> None:
    """Rank ``rank`` of 2 sharding the model: a 3-step run (with grad checkpointing), a 2-epoch run, and the same
    2-epoch run stopped after its first epoch (a copy of that folder kept) and resumed."""
    as_torchrun_rank(rank, 2, port)
    dist.init_process_group("gloo")  # one group for the four runs (fit leaves a group it did not create)
    data = load_dataset("digits", rows=192)
    fsdp = dict(CONFIG, batch_size=32, distributed="fsdp")
    three = run("classify", TrainConfig(**fsdp, grad_checkpointing=True, out_dir=f"{tmp}/three"), data)
    two = {**fsdp, "epochs": 2}
    run("classify", TrainConfig(**two, out_dir=f"{tmp}/whole"), data)
    try:
        run("classify", TrainConfig(**two, out_dir=f"{tmp}/cut"), data, reporter=StopAfterFirstEpoch())
    except KilledError:
        pass
    dist.barrier()
    if rank == 0:
        shutil.copytree(f"{tmp}/cut", f"{tmp}/cut-copy")
    dist.barrier()
    run("classify", TrainConfig(**two, out_dir=f"{tmp}/cut", resume=True), data)
    if rank == 0:
        torch.save(three.model.state_dict(), f"{tmp}/three.pt")
    dist.destroy_process_group()


def assert_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=atol, msg=key)


@pytest.mark.slow
def test_fsdp_two_processes_match_one_process_and_write_its_files(tmp_path):
    mp.spawn(fsdp_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    data = load_dataset("digits", rows=192)
    single = run("classify", TrainConfig(**CONFIG, batch_size=64, out_dir=str(tmp_path / "single")), data)
    weights = single.model.state_dict()
    sharded = torch.load(tmp_path / "three.pt", weights_only=True)
    assert_close(sharded, weights, atol=1e-5)  # 3 steps sharded (and checkpointed) = 3 steps in one process
    initial = create_model("vit-digits", **CONFIG["model_overrides"])
    assert not torch.allclose(initial.head.weight, weights["head.weight"], atol=1e-3)  # the steps moved them
    # the sharded run's files are a one-process run's: the checkpoint loads alone, the optimiser state matches
    assert_close(load_checkpoint(tmp_path / "three" / "last").model.state_dict(), sharded, atol=0)
    fsdp_state, one_state = (RunDir(tmp_path / name).load_state() for name in ("three", "single"))
    assert fsdp_state["optimizer"]["param_groups"] == one_state["optimizer"]["param_groups"]
    moments = [{k: v for k, v in state["optimizer"]["state"].items()} for state in (fsdp_state, one_state)]
    assert moments[0].keys() == moments[1].keys()
    for i in moments[1]:
        assert_close(moments[0][i], moments[1][i], atol=1e-5)
    # a sharded run stopped after its first epoch and resumed ends with the uninterrupted run's weights
    whole, cut = (load_checkpoint(tmp_path / name / "last").model.state_dict() for name in ("whole", "cut"))
    assert_close(cut, whole, atol=0)
    # and its state resumes in one process (with DDP's settings: the files do not record how they were held)
    resumed = run(
        "classify",
        TrainConfig(**{**CONFIG, "epochs": 2}, batch_size=32, out_dir=str(tmp_path / "cut-copy"), resume=True),
        data,
    )
    assert [r["epoch"] for r in resumed.history] == [1, 2]


def test_grad_checkpointing_gives_the_same_gradients():
    torch.manual_seed(0)
    model = create_model("vit-digits", depth=2, embed_dim=32, num_heads=2, drop_path_rate=0.2, drop_rate=0.1)
    images = torch.randn(4, 1, 8, 8)

    def gradients() -> dict[str, torch.Tensor]:
        torch.manual_seed(1)  # the same dropout and stochastic-depth draws
        model.zero_grad()
        model(images).square().sum().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    plain = gradients()
    model.set_grad_checkpointing()
    saved: list[int] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        checkpointed = gradients()
    assert_close(checkpointed, plain, atol=1e-6)
    model.set_grad_checkpointing(False)
    kept: list[int] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: kept.append(t.numel()) or t, lambda t: t):
        gradients()
    assert sum(saved) < sum(kept)  # the blocks' activations were not kept


def test_bad_combinations_are_one_line(capsys):
    with pytest.raises(ConfigError, match="'ddp' or 'fsdp'"):
        TrainConfig(distributed="zero3")
    assert main(["train", "--set", "distributed=fsdp", "--rows", "64", "--epochs", "1", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "distributed=fsdp" in err and "torchrun --nproc_per_node" in err and "Traceback" not in err
    assert main(["train", "--model", "cnn-digits", "--set", "grad_checkpointing=true", "--rows", "64"]) == 2
    assert "no checkpointed block loop" in capsys.readouterr().err
