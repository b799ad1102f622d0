"""``torchrun -m vitlab train`` as a user launches it: two "nodes" on this machine (``--nnodes 2`` with a c10d
rendezvous) train the same run as one node with two processes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tests.gloo import free_port

import vitlab
from vitlab.data import load_dataset
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig

TRAIN = ["-m", "vitlab", "train", "--rows", "128", "--epochs", "1", "--batch-size", "32", "--device", "cpu", "--quiet"]
TRAIN += [f"--set={s}" for s in ("depth=1", "embed_dim=16", "num_heads=2", "augment=none", "warmup_epochs=0.5")]


def torchrun(args: list[str], out: Path) -> subprocess.Popen:
    """``python -m torch.distributed.run ARGS -m vitlab train ... --out OUT`` on the vitlab under test, one thread
    a process."""
    src = str(Path(vitlab.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", *args, *TRAIN, "--out", str(out)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_two_nodes_train_as_one_node_with_two_processes(tmp_path):
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint]
    launches = [torchrun(nodes, tmp_path / "nodes") for _ in range(2)]
    launches.append(torchrun(["--standalone", "--nproc_per_node", "2"], tmp_path / "one-node"))
    for launch in launches:
        output, _ = launch.communicate(timeout=300)
        assert launch.returncode == 0, output[-2000:]
    nodes_weights, one_node = (
        load_file(str(tmp_path / n / "last" / "model.safetensors")) for n in ("nodes", "one-node")
    )
    assert nodes_weights.keys() == one_node.keys()
    for key, value in one_node.items():
        torch.testing.assert_close(nodes_weights[key], value, rtol=0, atol=1e-6, msg=key)
    # a world of 2: one process with the per-process batch of 32 trains other weights
    config = dict(model_overrides={"depth": 1, "embed_dim": 16, "num_heads": 2}, augment="none", warmup_epochs=0.5)
    alone = run(
        "classify",
        TrainConfig(rows=128, epochs=1, batch_size=32, device="cpu", **config),
        load_dataset("digits", rows=128),
    )
    assert not torch.allclose(alone.model.state_dict()["head.weight"], one_node["head.weight"], atol=1e-4)
