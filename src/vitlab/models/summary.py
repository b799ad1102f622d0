"""What a model is made of: parameters by component, and tensor shapes through a real forward pass.

``parameter_table`` groups a model's parameters into the components a reader thinks in (patch
projection, position embedding, each block's attention and MLP, ...); every parameter lands in
exactly one row, so the rows always sum to ``count_params(model, trainable_only=False)``.
Buffers (fixed sinusoidal positions, BatchNorm statistics) are not parameters and never count.

``trace_shapes`` runs a small ViT once and reports the shape of every named intermediate;
``qk_variance`` and ``softmax_peak`` measure why attention divides its scores by ``sqrt(d_k)``
(``qk_variance_figure`` draws both).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from ..checks import as_pair
from ..errors import ConfigError
from ..layers.attention import MultiHeadSelfAttention
from ..layers.block import Block
from ..layers.hybrid_embed import HybridEmbedding
from ..layers.patch_embed import PatchEmbedding
from ..layers.shifted_patch import ShiftedPatchTokenization
from ..ops.patches import patchify
from .cnn import ConvNormAct, SimpleCNN, Stage
from .vit import VisionTransformer, ViTConfig

Group = tuple[str, str, list[nn.Parameter]]


@dataclass(frozen=True)
class Row:
    """One component: its name, its size in words (``"49 -> 64"``), and its parameter counts."""

    component: str
    size: str
    params: int
    trainable: int


def _shape_text(params: Iterable[nn.Parameter]) -> str:
    """``(1, 16, 64) -> "16 x 64"``: shapes without the leading batch axis of token tables."""
    shapes = [p.shape[1:] if p.ndim == 3 and p.shape[0] == 1 else p.shape for p in params]
    return " + ".join(" x ".join(map(str, s)) for s in shapes)


def _norm_text(modules: Iterable[nn.Module]) -> str:
    """``"2 x LayerNorm(64)"``: how many normalisation layers of each kind and width."""
    widths = ((m, m.normalized_shape[0] if isinstance(m, nn.LayerNorm) else m.num_features) for m in modules)
    kinds = Counter(f"{type(m).__name__}({width})" for m, width in widths)
    return " + ".join(kind if n == 1 else f"{n} x {kind}" for kind, n in kinds.items())


def _norms(module: nn.Module) -> list[nn.Module]:
    return [m for m in module.modules() if isinstance(m, (nn.LayerNorm, nn.BatchNorm2d))]


def _chain_text(linears: list[nn.Linear]) -> str:
    """``"64 -> 128 -> 64"`` for a chain of linear layers."""
    return " -> ".join(str(n) for n in [linears[0].in_features] + [m.out_features for m in linears])


def _attention_text(attn: MultiHeadSelfAttention) -> str:
    """``"4 x (64x64 + 64)"``: the Q, K, V and output projections of one attention layer, then
    the names of any parameters of its own (e.g. a learned ``temperature``)."""
    dim = attn.proj.in_features
    mats = attn.qkv.out_features // dim + 1
    text = f"{mats} x {dim}x{dim} + {dim}" if attn.qkv.bias is None else f"{mats} x ({dim}x{dim} + {dim})"
    return " + ".join([text] + [name for name, _ in attn.named_parameters(recurse=False)])


def _patch_text(embed: PatchEmbedding | ShiftedPatchTokenization | HybridEmbedding) -> str:
    """``"49 -> 64"``: flattened patch values to token width, then any norms (``+ LayerNorm(245)``); a
    hybrid stem first says how many of the parameters its convolutions hold."""
    if isinstance(embed, HybridEmbedding):
        stem = sum(p.numel() for p in embed.backbone.parameters())
        conv = embed.proj
        return (
            f"{embed.stem} ({stem:,} parameters) + {conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]}"
            f" -> {conv.out_channels}"
        )
    proj = embed.proj
    if isinstance(proj, nn.Conv2d):
        inputs, outputs = proj.in_channels * proj.kernel_size[0] * proj.kernel_size[1], proj.out_channels
    else:
        inputs, outputs = proj.in_features, proj.out_features
    norms = _norms(embed)
    return f"{inputs} -> {outputs}" + (f" + {_norm_text(norms)}" if norms else "")


def _present(*params: nn.Parameter | None) -> list[nn.Parameter]:
    return [p for p in params if p is not None]


def _vit_groups(model: VisionTransformer) -> list[Group]:
    groups: list[Group] = [
        ("patch projection", _patch_text(model.patch_embed), list(model.patch_embed.parameters())),
        ("position embedding", _shape_text(model.pos_embed.parameters()), list(model.pos_embed.parameters())),
        ("class token", _shape_text(_present(model.class_token)), _present(model.class_token)),
        ("register tokens", _shape_text(_present(model.reg_token)), _present(model.reg_token)),
        ("pre-norm", _norm_text(_norms(model.norm_pre)), list(model.norm_pre.parameters())),
    ]
    for i, block in enumerate(cast(Iterable[Block], model.blocks), start=1):
        norms = [q for m in _norms(block) for q in m.parameters()]
        groups += [
            (
                f"block {i} attention (Q, K, V, out)",
                _attention_text(block.attn),
                [q for q in block.attn.parameters() if all(q is not n for n in norms)],
            ),
            (f"block {i} MLP", _chain_text([block.mlp.fc1, block.mlp.fc2]), list(block.mlp.parameters())),
            (f"block {i} norms", _norm_text(_norms(block)), norms),
            (
                f"block {i} layer scale",
                _shape_text([*block.ls1.parameters(), *block.ls2.parameters()]),
                [*block.ls1.parameters(), *block.ls2.parameters()],
            ),
        ]
    groups += [
        ("final norm", _norm_text(_norms(model.norm)), list(model.norm.parameters())),
        ("pooled norm", _norm_text(_norms(model.fc_norm)), list(model.fc_norm.parameters())),
    ]
    return groups


def _cnn_groups(model: SimpleCNN) -> list[Group]:
    groups: list[Group] = []
    for i, stage in enumerate(cast(Iterable[Stage], model.stages), start=1):
        convs = [cast(ConvNormAct, block).conv for block in stage.blocks]
        chain = " -> ".join(str(n) for n in [convs[0].in_channels] + [m.out_channels for m in convs])
        norms = _norms(stage)
        size = f"conv3x3 {chain}" + (f" + {_norm_text(norms)}" if norms else "")
        groups.append((f"stage {i}", size, list(stage.parameters())))
    return groups


def parameter_table(model: nn.Module) -> list[Row]:
    """The model's parameters grouped by component, in forward order; empty groups are left out.

    Knows the parts of :class:`VisionTransformer` and :class:`SimpleCNN`; any other model gets
    one row per top-level child. A linear ``head`` follows the parts, and parameters no group
    claims fall into a final ``other`` row, so ``sum(row.params) == sum(p.numel())``.
    """
    if isinstance(model, VisionTransformer):
        groups = _vit_groups(model)
    elif isinstance(model, SimpleCNN):
        groups = _cnn_groups(model)
    else:
        groups = [(name, "", list(child.parameters())) for name, child in model.named_children() if name != "head"]
    head = getattr(model, "head", None)
    if isinstance(head, nn.Linear):
        groups.append(("head", _chain_text([head]), list(head.parameters())))
    claimed = {id(q) for _, _, params in groups for q in params}
    groups.append(("other", "", [q for q in model.parameters() if id(q) not in claimed]))
    return [
        Row(name, size, sum(q.numel() for q in params), sum(q.numel() for q in params if q.requires_grad))
        for name, size, params in groups
        if params
    ]


def trainable_position_params(model: nn.Module) -> int:
    """Trainable entries of a ViT's absolute position embedding (0 for fixed or no positions)."""
    if not isinstance(model, VisionTransformer):
        return 0
    return sum(p.numel() for p in model.pos_embed.parameters() if p.requires_grad)


