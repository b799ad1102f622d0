"""The settings every training run shares: :class:`RunConfig`. A task's config extends it.

Each field has a range, checked when the config is made (:func:`~vitlab.models.config.check_fields`);
:meth:`RunConfig.from_dict` refuses unknown keys, naming the known ones. ``to_dict`` is what a run
folder's ``config.json`` holds, and ``from_dict(json.load(...))`` makes the same config again.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, TypeVar

from ..checks import (
    Bool,
    Check,
    Fields,
    Float,
    Int,
    Maybe,
    OneOf,
    Text,
    UnknownKeysError,
    check_fields,
    reject_unknown,
    run_folder_name,
    shown,
    suggest,
)
from ..data.paths import absolute_data_dir
from ..errors import ConfigError
from ..models.registry import get_config, list_models
from .distributed import DISTRIBUTED
from .optim import OPTIMIZERS, SCHEDULES

C = TypeVar("C", bound="RunConfig")

DEVICE_HELP = "auto, cpu, cuda, cuda:N or mps"


@dataclass
class RunConfig:
    """Fields of every run: data, seed, length, optimiser and schedule, EMA, files and device.

    ``batch_size`` is per process (the global batch is ``batch_size * world_size * accumulate``).
    ``accumulate`` sums gradients over that many batches per optimiser step. ``time_limit_s`` stops
    training at the first step past that many seconds (the cosine then follows elapsed time, so the
    rate has annealed when time runs out). ``ema_decay`` (e.g. 0.999) keeps an EMA of the weights,
    which validation, ``best`` and the result then use. ``out_dir=None`` writes no files;
    ``resume`` continues the run there, ``overwrite`` replaces the vitlab run there. ``data_dir`` is
    made absolute when the config is made (a URL kept as given): the run records the folder it read. ``compile``
    runs the training forward (and its backward) through ``torch.compile``; the weights, their
    names and the checkpoints are those of the eager model. ``checkpoint_every_steps`` (0: off) also commits
    the training state every that many optimiser steps, inside an epoch, so that ``resume`` continues from
    the last such step with the weights an uninterrupted run would have; ``checkpoint_every_minutes`` (0: off)
    does the same at the first optimiser step at least that many minutes after the last commit (the main
    process's clock decides, for every process); ``best/`` stays per epoch.
    ``distributed="fsdp"`` (under torchrun) shards the parameters, gradients and optimiser state over the
    processes (torch's ``fully_shard``, per block) instead of replicating them (DDP); ``grad_checkpointing``
    recomputes each block's activations in the backward instead of keeping them. Neither changes the weights
    or the checkpoints.
    """

    dataset: str = "digits"
    data_dir: str | None = None
    rows: int | None = None
    seed: int = 0
    epochs: int = 60
    batch_size: int = 64
    accumulate: int = 1
    lr: float = 3e-3
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    optimizer: str = "adamw"
    schedule: str = "cosine"
    warmup_epochs: float = 3.0
    clip_grad: float | None = 1.0
    ema_decay: float | None = None
    eval_every: int = 1
    time_limit_s: float | None = None
    out_dir: str | None = None
    resume: bool = False
    overwrite: bool = False
    device: str = "auto"
    amp: bool = True
    compile: bool = False
    checkpoint_every_steps: int = 0
    checkpoint_every_minutes: float = 0.0
    distributed: str = "ddp"
    grad_checkpointing: bool = False

    # Fields a resumed run may change: they do not affect the weights.
    RESUME_FREE = tuple[str, ...](
        (
            "resume",
            "overwrite",
            "device",
            "eval_every",
            "out_dir",
            "compile",
            "checkpoint_every_steps",
            "checkpoint_every_minutes",
            "distributed",
            "grad_checkpointing",
        )
    )
    # Fields a resume may change on purpose (``--resume --set lr=1e-4``, see :meth:`allow_on_resume`): the
    # optimizer and its schedule continue from the recorded state at the new value.
    RESUME_SETTABLE = ("lr", "min_lr")
    # Fields the command line owns (``--out``, ``--resume``, ``--overwrite``): ``--set`` of one is refused.
    CLI_OWNED = {"out_dir": "--out DIR", "resume": "--resume", "overwrite": "--overwrite"}
    # Named whole settings (``--recipe NAME``) of a task that has them.
    RECIPES: ClassVar[dict[str, dict[str, Any]]] = {}
    # The field holding overrides of the model's config (``--set KEY=VALUE`` of a KEY that is not a field).
    OVERRIDES: ClassVar[str | None] = None
    OVERRIDES_OF: ClassVar[str] = "model config"  # what the overrides are fields of, for messages
    # ``--set PREFIX.KEY=VALUE`` sets KEY in the mapping field ``NESTED[PREFIX]`` (``augment.color_jitter``).
    NESTED: ClassVar[dict[str, str]] = {}
    # What a field means, in a few words: the help of its flag (``vitlab train --help``), beside its range and default.
    HELP: ClassVar[dict[str, str]] = {
        "dataset": "dataset name (see `vitlab data list`)",
        "data_dir": "folder or file holding the dataset's files",
        "rows": "train on the first N training rows only (default: all)",
        "seed": "seed of the split, the initial weights and the batch order",
        "epochs": "passes over the training rows",
        "batch_size": "images per step on each process",
        "accumulate": "batches whose gradients are summed before each optimiser step",
        "lr": "peak learning rate",
        "min_lr": "the rate the schedule ends at",
        "weight_decay": "decoupled weight decay (norms, biases, position tables and special tokens get none)",
        "optimizer": "the optimiser",
        "schedule": "how the rate moves after warmup",
        "warmup_epochs": "epochs of linear warmup from 0 to lr (fractions allowed)",
        "clip_grad": "clip the gradients' global norm to this (none: no clipping)",
        "ema_decay": "keep an EMA of the weights with this decay, used for validation and best/",
        "eval_every": "validate every N epochs",
        "time_limit_s": "stop at the first step past this many seconds; the schedule follows elapsed time",
        "out_dir": "the run folder (none: write no files)",
        "resume": "continue the run in out_dir from its last committed state",
        "overwrite": "replace the vitlab run in out_dir",
        "device": DEVICE_HELP,
        "amp": "mixed precision where the device has it (bf16 autocast on CUDA)",
        "compile": "compile the training forward with torch.compile",
        "checkpoint_every_steps": "also commit the training state every N optimiser steps, so --resume continues "
        "mid-epoch exactly (0: at epoch ends only)",
        "checkpoint_every_minutes": "also commit the training state at the first optimiser step this many minutes "
        "after the last commit (0: off; with checkpoint_every_steps, whichever comes first)",
        "distributed": "under torchrun: ddp replicates the model on each process, fsdp shards it (fully_shard)",
        "grad_checkpointing": "recompute each block's activations in the backward (less memory, ~1/3 more compute)",
    }
    # Not a field (never in config.json): the RESUME_SETTABLE fields this resume changes on purpose.
    resume_sets = frozenset[str]()

    def checks(self) -> dict[str, Check]:
        """``{field: allowed values}``; a task's config adds its own."""
        return {
            "dataset": Text("a dataset name"),
            "data_dir": Maybe(Text("a folder or file", path=True)),
            "out_dir": Maybe(RunFolder()),
            "device": Text(DEVICE_HELP),
            "seed": Int(0, 2**63 - 1),
            "epochs": Int(1, 100_000),
            "batch_size": Int(1, 2**20),
            "accumulate": Int(1, 4096),
            "rows": Maybe(Int(1, 2**40)),
            "lr": Float(0.0, 10.0, low_open=True),
            "min_lr": Float(0.0, 10.0),
            "weight_decay": Float(0.0, 10.0),
            "optimizer": OneOf(OPTIMIZERS),
            "schedule": OneOf(SCHEDULES),
            "warmup_epochs": Float(0.0, 100_000.0),
            "clip_grad": Maybe(Float(0.0, 1e6, low_open=True)),
            "ema_decay": Maybe(Float(0.0, 1.0, low_open=True, high_open=True)),
            "eval_every": Int(1, 100_000),
            "time_limit_s": Maybe(Float(0.0, 1e9, low_open=True)),
            "resume": Bool(),
            "overwrite": Bool(),
            "amp": Bool(),
            "compile": Bool(),
            "checkpoint_every_steps": Int(0, 2**31),
            "checkpoint_every_minutes": Float(0.0, 1e6),
            "distributed": OneOf(DISTRIBUTED),
            "grad_checkpointing": Bool(),
        }

    def __post_init__(self) -> None:
        check_fields(self, self.checks())
        self.data_dir = absolute_data_dir(self.data_dir)  # recorded as it is read now, not against a later cwd
        if self.resume and self.out_dir is None:
            raise ConfigError("resume needs the run folder to resume from: set out_dir (--out DIR)")
        if self.resume and self.overwrite:
            raise ConfigError("resume and overwrite contradict each other: choose one")
        self.check_relations()
        if self.warmup_epochs >= self.epochs and self.warmup_epochs > 0 and self.time_limit_s is None:
            warnings.warn(
                f"warmup_epochs={self.warmup_epochs:g} >= epochs={self.epochs}: the whole run is spent "
                f"warming up the learning rate; lower --set warmup_epochs or raise --epochs",
                stacklevel=3,
            )

    def allow_on_resume(self, names: Iterable[str]) -> None:
        """Let this resume change the :data:`RESUME_SETTABLE` fields among ``names`` (the command line gives
        them on purpose: ``--resume --set lr=1e-4``): the run continues from its recorded state with the new
        value applied to the optimizer and its schedule, and ``config.json`` records it. Other fields that
        differ from the recorded run are still refused."""
        self.resume_sets = frozenset(names) & frozenset(self.RESUME_SETTABLE)
        self.RESUME_FREE = (*type(self).RESUME_FREE, *sorted(self.resume_sets))

    def check_relations(self) -> None:
        """A task's checks of how its fields relate (each field's own range is in :meth:`checks`), run
        when the config is made, after every field is checked and before any warning."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (what ``config.json`` holds)."""
        return asdict(self)

    @classmethod
    def from_dict(cls: type[C], d: dict[str, Any]) -> C:
        """The config with fields ``d``; unknown keys are refused, naming the known ones."""
        reject_unknown(d, field_names(cls), cls.__name__)
        return cls(**d)

    @classmethod
    def known_options(cls) -> tuple[set[str], str] | None:
        """The flat option names :meth:`from_options` takes (the config's fields and the model's), and what
        to call them in the refusal of another; None: the overrides field's own check names the unknown."""
        return None

    @classmethod
    def gather_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """Flat options (a command line's) as fields: the config's own, and every other key a field of the
        model's config, gathered into :data:`OVERRIDES` over what that field already holds (a run's
        ``config.json`` keeps it as one mapping). A config without :data:`OVERRIDES` takes its fields only."""
        if cls.OVERRIDES is None:
            return dict(options)
        known = cls.known_options()
        if known is not None:
            reject_unknown(options, known[0], known[1])
        own = set(field_names(cls))
        base = options.get(cls.OVERRIDES, {})
        if not isinstance(base, dict):
            raise ConfigError(
                f"{cls.OVERRIDES} must be a mapping of {cls.OVERRIDES_OF} fields, got {shown(base)}: "
                f"e.g. {{'depth': 4}}"
            )
        extra = {k: v for k, v in options.items() if k not in own}
        return {**{k: v for k, v in options.items() if k in own}, cls.OVERRIDES: {**base, **extra}}

    @classmethod
    def assemble(cls: type[C], options: dict[str, Any]) -> C:
        """The config from flat options as :meth:`gather_options` gathers them (a task's config may add steps)."""
        return cls.from_dict(cls.gather_options(options))

    @classmethod
    def from_options(cls: type[C], options: dict[str, Any]) -> C:
        """The config from flat options (see :meth:`gather_options`). A key that is neither a field of the config
        nor of the model's is refused with the nearest name of either (``lrr``: did you mean ``lr``?)."""
        try:
            return cls.assemble(options)
        except UnknownKeysError as err:
            flat = [key for key in err.unknown if key in options]
            if cls.OVERRIDES is None or cls.known_options() is not None or not flat:
                raise  # the refusal already weighs every name (see known_options)
            names = [*field_names(cls), *err.known]
            raise UnknownKeysError(
                f"unknown option {flat[0]!r}{suggest(flat[0], names)}: not a field of "
                f"{cls.__name__} nor of the {cls.OVERRIDES_OF} (--help lists the options; --set takes every field)",
                flat,
                names,
            ) from None


@dataclass(frozen=True)
class RunFolder(Check):
    """A run folder's path (a string or ``os.PathLike``, stored as its string); an empty or blank name (an
    unset shell variable) is refused (:func:`~vitlab.checks.run_folder_name`)."""

    def describe(self) -> str:
        return "a folder path (--out DIR)"

    def __call__(self, name: str, value: Any) -> str:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be {self.describe()}, got {shown(value)}")
        return run_folder_name(value)


@dataclass(frozen=True)
class ModelFields(Check):
    """Overrides of the registered ``model``'s config fields: a mapping whose keys are fields of that config,
    each value in its field's range (how fields relate is checked when the model is built for the data)."""

    model: Any

    def describe(self) -> str:
        return "a mapping of model config fields"

    def __call__(self, name: str, value: Any) -> dict[str, Any]:
        registered = self.model in list_models() if isinstance(self.model, str) else False
        if not registered:  # "init" (the init checkpoint's architecture), or a name refused when the model is built
            return Fields((), "model config", open=True)(name, value)
        config = get_config(self.model)
        known = tuple(f.name for f in fields(config))
        return Fields(known, f"{self.model}'s config", values=getattr(config, "checks", None))(name, value)


def field_names(cls: type) -> list[str]:
    """The dataclass fields of a config class, in order."""
    return [f.name for f in fields(cls)]
