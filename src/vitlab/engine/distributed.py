"""torchrun / DDP / FSDP helpers: one process per device, gloo on CPU, nccl on CUDA.

``torchrun --nproc_per_node=N -m vitlab train ...`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``
(and the rendezvous address); :func:`setup` reads them. Without them everything runs as a
single process (rank 0 of 1) and the helpers below do nothing.

Under ``distributed="fsdp"`` :func:`shard` wraps the model with torch's ``fully_shard`` (each block, then
the root): every process holds 1/N of each parameter, gradient and optimiser moment. The files stay those of
one process: :func:`full_model_state` and :func:`full_optimizer_state` gather them (the optimiser's keyed
by parameter position, as ``optimizer.state_dict()`` keys them), :func:`load_full_state` shards them again.
torch's FSDP modules are imported by these functions only (seconds of import that DDP runs need not pay).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import nn

from ..device import resolve_device

DISTRIBUTED = ("ddp", "fsdp")  # how torchrun's processes hold the model: replicated, or sharded


@dataclass
class DistEnv:
    """This process's place in the job and the device it drives."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    owns_group: bool = False  # True when setup() created the process group (teardown destroys it)

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup(device: str | torch.device = "auto") -> DistEnv:
    """Join the process group described by torchrun's environment (if any) and pick the device.

    Uses an existing process group when one is initialised already.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1 and not dist.is_initialized():
        return DistEnv(0, 1, 0, resolve_device(device))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device, local_rank)
    owns = not dist.is_initialized()
    if owns:
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return DistEnv(dist.get_rank(), dist.get_world_size(), local_rank, dev, owns)


def teardown(env: DistEnv) -> None:
    """Destroy the process group if :func:`setup` created it."""
    if env.owns_group and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over all processes in place (no-op in a single process); returns it."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def barrier() -> None:
    """Wait for every process (no-op in a single process)."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def all_gather_objects(obj: Any) -> list[Any]:
    """``obj`` of every process, by rank (``[obj]`` in a single process); every process must call it."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, obj)
        return gathered
    return [obj]


def shard(model: nn.Module, env: DistEnv) -> None:
    """Shard ``model`` in place over the job's processes with ``fully_shard``: each module of every ``blocks``
    list (the transformer blocks; timm's name) is one unit, gathered just before it runs and freed after, and
    the root holds the rest. Build the optimiser after this: its parameters are the shards."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(env.device.type, (env.world_size,))
    lists = [getattr(m, "blocks", None) for m in model.modules()]
    units = [block for blocks in lists if isinstance(blocks, nn.ModuleList) for block in blocks]
    for unit in units:
        fully_shard(unit, mesh=mesh)
    fully_shard(model, mesh=mesh)


def full_model_state(model: nn.Module) -> dict[str, Any]:
    """The sharded ``model``'s full state dict, on every process, on its device (collective: every process calls it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))


def full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The sharded ``optimizer``'s full state in the layout of one process's ``optimizer.state_dict()`` (state
    keyed by each parameter's position in the groups), on the CPU of rank 0; ``{}`` on the other ranks
    (collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    full = cast(dict[str, Any], get_optimizer_state_dict(model, optimizer, options=options))
    if not full:
        return {}
    order = _parameter_names(model, optimizer)
    local = optimizer.state_dict()["param_groups"]  # the same groups with positions for names
    return {"state": {i: full["state"][n] for i, n in enumerate(order) if n in full["state"]}, "param_groups": local}


def load_full_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, weights: dict[str, Any], state: dict[str, Any]
) -> None:
    """Shard full ``weights`` (a state dict) and a full optimiser ``state`` (one process's
    ``optimizer.state_dict()``) into the sharded ``model`` and its ``optimizer`` (every process passes both)."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True)
    set_model_state_dict(model, weights, options=options)
    order = _parameter_names(model, optimizer)
    groups = [{**g, "params": [order[i] for i in g["params"]]} for g in state["param_groups"]]
    named: dict[str, Any] = {"state": {order[i]: s for i, s in state["state"].items()}, "param_groups": groups}
    set_optimizer_state_dict(model, optimizer, named, options=options)


def _parameter_names(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The names of ``optimizer``'s parameters in the order ``optimizer.state_dict()`` numbers them."""
    name = {id(p): n for n, p in model.named_parameters()}
    return [name[id(p)] for group in optimizer.param_groups for p in group["params"]]
