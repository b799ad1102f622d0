"""What a model is made of: its parameters by component, and the report ``vitlab params`` prints.

``parameter_table`` groups a model's parameters into the components a reader thinks in (patch
projection, position embedding, each block's attention and MLP, ...); every parameter lands in
exactly one row, so the rows always sum to ``count_params(model, trainable_only=False)``.
Buffers (fixed sinusoidal positions, BatchNorm statistics) are not parameters and never count.
``params_report`` builds a registered model and returns that table as text, with the totals, the
share of a learned position table, and the input stage priced against a 3x3 convolution; under a training
mode (``tune``, :mod:`vitlab.models.tuning`) each row also says how many of its parameters train, and the
report what the mode's optimiser state costs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from torch import nn

from ..errors import ConfigError
from ..layers.attention import MultiHeadSelfAttention
from ..layers.block import Block
from ..layers.hybrid_embed import HybridEmbedding
from ..layers.patch_embed import PatchEmbedding
from ..layers.shifted_patch import ShiftedPatchTokenization
from ..models.cnn import ConvNormAct, SimpleCNN, Stage, count_params
from ..models.registry import build_registered, get_config
from ..models.tuning import TuneOptions, Tuning, apply_tuning
from ..models.vit import VisionTransformer

# Registered models whose count with fixed positions is the total the textbook prints for them.
TEXTBOOK_TOTALS = {"vit-seed": "the total the textbook prints for its Keras version of this model"}

BUILD_LIMIT_GIB = 4.0
"""The default of ``--max-gib``: the most memory (GiB, fp32 weights and fixed tables) `vitlab params` builds a
model in to count it; a larger model is refused before anything is allocated, naming its estimate."""

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
        (
            "prompt tokens",
            _shape_text(_present(model.prompt_token, model.deep_prompt)),
            _present(model.prompt_token, model.deep_prompt),
        ),
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


def check_build_size(name: str, overrides: dict[str, Any], limit_gib: float) -> None:
    """Refuse, before building, a model whose estimated weights and fixed tables (``approx_params`` of its
    config, 4 bytes each) are over ``limit_gib`` GiB, naming the estimate and the limit."""
    if not limit_gib > 0:
        raise ConfigError(f"--max-gib must be a positive number of GiB, got {limit_gib}")
    params = getattr(get_config(name, **overrides), "approx_params", None)
    if params is None:
        return
    gib = 4 * params / 2**30
    if gib > limit_gib:
        said = ", ".join(f"{k}={v}" for k, v in overrides.items())
        raise ConfigError(
            f"{name}{f' with {said}' if said else ''} has about {params:,} parameters (position tables included), "
            f"{gib:,.1f} GiB at fp32: `vitlab params` builds the model to count it and builds at most "
            f"{limit_gib:g} GiB (--max-gib); raise --max-gib if this machine has the memory, or lower the sizes"
        )


ADAM_STATES = 2
"""Tensors AdamW keeps per trainable weight (its two moments), each the weight's size."""


def tuned_model(name: str, overrides: dict[str, Any], tune: str, options: TuneOptions | None = None) -> nn.Module:
    """The model registered as ``name`` built for the training mode ``tune`` (prompt tokens in its config when
    the mode needs them) and set up for it: frozen parts, adapters."""
    tuning = Tuning.of(tune, options)
    extra = tuning.model_overrides() if hasattr(get_config(name), "prompt_tokens") else {}
    return apply_tuning(build_registered(name, **{**extra, **overrides}), tuning)


def params_report(
    name: str,
    overrides: dict[str, Any],
    limit_gib: float = BUILD_LIMIT_GIB,
    tune: str | None = None,
    tune_options: TuneOptions | None = None,
) -> str:
    """The parameter table of the model registered as ``name`` (config fields replaced by ``overrides``) as
    text: one line per component with its size and count, the totals, and for a ViT the learned position
    table's share and the input stage against a 3x3 convolution. With a training mode ``tune``, the model
    carries its adapters, each row also counts what trains, and a line prices AdamW's state. Refuses a model
    over ``limit_gib`` GiB (:func:`check_build_size`) before building it."""
    check_build_size(name, overrides, limit_gib)
    model = build_registered(name, **overrides) if tune is None else tuned_model(name, overrides, tune, tune_options)
    rows = parameter_table(model)
    total, trainable = count_params(model, trainable_only=False), count_params(model)
    width = max(len("non-trainable"), *(len(r.component) for r in rows)) + 2
    size_width = max(len("size"), *(len(r.size) for r in rows)) + 2
    trains = tune is not None
    title = f"{name} ({type(model).__name__})" + (f", --tune {Tuning.of(tune, tune_options).label}" if tune else "")
    head = f"{'component':{width}}{'size':{size_width}}{'params':>12}" + (f"{'trainable':>12}" if trains else "")
    lines = [title, head]
    lines += [
        f"{r.component:{width}}{r.size:{size_width}}{r.params:>12,}" + (f"{r.trainable:>12,}" if trains else "")
        for r in rows
    ]
    for label, count in (("total", total), ("trainable", trainable), ("non-trainable", total - trainable)):
        lines.append(f"{label:{width + size_width}}{count:>12,}")
    if trains:
        state = ADAM_STATES * 4 * trainable
        lines.append(
            f"\n{trainable:,} of {total:,} parameters train ({trainable / total:.2%}); AdamW keeps "
            f"{ADAM_STATES} fp32 tensors per trainable weight: {state / 2**20:,.2f} MiB of optimiser state "
            f"(full fine-tuning: {ADAM_STATES * 4 * total / 2**20:,.2f} MiB)."
        )
    positions = trainable_position_params(model)
    if positions:
        fixed = total - positions
        lines.append(
            f"\nnote: {positions:,} of these are the learned position table. With fixed positions\n"
            f"(--set pos_embed=sincos2d) the same model has {total:,} - {positions:,} = {fixed:,} parameters."
        )
        if name in TEXTBOOK_TOTALS and not overrides:
            lines.append(f"{fixed:,} is {TEXTBOOK_TOTALS[name]}: it counts the positions as not trainable.")
    if isinstance(model, VisionTransformer):
        lines.append(conv_comparison(model, rows, positions))
    return "\n".join(lines)


def conv_comparison(model: VisionTransformer, rows: list[Row], positions: int) -> str:
    """The input stage priced against a 3x3 convolution of the same width on the same channels (a paragraph
    that starts with a blank line)."""
    c, d, k = model.config.in_chans, model.config.embed_dim, 3
    projection = next(r.params for r in rows if r.component == "patch projection")
    where = f" and {positions:,} on the position table" if positions else ""
    return (
        f"\nfor comparison: Conv2D({d}, {k}x{k}) on {c} channel{'s' * (c != 1)} = {k}*{k}*{c}*{d} + {d} = "
        f"{conv_params(c, d, k):,} parameters,\nthe price of a convolution's spatial prior; this ViT spends "
        f"{projection:,} on the patch projection{where}."
    )
