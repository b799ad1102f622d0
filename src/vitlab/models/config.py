"""What every model config dataclass shares: a JSON-ready dict and back, and the range of every field.

A config states its fields' ranges in one table beside the fields, checked when it is made::

    checks: ClassVar[dict[str, Check]] = {
        "depth": Int(1, MAX_DEPTH), "mlp_ratio": Float(0, 64, low_open=True), "pool": OneOf(POOLS),
        "fc_norm": Maybe(Bool()), "img_size": Pair(Int(1, MAX_SIDE)), ...}

    def __post_init__(self) -> None:
        check_fields(self, self.checks)         # then how fields relate, then check_params

A value of the wrong type or out of its range raises :class:`~vitlab.errors.ConfigError` naming the
field and the range (``depth must be a positive integer in [1, 1024], got 0``); a value that passes is
stored normalised (a NumPy integer becomes an ``int``, ``2`` a ``2.0`` for a float field, a list a tuple).
The caps are far above any published model; :func:`check_params` also refuses a config whose model
would hold more than :data:`MAX_PARAMS` parameters (a hostile checkpoint's metadata asking for
terabytes), estimated from the config before anything is allocated.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, ClassVar, TypeVar

from ..checks import Check, Float
from ..errors import ConfigError

C = TypeVar("C", bound="ModelConfig")

MAX_SIDE = 8192  # image side and patch side, pixels
MAX_WIDTH = 16384  # token or channel width (ViT-22B: 6144)
MAX_DEPTH = 1024  # blocks (ViT-22B: 48)
MAX_HEADS = 1024  # attention heads
MAX_CHANS = 1024  # image channels (hyperspectral cameras: a few hundred)
MAX_CLASSES = 2**20  # classifier outputs (ImageNet-21k: 21,843)
MAX_TOKENS = 2**16  # register tokens, latents, low-rank rows, queries
MAX_PARAMS = 2**33  # 8.6e9 parameters, 32 GiB at fp32


RATE = Float(0.0, 1.0, high_open=True)  # a dropout or drop-path probability


def check_params(config: Any, params: int, reduce: str) -> None:
    """Raise :class:`ConfigError` if ``params`` (the model's estimated parameter count) exceeds
    :data:`MAX_PARAMS`: building it would allocate ``4 * params`` bytes before the first image.
    ``reduce`` names the fields that make it large."""
    if params > MAX_PARAMS:
        raise ConfigError(
            f"{type(config).__name__} would build a model of about {params:.2e} parameters "
            f"({4 * params / 2**30:,.0f} GiB at fp32), above the limit of {MAX_PARAMS:.2e}: "
            f"reduce {reduce}"
        )


def check_mlp_ratio(dim: int, mlp_ratio: float, name: str = "mlp_ratio") -> None:
    """Raise :class:`ConfigError` if an MLP of ``int(dim * mlp_ratio)`` units would have none."""
    if int(dim * mlp_ratio) < 1:
        raise ConfigError(f"{name} {mlp_ratio} gives an MLP of int({dim} * {mlp_ratio}) = 0 units: raise {name}")


def transformer_block_params(dim: int, hidden: int) -> int:
    """Parameters of one pre-norm block of width ``dim``, MLP ``hidden``: qkv and proj
    ``4 D^2 + 4 D``, MLP ``2 D h + h + D``, two LayerNorms ``4 D``."""
    return 4 * dim * dim + 9 * dim + 2 * dim * hidden + hidden


class ModelConfig:
    """Mixin for config dataclasses: ``checks`` names every field's :class:`Check` (its ``__post_init__``
    applies them with :func:`check_fields`, then checks how fields relate); tuples become lists in
    :meth:`to_dict` (JSON has no tuples) and lists become tuples again in :meth:`from_dict`, which ignores
    keys the config does not have."""

    checks: ClassVar[dict[str, Check]] = {}
    __dataclass_fields__: ClassVar[dict[str, Any]]  # set by @dataclass on every subclass

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls: type[C], d: dict[str, Any]) -> C:
        known = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in known})

    @classmethod
    def resolve(cls: type[C], config: C | None, overrides: dict[str, Any]) -> C:
        """What a model built from ``config`` (default: ``cls()``) with keyword ``overrides`` is built from."""
        cfg = config or cls()
        return cls.from_dict({**cfg.to_dict(), **overrides}) if overrides else cfg
