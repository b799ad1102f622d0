"""Optimizers with weight-decay parameter groups, layer-wise rate decay, warmup + cosine schedules,
and a weight EMA.

Layer-wise decay (BEiT / MAE fine-tuning) scales block ``i`` of a depth-``L`` ViT by
``decay ** (L - i)``: the head gets the full rate (layer ``L + 1``), the embeddings (patch
embedding, positions, prefix tokens; layer 0) ``decay ** (L + 1)``.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from ..errors import ConfigError

OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("cosine", "constant")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: decayed weights, and everything weight decay should skip.

    Skipped: parameters with fewer than 2 dimensions (norm scales, biases, layer scales) and the
    names in ``model.no_weight_decay()`` when the model defines it (position tables, special tokens).
    """
    no_weight_decay = getattr(model, "no_weight_decay", None)
    skip: set[str] = set(no_weight_decay()) if no_weight_decay is not None else set()
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 or name in skip else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


EMBEDDING_PREFIXES = ("patch_embed", "pos_embed", "class_token", "reg_token", "prompt_token", "dist_token", "norm_pre")


def layer_id(name: str, depth: int) -> int:
    """The layer of parameter ``name`` in a depth-``depth`` ViT: 0 embeddings, ``i + 1`` block ``i``,
    ``depth + 1`` everything after the blocks (norms, heads)."""
    if name.startswith(EMBEDDING_PREFIXES):
        return 0
    if name.startswith("blocks."):
        return int(name.split(".")[1]) + 1
    return depth + 1


def layer_decay_groups(model: nn.Module, weight_decay: float, decay: float) -> list[dict]:
    """:func:`param_groups` split by layer, each with its ``lr_scale``."""
    if not 0.0 < decay <= 1.0:
        raise ConfigError(f"layer decay must lie in (0, 1], got {decay}: 0.65-0.75 is usual for small ViTs")
    depth = len(getattr(model, "blocks", ()))
    if depth == 0:
        raise ConfigError(f"layer-wise decay needs a ViT with blocks, got {type(model).__name__}")
    ids = {id(p): layer_id(n, depth) for n, p in model.named_parameters()}
    groups = []
    for base in param_groups(model, weight_decay):
        by_layer: dict[int, list[nn.Parameter]] = {}
        for p in base["params"]:
            by_layer.setdefault(ids[id(p)], []).append(p)
        groups += [
            {"params": ps, "weight_decay": base["weight_decay"], "lr_scale": decay ** (depth + 1 - layer)}
            for layer, ps in sorted(by_layer.items())
        ]
    return groups


def build_optimizer(
    model: nn.Module, name: str, lr: float, weight_decay: float, momentum: float = 0.9, groups: list[dict] | None = None
) -> torch.optim.Optimizer:
    """``adamw`` | ``adam`` | ``sgd`` (Nesterov) over :func:`param_groups` (or the ``groups`` given,
    which may set their own ``lr``); Adam(W) uses the fused kernel on CPU and CUDA (a few times
    faster than the per-parameter loop for small models)."""
    groups = param_groups(model, weight_decay) if groups is None else groups
    fused = next(model.parameters()).device.type in ("cpu", "cuda")
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, fused=fused)
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, fused=fused)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=True)
    raise ConfigError(f"unknown optimizer {name!r}: choose one of {OPTIMIZERS}")


class WarmupCosine:
    """LR multiplier at step ``s``: linear warmup over ``warmup`` steps, then cosine from 1 down to
    ``floor`` at ``total`` steps (``cosine=False``: constant 1 after warmup).

    A plain object (not a closure) so ``LambdaLR.state_dict()`` stores its fields.
    """

    def __init__(self, total: int, warmup: int = 0, floor: float = 0.0, cosine: bool = True) -> None:
        self.total, self.warmup, self.floor, self.cosine = total, warmup, floor, cosine

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        if not self.cosine:
            return 1.0
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return self.floor + (1.0 - self.floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(
    optimizer: torch.optim.Optimizer, schedule: str, total_steps: int, warmup_steps: int, lr: float, min_lr: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """A per-step schedule: ``cosine`` (to ``min_lr``) or ``constant``, after linear warmup."""
    if schedule not in SCHEDULES:
        raise ConfigError(f"unknown schedule {schedule!r}: choose one of {SCHEDULES}")
    rule = WarmupCosine(total_steps, warmup_steps, min_lr / lr if lr else 0.0, cosine=schedule == "cosine")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, rule)


def retune_state(state: dict, lr: float, min_lr: float) -> None:
    """Set a saved training state (``state.pt``: ``config``, ``optimizer``, ``scheduler``) to continue at peak
    rate ``lr`` and floor ``min_lr`` instead of the recorded ones, in place: every parameter group's rate
    (layer-wise scales kept) and the schedule's base rates scaled by ``lr / recorded lr``, the cosine floor
    ``min_lr / lr``, each group's current rate recomputed at the recorded step. ``state["config"]`` is left
    as recorded (it says what the run trained with so far)."""
    recorded = state.get("config") or {}
    old = recorded.get("lr")
    optimizer, scheduler = state.get("optimizer"), state.get("scheduler")
    if not isinstance(old, (int, float)) or old <= 0 or not isinstance(optimizer, dict):
        return
    if not isinstance(scheduler, dict):
        return
    ratio = lr / old
    scheduler["base_lrs"] = [b * ratio for b in scheduler.get("base_lrs", [])]
    rules = scheduler.get("lr_lambdas") or []
    for rule in rules:
        if isinstance(rule, dict) and "floor" in rule:
            rule["floor"] = min_lr / lr if lr else 0.0
    step, last = scheduler.get("last_epoch", 0), []
    for i, (group, base) in enumerate(zip(optimizer.get("param_groups", []), scheduler["base_lrs"])):
        rule = rules[i] if i < len(rules) and isinstance(rules[i], dict) else None
        factor = WarmupCosine(**rule)(step) if rule is not None else group["lr"] / group.get("initial_lr", group["lr"])
        group["initial_lr"], group["lr"] = base, base * factor
        last.append(group["lr"])
    scheduler["_last_lr"] = last


class ModelEma:
    """An exponential moving average of a model's weights (buffers are copied).

    ``decay`` ramps up as ``min(decay, (1 + n) / (10 + n))`` after ``n`` updates, so short runs
    are not dominated by the initial weights.
    """

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ConfigError(f"ema decay must lie in (0, 1), got {decay}: try 0.999, or None to turn EMA off")
        self.module = copy.deepcopy(model).eval().requires_grad_(False)
        self.decay = decay
        self.updates = 0

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        ema_params: list[torch.Tensor] = list(self.module.parameters())
        torch._foreach_lerp_(ema_params, [p.detach() for p in model.parameters()], 1.0 - decay)
        for ema_buf, buf in zip(self.module.buffers(), model.buffers()):
            ema_buf.copy_(buf)

    def state_dict(self) -> dict:
        return {"weights": self.module.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state["weights"])
        self.updates = int(state["updates"])
