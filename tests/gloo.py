"""A group of processes on this machine as ``torchrun`` would start them (gloo over 127.0.0.1), for the tests of
DDP, FSDP and mid-epoch resume that ``torch.multiprocessing.spawn`` their workers."""

import os
import socket

import torch


def free_port() -> int:
    """A TCP port on 127.0.0.1 no one listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_torchrun_rank(rank: int, world_size: int, port: int) -> None:
    """Give this process the environment ``torchrun`` gives rank ``rank`` of ``world_size`` (rendezvous on
    ``127.0.0.1:port``), and one thread: the ranks share this machine's cores."""
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    torch.set_num_threads(1)
