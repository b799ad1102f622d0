"""Training modes of a pretrained ViT: which weights learn, and the adapters some modes add.

``full`` trains every weight. The others freeze the vision encoder -- the patch embedding, the positions and
prefix tokens, the transformer blocks and the final norm -- and train:

- ``head``: the classifier head alone (a linear probe trained by the loop);
- ``last-K``: the last ``K`` blocks, the final norms and the head (layer-wise decay still applies);
- ``lora``: low-rank adapters (:class:`~vitlab.layers.lora.LoRALinear`) on the chosen linear layers of every
  block (``q``, ``k``, ``v`` separately inside the fused ``qkv``; ``proj``, ``fc1``, ``fc2``) and the head;
- ``bitfit``: every bias and every norm's scale and shift, and the head;
- ``prompt``: learned prompt tokens (``prompt_tokens`` of the model's config: shallow, or deep with a set per
  block) and the head.

:func:`apply_tuning` sets a built model up for a mode in place; :func:`merged` folds LoRA into plain
linear layers, so every mode but ``prompt`` (whose tokens are part of the model) delivers a plain ViT.
:func:`save_adapters` / :func:`load_adapters` write and read the trained tensors alone, recording the
SHA-256 of the frozen base weights they belong to.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from ..checks import Bool, Check, Float, Int, check_fields, shown
from ..errors import CheckpointError, ConfigError
from ..layers.lora import LoRALinear

TUNE_MODES = ("full", "head", "last-K", "lora", "bitfit", "prompt")
"""The training modes; ``last-K`` is written with its number of blocks (``last-2``), or ``last`` with
``tune.blocks``."""

TUNE_HELP = (
    "what trains: full (every weight), head (freeze the vision encoder -- patch embedding + transformer + "
    "final norm -- and train the head), last-K (the last K blocks + norm + head), lora (low-rank adapters + "
    "head), bitfit (biases + norms + head), prompt (learned prompt tokens + head)"
)

LORA_TARGETS: dict[str, tuple[str, int, int]] = {
    "q": ("attn.qkv", 0, 3),
    "k": ("attn.qkv", 1, 3),
    "v": ("attn.qkv", 2, 3),
    "proj": ("attn.proj", 0, 1),
    "fc1": ("mlp.fc1", 0, 1),
    "fc2": ("mlp.fc2", 0, 1),
}
"""A LoRA target's name -> (the linear layer inside a block, its output part, the parts of that output)."""
TARGET_ALIASES = {"qkv": ("q", "k", "v"), "attn": ("q", "k", "v", "proj"), "mlp": ("fc1", "fc2")}
HEADS = ("head", "head_dist")
NORMS = (nn.LayerNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.GroupNorm)
ADAPTERS_FORMAT = "vitlab-adapters"


def parse_mode(value: str) -> tuple[str, int | None]:
    """``"last-2"`` -> ``("last", 2)``; ``"lora"`` -> ``("lora", None)``; an unknown mode is refused."""
    if not isinstance(value, str):
        raise ConfigError(f"tune must be one of {'|'.join(TUNE_MODES)}, got {shown(value)}")
    match = re.fullmatch(r"last(?:-(\d+))?", value)
    if match:
        return "last", int(match.group(1)) if match.group(1) else None
    if value not in TUNE_MODES:
        raise ConfigError(f"tune must be one of {'|'.join(TUNE_MODES)} (last-K as last-2, ...), got {value!r}")
    return value, None


@dataclass(frozen=True)
class TuneMode(Check):
    """A training mode's name (:data:`TUNE_MODES`; ``last-K`` with its number)."""

    def describe(self) -> str:
        return TUNE_HELP

    def __call__(self, name: str, value: Any) -> str:
        mode, blocks = parse_mode(value)
        if blocks is not None and blocks < 1:
            raise ConfigError(f"{name}={value!r} unfreezes no block: use last-1 or more")
        return cast(str, value)


