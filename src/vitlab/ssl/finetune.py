"""Fine-tuning from a pretrained checkpoint: weight transfer and layer-wise learning-rate decay.

Layer-wise decay (BEiT / MAE fine-tuning) scales block ``i`` of a depth-``L`` ViT by
``decay ** (L - i)``: the head gets the full rate (layer ``L + 1``), the embeddings (patch
embedding, positions, prefix tokens; layer 0) ``decay ** (L + 1)``.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..train.checkpoint import load_checkpoint
from ..train.optim import build_optimizer, param_groups

EMBEDDING_PREFIXES = ("patch_embed", "pos_embed", "class_token", "reg_token", "dist_token", "norm_pre")


def layer_id(name: str, depth: int) -> int:
    """The layer of parameter ``name`` in a depth-``depth`` ViT: 0 embeddings, ``i + 1`` block ``i``,
    ``depth + 1`` everything after the blocks (norms, heads)."""
    if name.startswith(EMBEDDING_PREFIXES):
        return 0
    if name.startswith("blocks."):
        return int(name.split(".")[1]) + 1
    return depth + 1


def layer_decay_groups(model: nn.Module, weight_decay: float, decay: float) -> list[dict]:
    """:func:`~vitlab.train.optim.param_groups` split by layer, each with its ``lr_scale``."""
    if not 0.0 < decay <= 1.0:
        raise ValueError(f"layer decay must lie in (0, 1], got {decay}: 0.65-0.75 is usual for small ViTs")
    depth = len(getattr(model, "blocks", ()))
    if depth == 0:
        raise ValueError(f"layer-wise decay needs a ViT with blocks, got {type(model).__name__}")
    ids = {id(p): layer_id(n, depth) for n, p in model.named_parameters()}
    groups = []
    for base in param_groups(model, weight_decay):
        by_layer: dict[int, list[nn.Parameter]] = {}
        for p in base["params"]:
            by_layer.setdefault(ids[id(p)], []).append(p)
        groups += [{"params": ps, "weight_decay": base["weight_decay"], "lr_scale": decay ** (depth + 1 - layer)}
                   for layer, ps in sorted(by_layer.items())]
    return groups


def build_finetune_optimizer(model: nn.Module, name: str, lr: float, weight_decay: float,
                             layer_decay: float) -> torch.optim.Optimizer:
    """:func:`~vitlab.train.optim.build_optimizer` with each layer's group at ``lr * lr_scale``."""
    groups = [{**g, "lr": lr * g["lr_scale"]} for g in layer_decay_groups(model, weight_decay, layer_decay)]
    return build_optimizer(model, name, lr, weight_decay, groups=groups)


def load_pretrained(model: nn.Module, path: str | Path) -> list[str]:
    """Copy every weight of the checkpoint at ``path`` whose name and shape match ``model``'s.

    Returns the names of ``model``'s parameters and buffers left as initialised (e.g. a new head).
    Raises if fewer than half of ``model``'s tensors match (a different architecture).
    """
    source = load_checkpoint(path).model.state_dict()
    target = model.state_dict()
    matched = {k: v for k, v in source.items() if k in target and target[k].shape == v.shape}
    if 2 * len(matched) < len(target):
        raise ValueError(f"no weight of {path} fits {type(model).__name__}: pretrain the same model "
                         f"(--model) as the one you fine-tune")
    model.load_state_dict(matched, strict=False)
    return sorted(set(target) - set(matched))
