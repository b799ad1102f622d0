"""Which device a run or a model uses: ``resolve_device("auto" | "cpu" | "cuda" | "cuda:N" | "mps")``."""

from __future__ import annotations

import torch

from .errors import ConfigError


def resolve_device(device: str | torch.device = "auto", local_rank: int = 0) -> torch.device:
    """``auto``: this rank's CUDA device if there is one, else CPU. ``cuda`` without an index means
    this rank's GPU (``cuda:LOCAL_RANK``). A device this machine does not have is refused."""
    if str(device) == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ConfigError(f"unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but this machine has no CUDA GPU: use --device cpu (or auto)")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device {device!r} asked for, but MPS is not available here: use --device cpu (or auto)")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"device {device!r} is not supported: use auto, cpu, cuda, cuda:N or mps")
    return torch.device("cuda", local_rank) if dev.type == "cuda" and dev.index is None else dev