def expand_targets(targets: str | Sequence[str]) -> tuple[str, ...]:
    """``"qkv,proj"`` -> ``("q", "k", "v", "proj")``; an unknown name is refused, listing the valid ones."""
    if not isinstance(targets, (str, list, tuple)):
        raise ConfigError(f"tune.targets must be layer names such as qkv,proj,fc1,fc2, got {shown(targets)}")
    names = [t.strip() for t in targets.split(",")] if isinstance(targets, str) else [str(t) for t in targets]
    out: list[str] = []
    for name in names:
        if name not in LORA_TARGETS and name not in TARGET_ALIASES:
            raise ConfigError(
                f"unknown LoRA target {name!r}: choose from {', '.join([*LORA_TARGETS, *TARGET_ALIASES])} "
                f"(e.g. tune.targets=qkv,proj,fc1,fc2)"
            )
        out += [t for t in TARGET_ALIASES.get(name, (name,)) if t not in out]
    if not out:
        raise ConfigError(f"tune.targets names no layer: choose from {', '.join(LORA_TARGETS)}")
    return tuple(out)


@dataclass(frozen=True)
class LoraTargets(Check):
    """LoRA's target layers: comma-separated names (or a list) from :data:`LORA_TARGETS` and the groups of
    :data:`TARGET_ALIASES`, stored expanded."""

    def describe(self) -> str:
        return f"layer names from {','.join(LORA_TARGETS)} (groups: {', '.join(TARGET_ALIASES)})"

    def __call__(self, name: str, value: Any) -> tuple[str, ...]:
        return expand_targets(value)


@dataclass
class TuneOptions:
    """The settings of the training modes (``--set tune.FIELD=VALUE``).

    rank / alpha / dropout: LoRA's rank ``r``, its scaling ``alpha / r`` and the dropout on its input.
    targets: the layers LoRA adapts in every block (:data:`LORA_TARGETS`; ``qkv`` is ``q,k,v``).
    blocks: ``K`` of ``--tune last`` (``--tune last-K`` names it itself).
    prompts / deep: prompt tuning's number of tokens, and a fresh set in front of every block (VPT-deep).
    """

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("q", "v")
    blocks: int = 2
    prompts: int = 10
    deep: bool = False

    @staticmethod
    def checks() -> dict[str, Check]:
        return {
            "rank": Int(1, 1 << 16),
            "alpha": Float(0.0, 1e6, low_open=True),
            "dropout": Float(0.0, 1.0, high_open=True),
            "targets": LoraTargets(),
            "blocks": Int(1, 1 << 12),
            "prompts": Int(1, 1 << 12),
            "deep": Bool(),
        }

    def __post_init__(self) -> None:
        checks = self.checks()
        try:
            check_fields(self, checks)
        except ConfigError as error:
            if not str(error).startswith(tuple(checks)):
                raise
            raise ConfigError(f"tune.{error}") from None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "targets": list(self.targets)}


@dataclass(frozen=True)
class Tuning:
    """A resolved training mode: ``mode`` (``full``, ``head``, ``last``, ``lora``, ``bitfit``, ``prompt``)
    and its options (``options.blocks`` is ``K`` of ``last-K``)."""

    mode: str
    options: TuneOptions

    @classmethod
    def of(cls, mode: str, options: TuneOptions | None = None) -> Tuning:
        """The tuning ``--tune mode`` with ``options`` (``last-K`` sets ``options.blocks``)."""
        name, blocks = parse_mode(mode)
        options = options or TuneOptions()
        if blocks is not None:
            options = TuneOptions(**{**options.to_dict(), "blocks": blocks})
        return cls(name, options)

    @property
    def label(self) -> str:
        return f"last-{self.options.blocks}" if self.mode == "last" else self.mode

    def model_overrides(self) -> dict[str, Any]:
        """The model config fields the mode needs (prompt tuning's tokens), else none."""
        if self.mode != "prompt":
            return {}
        return {"prompt_tokens": self.options.prompts, "prompt_deep": self.options.deep}

    def record(self) -> dict[str, Any]:
        """JSON-ready: the mode and the options it reads."""
        return {"mode": self.label, **self.options.to_dict()}