def conv_params(in_chans: int, out_chans: int, kernel: int = 3) -> int:
    """Parameters of a ``kernel x kernel`` convolution with bias: ``k * k * C_in * C_out + C_out``."""
    return kernel * kernel * in_chans * out_chans + out_chans


def qk_variance(d_k: int, samples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Sample variance of ``q . k`` over ``samples`` pairs of standard-normal ``q, k`` of size ``d_k``,
    before and after dividing by ``sqrt(d_k)``. A sum of ``d_k`` independent unit-variance products has
    variance ``d_k``; the scaled score has variance 1, whatever ``d_k``."""
    if d_k < 1 or samples < 2:
        raise ConfigError(f"d_k={d_k}, samples={samples}: a variance needs d_k >= 1 and at least 2 samples")
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, samples, d_k, generator=generator, dtype=torch.float64)  # (samples, d_k) each
    scores = (q * k).sum(-1)  # (samples,)
    return scores.var().item(), (scores / math.sqrt(d_k)).var().item()


def softmax_peak(d_k: int, keys: int = 64, samples: int = 1_000, seed: int = 0) -> tuple[float, float]:
    """Mean largest softmax weight of one query over ``keys`` keys, for standard-normal ``q, k`` of
    size ``d_k``, with raw scores ``q . k`` and with scaled scores ``q . k / sqrt(d_k)``. Raw scores
    spread as ``sqrt(d_k)``, so their softmax saturates towards one-hot as ``d_k`` grows; scaled ones
    keep a ``d_k``-free spread (``1 / keys`` would be uniform)."""
    if d_k < 1 or keys < 2 or samples < 1:
        raise ConfigError(f"d_k={d_k}, keys={keys}, samples={samples}: need d_k >= 1, at least 2 keys and 1 sample")
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(samples, 1, d_k, generator=generator, dtype=torch.float64)  # (samples, 1, d_k)
    k = torch.randn(samples, keys, d_k, generator=generator, dtype=torch.float64)  # (samples, keys, d_k)
    scores = (q * k).sum(-1)  # (samples, keys)
    raw = scores.softmax(-1).amax(-1).mean().item()
    scaled = (scores / math.sqrt(d_k)).softmax(-1).amax(-1).mean().item()
    return raw, scaled


def qk_variance_figure(
    variances: dict[int, tuple[float, float]], peaks: dict[int, tuple[float, float]], keys: int
) -> Any:
    """A matplotlib figure of :func:`qk_variance` and :func:`softmax_peak` against ``d_k``: the score
    variance (log-log; raw grows with slope 1, scaled stays at 1) and the largest softmax weight over
    ``keys`` keys (raw saturates towards 1, scaled stays put)."""
    from matplotlib.figure import Figure

    dims = sorted(variances)
    fig = Figure(figsize=(9, 3.6), constrained_layout=True)
    spread, peak = fig.subplots(1, 2)
    spread.loglog(dims, [variances[d][0] for d in dims], marker="o", label="q . k")
    spread.loglog(dims, [variances[d][1] for d in dims], marker="o", label="q . k / sqrt(d_k)")
    spread.loglog(dims, dims, color="grey", linestyle="--", linewidth=1, label="theory: d_k")
    spread.set(xlabel="d_k (head width)", ylabel="variance of the score", title="score variance")
    peak.semilogx(dims, [peaks[d][0] for d in dims], marker="o", label="softmax(q . k)")
    peak.semilogx(dims, [peaks[d][1] for d in dims], marker="o", label="softmax(q . k / sqrt(d_k))")
    peak.axhline(1 / keys, color="grey", linestyle="--", linewidth=1, label=f"uniform 1/{keys}")
    peak.set(
        xlabel="d_k (head width)",
        ylabel="largest weight (mean)",
        ylim=(0, 1.05),
        title=f"sharpness of one query over {keys} keys",
    )
    for ax in (spread, peak):
        ax.legend(fontsize=8)
    return fig


# The layout of each shape ``trace_shapes`` reports. N patches, R prefix tokens, T = R + N.
SHAPE_LAYOUT = {
    "images": "(B, C, H, W)",
    "X_patch": "(B, N, P*P*C)",
    "patch tokens": "(B, N, D)",
    "block input": "(B, T, D)",
    "Q": "(B, H, T, d)",
    "K": "(B, H, T, d)",
    "V": "(B, H, T, d)",
    "QK^T": "(B, H, T, T)",
    "attention weights": "(B, H, T, T)",
    "attention output": "(B, T, D)",
    "block output": "(B, T, D)",
}


@torch.no_grad()
def trace_shapes(
    image: int | tuple[int, int] = 224,
    patch: int = 16,
    dim: int = 768,
    heads: int = 12,
    class_token: bool = False,
    channels: int = 3,
    depth: int = 1,
    max_entries: int = 2**28,
    max_params: int = 2**28,
) -> dict[str, tuple[int, ...]]:
    """Shapes of the tensors inside a ViT with these sizes, read from one forward pass at batch 1.

    Builds a ``depth``-block :class:`VisionTransformer` (no head), runs a random image through
    it with hooks on the patch embedding, the first block's attention and the last block, and
    forms ``Q, K, V``, ``QK^T`` and the attention weights from the attention layer's real input.
    Refuses sizes whose ``H x T x T`` scores exceed ``max_entries``, or whose model has more than
    ``max_params`` parameters (each 1 GiB at fp32 by default), before allocating either.

    Returns:
        ``{name: shape}`` in forward order, with the names and layouts of :data:`SHAPE_LAYOUT`.
    """
    config = ViTConfig(
        img_size=image,
        patch_size=patch,
        in_chans=channels,
        num_classes=0,
        embed_dim=dim,
        depth=depth,
        num_heads=heads,
        class_token=class_token,
        pool="token" if class_token else "mean",
    )
    tokens = config.grid[0] * config.grid[1] + int(class_token)
    if heads * tokens * tokens > max_entries:
        raise ConfigError(
            f"{heads} heads x {tokens}^2 tokens = {heads * tokens * tokens:,} attention scores "
            f"exceed max_entries={max_entries:,}: use a larger patch or smaller image, or price "
            f"it without running it (vitlab cost)"
        )
    if config.approx_params > max_params:
        raise ConfigError(
            f"a ViT of depth {depth}, width {dim} on {tokens} tokens has about {config.approx_params:,} "
            f"parameters, above max_params={max_params:,}: lower the depth (one block shows every shape)"
            f" or the width, or price it without running it (vitlab cost)"
        )
    model = VisionTransformer(config).eval()
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str, pre: bool) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple, output: Any = None) -> None:
            seen[name] = args[0] if pre else output  # a forward hook (not pre) gets the output tensor

        return hook

    attn = cast(Block, model.blocks[0]).attn  # the model is ours alone, so its hooks can stay
    model.patch_embed.register_forward_pre_hook(keep("images", pre=True))
    model.patch_embed.register_forward_hook(keep("patch tokens", pre=False))
    model.blocks[0].register_forward_pre_hook(keep("block input", pre=True))
    attn.register_forward_pre_hook(keep("attention input", pre=True))
    attn.register_forward_hook(keep("attention output", pre=False))
    model.blocks[-1].register_forward_hook(keep("block output", pre=False))
    model.forward_features(torch.randn(1, channels, *as_pair(config.img_size)))  # every token through every block
    q, k, v = attn.qkv_heads(seen["attention input"])
    _, weights = attn.forward_with_weights(seen["attention input"])
    seen.update(
        {
            "X_patch": patchify(seen["images"], patch),
            "Q": q,
            "K": k,
            "V": v,
            "QK^T": q @ k.transpose(-2, -1),
            "attention weights": weights,
        }
    )
    return {name: tuple(seen[name].shape) for name in SHAPE_LAYOUT}
