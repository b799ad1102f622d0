"""torchrun / DDP helpers: one process per device, gloo on CPU, nccl on CUDA.

``torchrun --nproc_per_node=N -m vitlab train ...`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``
(and the rendezvous address); :func:`setup` reads them. Without them everything runs as a
single process (rank 0 of 1) and the helpers below do nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..device import resolve_device


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