def check_tunable(model: nn.Module, tuning: Tuning) -> None:
    """Refuse in one line a model the mode cannot set up: not a ViT, ``last-K`` beyond its depth, prompt
    tuning without prompt tokens."""
    blocks, config = getattr(model, "blocks", None), getattr(model, "config", None)
    if not isinstance(blocks, nn.ModuleList) or getattr(model, "head", None) is None:
        raise ConfigError(
            f"--tune {tuning.label} sets up a Vision Transformer's encoder and head; {type(model).__name__} is not "
            f"one: drop --tune (or train a ViT)"
        )
    if tuning.mode == "last" and tuning.options.blocks > len(blocks):
        raise ConfigError(
            f"--tune last-{tuning.options.blocks} unfreezes more blocks than the model's {len(blocks)}: "
            f"use last-1 .. last-{len(blocks)} (or --tune full)"
        )
    if tuning.mode == "prompt" and not getattr(config, "prompt_tokens", 0):
        raise ConfigError("--tune prompt needs a ViT built with prompt_tokens >= 1 (tune.prompts sets it)")


def _unfreeze(*modules: nn.Module | nn.Parameter | None) -> None:
    for m in modules:
        if m is not None:
            m.requires_grad_(True)


def add_lora(model: nn.Module, options: TuneOptions) -> list[str]:
    """Wrap the target linear layers of every block in :class:`LoRALinear` (in place); returns their names."""
    layers: dict[str, dict[str, int]] = {}
    chunks: dict[str, int] = {}
    for target in options.targets:
        path, index, count = LORA_TARGETS[target]
        layers.setdefault(path, {})[target] = index
        chunks[path] = count
    wrapped = []
    for i, block in enumerate(cast(nn.ModuleList, model.blocks)):
        for path, parts in layers.items():
            owner_name, _, attr = path.rpartition(".")
            owner = block.get_submodule(owner_name)
            linear = getattr(owner, attr, None)
            if not isinstance(linear, nn.Linear):
                raise ConfigError(
                    f"LoRA target {', '.join(parts)} needs a linear layer blocks.{i}.{path}, which this model's "
                    f"{type(owner).__name__} lacks: choose other tune.targets"
                )
            setattr(owner, attr, LoRALinear(linear, parts, options.rank, options.alpha, options.dropout, chunks[path]))
            wrapped.append(f"blocks.{i}.{path}")
    return wrapped


def apply_tuning(model: nn.Module, tuning: Tuning) -> nn.Module:
    """Set ``model`` (a :class:`~vitlab.models.vit.VisionTransformer`, weights loaded) up for ``tuning`` in
    place: freeze what the mode freezes, add its adapters. Returns ``model`` (any model under ``full``)."""
    if tuning.mode == "full":
        return model
    check_tunable(model, tuning)
    model.requires_grad_(False)
    mode, options = tuning.mode, tuning.options
    if mode == "last":
        blocks = cast(nn.ModuleList, model.blocks)
        _unfreeze(*blocks[len(blocks) - options.blocks :], getattr(model, "norm", None))
        _unfreeze(getattr(model, "fc_norm", None))
    elif mode == "lora":
        add_lora(model, options)  # the new adapters are trainable
    elif mode == "bitfit":
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.requires_grad_(True)
        _unfreeze(*(m for m in model.modules() if isinstance(m, NORMS)))
    elif mode == "prompt":
        _unfreeze(getattr(model, "prompt_token", None), getattr(model, "deep_prompt", None))
    _unfreeze(*(getattr(model, name, None) for name in HEADS))
    return model


def has_adapters(model: nn.Module) -> bool:
    """Whether ``model`` holds LoRA adapters (and so needs :func:`merged` to become plain)."""
    return any(isinstance(m, LoRALinear) for m in model.modules())


@torch.no_grad()
def merged(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with every :class:`LoRALinear` folded into a plain ``nn.Linear`` and every weight
    trainable again: the same logits (dropout off), the state-dict keys of the untuned model."""
    plain = copy.deepcopy(model)
    for name, module in list(plain.named_modules()):
        if isinstance(module, LoRALinear):
            owner_name, _, attr = name.rpartition(".")
            setattr(plain.get_submodule(owner_name), attr, module.merged())
    return plain.requires_grad_(True)


def trainable_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The tensors a mode trains, by name (LoRA's ``A`` and ``B``, biases, prompts, the head)."""
    return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}


def base_sha256(model: nn.Module) -> str:
    """SHA-256 over the frozen tensors of a tuned ``model`` (names, shapes and bytes, in name order): the
    base weights its adapters belong to."""
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        if name in trainable:
            continue
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def save_adapters(model: nn.Module, tuning: Tuning, path: str | Path, base: str) -> Path:
    """Write the tensors ``model`` trains under ``tuning`` to ``path`` (safetensors), with the mode, its
    options, the base model's identity ``base`` (what it was built from) and the SHA-256 of its frozen
    weights (:func:`base_sha256`) in the metadata."""
    from safetensors.torch import save_file

    state = {k: v.to("cpu").contiguous() for k, v in trainable_state(model).items()}
    config: Any = getattr(model, "config", None)
    metadata = {
        "format": ADAPTERS_FORMAT,
        "tune": json.dumps(tuning.record()),
        "base": base,
        "base_sha256": base_sha256(model),
        "model_config": json.dumps(config.to_dict() if config is not None else {}, default=list),
    }
    path = Path(path)
    save_file(state, str(path), metadata=metadata)
    return path


def read_adapters(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and metadata of an adapters file :func:`save_adapters` wrote; another file is refused."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (OSError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{path}: not a readable safetensors file ({error})") from None
    if metadata.get("format") != ADAPTERS_FORMAT:
        raise CheckpointError(f"{path} is not a vitlab adapters file (vitlab export RUN --adapters-only writes one)")
    return tensors, metadata


def load_adapters(model: nn.Module, path: str | Path) -> nn.Module:
    """``model`` (the base the adapters were trained on, plain) set up with the recorded mode and the adapter
    tensors at ``path`` loaded, in place; a base whose frozen weights differ from the recorded SHA-256 is
    refused in one line. Returns ``model``."""
    tensors, metadata = read_adapters(path)
    record = json.loads(metadata["tune"])
    tuning = Tuning.of(record.pop("mode"), TuneOptions(**record))
    if tuning.mode == "prompt" and not getattr(getattr(model, "config", None), "prompt_tokens", 0):
        raise CheckpointError(
            f"{path} holds prompt tokens: build the base with prompt_tokens={tuning.options.prompts} "
            f"(prompt_deep={tuning.options.deep}) to load them"
        )
    apply_tuning(model, tuning)
    if base_sha256(model) != metadata["base_sha256"]:
        raise CheckpointError(
            f"{path} was trained on another base model ({metadata.get('base')}, frozen weights sha256 "
            f"{metadata['base_sha256'][:12]}...): load it onto that base"
        )
    missing = set(trainable_state(model)) ^ set(tensors)
    if missing:
        raise CheckpointError(f"{path} does not fit this model's {tuning.label} tensors: {sorted(missing)[:4]}")
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, tensor in tensors.items():
            params[name].copy_(tensor)
    return model


__all__ = [
    "LORA_TARGETS",
    "TUNE_HELP",
    "TUNE_MODES",
    "TuneMode",
    "TuneOptions",
    "Tuning",
    "apply_tuning",
    "base_sha256",
    "has_adapters",
    "load_adapters",
    "merged",
    "parse_mode",
    "read_adapters",
    "save_adapters",
    "trainable_state",
]
