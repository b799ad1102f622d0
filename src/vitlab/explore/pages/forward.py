"""Forward page: one query token's way through the model, every number read from its modules, with
a head or a layer's attention knocked out on request.

One query's forward pass through a ViT, read from the model's own modules as it runs.

:func:`forward_view` runs the checkpoint once on an image with forward hooks on the patch embedding,
the position table, the chosen block and its attention layer, and returns the numbers of one token on
its way through: its pixels, the projection ``P*P*C -> D``, the position added, the class token, the
block's input, the query ``q`` of the chosen head and every key ``k`` and value ``v``, the scores
``q.k / sqrt(d_k)`` (the layer's own scale, mask and bias), the weights at temperature ``T``, the head's
``sum_i w_i v_i``, the attention output, the residual, the block output, and the prediction.

An :class:`Probe` may also change the run: the chosen head's softmax at temperature ``T``, the head
knocked out (its ``sum_i w_i v_i`` set to 0 before the output projection) or the layer's whole
attention knocked out (its output set to 0, so only the residual passes). The hook then returns the
changed output and the model runs on from it, so the block output and the prediction are the model's
own under that change. With ``T = 1`` and no knock-out the hook returns nothing: every number is the
unchanged model's (the tests compare them with :func:`vitlab.explain.record_attention` to 1e-5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from fastapi import APIRouter
from torch import nn

from ...layers.attention import MultiHeadSelfAttention
from ...layers.block import Block
from ...layers.patch_embed import PatchEmbedding
from ...ops.attention import merge_heads
from ...ops.patches import patchify
from ..arrays import encode_array
from ..images import RequestError
from ..loaded import Analysis, LoadedModel, forward_unsupported
from . import Context
from .attention import prediction, truth
from .tokens import prepared

KNOCKOUTS = ("none", "head", "layer")


@dataclass(frozen=True)
class Probe:
    """What to trace: block ``layer``, its head ``head``, the token ``token`` (prefix tokens first), the
    head's softmax temperature and what to knock out (``none``, ``head`` or ``layer``)."""

    layer: int
    head: int
    token: int
    temperature: float = 1.0
    knockout: str = "none"

    @property
    def changes(self) -> bool:
        """Whether the probe changes the model's run (else it only reads it)."""
        return self.temperature != 1.0 or self.knockout != "none"


def attention_scores(attn: MultiHeadSelfAttention, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The layer's scores ``(..., Nq, Nk)`` before the softmax, as its explicit path forms them: ``q.k``
    times ``1/sqrt(d)`` (or divided by the learned temperature of locality attention), the relative
    position bias added, masked keys at ``-inf``."""
    if attn.temperature is not None:
        scores = (q / attn.temperature) @ k.transpose(-2, -1)
    else:
        scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)
    mask = attn.score_mask(k.shape[-2], scores.dtype, scores.device)
    if mask is None:
        return scores
    return scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask


def scale_words(attn: MultiHeadSelfAttention) -> str:
    """How the layer scales ``q.k``, in words with its value."""
    if attn.temperature is not None:
        return f"q·k / τ, τ = {float(attn.temperature):.4g} (learned; locality attention masks each token's own key)"
    return f"q·k / √d_k = q·k / √{attn.head_dim} = q·k × {1 / math.sqrt(attn.head_dim):.4g}"


class Tracer:
    """Forward hooks that keep one run's intermediate tensors and apply a :class:`Probe`'s change."""

    def __init__(self, model: Any, probe: Probe) -> None:
        self.model, self.probe = model, probe
        self.kept: dict[str, torch.Tensor] = {}
        block = model.blocks[probe.layer]
        hooks = [
            model.patch_embed.register_forward_hook(self.keep("embedded")),
            model.pos_embed.register_forward_hook(self.keep("positioned")),
            block.register_forward_pre_hook(self.keep_input("block_input")),
            block.register_forward_hook(self.keep("block_output")),
            block.attn.register_forward_hook(self.attend, with_kwargs=True),
        ]
        if type(block) is Block:  # pre-norm: the second norm reads x + attention, the residual
            hooks.append(block.norm2.register_forward_pre_hook(self.keep_input("residual")))
        self.handles = hooks

    def keep(self, name: str):  # noqa: ANN201 - a hook
        def hook(module: nn.Module, args: Any, output: torch.Tensor) -> None:
            self.kept[name] = output.detach()

        return hook

    def keep_input(self, name: str):  # noqa: ANN201 - a hook
        def hook(module: nn.Module, args: tuple[Any, ...]) -> None:
            self.kept[name] = args[0].detach()

        return hook

    def attend(
        self, attn: MultiHeadSelfAttention, args: tuple[Any, ...], kwargs: dict[str, Any], output: torch.Tensor
    ) -> torch.Tensor | None:
        """Recompute the layer's attention from its own q, k, v; with a change, return the changed output."""
        x = args[0] if args else kwargs["x"]
        rope = args[1] if len(args) > 1 else kwargs.get("rope")
        probe, h = self.probe, self.probe.head
        q, k, v = attn.qkv_heads(x, rope)  # (1, H, N, d) each
        scores = attention_scores(attn, q, k)
        weights = scores.softmax(-1)
        if probe.temperature != 1.0:
            weights = weights.clone()
            weights[:, h] = (scores[:, h] / probe.temperature).softmax(-1)
        heads = weights @ v  # (1, H, N, d)
        if probe.knockout == "head":
            heads[:, h] = 0
        self.kept.update(normed=x, q=q, k=k, v=v, scores=scores, weights=weights, heads=heads.detach())
        if not probe.changes:
            self.kept["attention_output"] = output.detach()
            return None
        changed = attn.proj_drop(attn.proj(merge_heads(heads)))
        if probe.knockout == "layer":
            changed = torch.zeros_like(output)
        self.kept["attention_output"] = changed.detach()
        return changed

    def run(self, inputs: torch.Tensor) -> torch.Tensor:
        """The model's logits on ``inputs`` with the hooks on (all tokens computed in every block)."""
        try:
            with torch.no_grad():
                logits = self.model.forward_head(self.model.forward_features(inputs))
        finally:
            for handle in self.handles:
                handle.remove()
        return logits.float()


def parse_probe(entry: LoadedModel, query: str, layer: int, head: int, temperature: float, knockout: str) -> Probe:
    """The :class:`Probe` of the request's parameters, checked against the model (which must be one
    :func:`forward_unsupported` accepts)."""
    reason = forward_unsupported(entry.model)
    if reason:
        raise RequestError(reason)
    cfg = entry.config
    prefix = int(getattr(entry.model, "num_prefix_tokens", 0))
    grid = cfg.grid
    if query == "cls":
        if not getattr(cfg, "class_token", False):
            raise RequestError(f"{entry.name} has no class token: choose a patch as the query")
        token = 0
    elif query.isdigit() and int(query) < grid[0] * grid[1]:
        token = prefix + int(query)
    else:
        raise RequestError(f"query must be 'cls' or a patch index in [0, {grid[0] * grid[1]}), got {query!r}")
    if not 0 <= layer < cfg.depth:
        raise RequestError(f"layer must lie in [0, {cfg.depth}), got {layer}")
    if not 0 <= head < cfg.num_heads:
        raise RequestError(f"head must lie in [0, {cfg.num_heads}), got {head}")
    if not (0.01 <= temperature <= 100.0):
        raise RequestError(f"temperature must lie in [0.01, 100], got {temperature}")
    if knockout not in KNOCKOUTS:
        raise RequestError(f"knockout must be one of {KNOCKOUTS}, got {knockout!r}")
    return Probe(layer, head, token, temperature, knockout)


def _vector(values: torch.Tensor) -> dict[str, Any]:
    """A vector (or matrix), encoded, with its finite range."""
    finite = values[torch.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.numel() else (0.0, 0.0)
    return {**encode_array(values), "range": [low, high]}


def embedding_stage(entry: LoadedModel, analysis: Analysis, kept: dict[str, torch.Tensor], probe: Probe) -> dict:
    """The token's way in: its pixels (as read, normalised), the projection, the embedding, its position,
    the sum, and the prefix tokens (a class token is prepended, not projected)."""
    model: Any = entry.model
    prefix = int(getattr(model, "num_prefix_tokens", 0))
    patch = probe.token - prefix
    out: dict[str, Any] = {"patch": patch if patch >= 0 else None}
    tokenizer = model.patch_embed
    if patch >= 0 and isinstance(tokenizer, PatchEmbedding):
        size = tokenizer.patch_size
        rows = patchify(analysis.inputs, size, pad=tokenizer.pad)[0]
        out["pixels"] = _vector(patchify(analysis.image, size, pad=tokenizer.pad)[0, patch])
        out["normalised"] = _vector(rows[patch])
        out["weight"] = _vector(tokenizer.linear_weight().detach())
        out["bias"] = None if tokenizer.proj.bias is None else _vector(tokenizer.proj.bias.detach())
    if patch >= 0:
        embedded, positioned = kept["embedded"][0, patch], kept["positioned"][0, patch]
        out["embedded"] = _vector(embedded)
        out["position"] = _vector(positioned - embedded)
        out["positioned"] = _vector(positioned)
    tokens = model.prefix_tokens(1)
    out["prefix"] = [_vector(t[0, i].detach()) for t in tokens for i in range(t.shape[1])]
    return out


def forward_view(entry: LoadedModel, analysis: Analysis, probe: Probe) -> dict[str, Any]:
    """One token's forward pass (see the module docstring): every stage's numbers, the model's prediction
    without and with the probe's change, and the labels of the keys."""
    reason = forward_unsupported(entry.model)
    if reason:
        raise RequestError(reason)
    model: Any = entry.model
    tracer = Tracer(model, probe)
    logits = tracer.run(analysis.inputs)
    kept, i, h = tracer.kept, probe.token, probe.head
    attn = model.blocks[probe.layer].attn
    model_weights = kept["scores"][0, h, i].softmax(-1)
    return {
        "model": entry.index,
        "layer": probe.layer,
        "head": probe.head,
        "token": i,
        "temperature": probe.temperature,
        "knockout": probe.knockout,
        "prefix": int(getattr(entry.model, "num_prefix_tokens", 0)),
        "grid": list(entry.config.grid),
        "keys": kept["k"].shape[-2],
        "head_dim": attn.head_dim,
        "scale": scale_words(attn),
        "embedding": embedding_stage(entry, analysis, kept, probe),
        "block_input": _vector(kept["block_input"][0, i]),
        "normed": _vector(kept["normed"][0, i]),
        "q": _vector(kept["q"][0, h, i]),
        "k": _vector(kept["k"][0, h]),
        "v": _vector(kept["v"][0, h]),
        "scores": _vector(kept["scores"][0, h, i]),
        "weights": _vector(kept["weights"][0, h, i]),
        "model_weights": _vector(model_weights),
        "uniform": 1.0 / kept["k"].shape[-2],
        "head_output": _vector(kept["heads"][0, h, i]),
        "attention_output": _vector(kept["attention_output"][0, i]),
        "residual": _vector(kept["residual"][0, i]) if "residual" in kept else None,
        "block_output": _vector(kept["block_output"][0, i]),
        "prediction": prediction(entry, logits, top=len(entry.classes)),
        "original": prediction(entry, analysis.logits, top=len(entry.classes)),
        "logits": encode_array(logits[0]),
        "original_logits": encode_array(analysis.logits[0]),
    }


def router(ctx: Context) -> APIRouter:
    api = APIRouter()

    @api.get("/api/forward")
    def forward(
        model: int,
        ref: str,
        query: str = "0",
        layer: int = 0,
        head: int = 0,
        temperature: float = 1.0,
        knockout: str = "none",
        invert: bool = False,
        image: bool = True,
    ) -> dict[str, Any]:
        """The probe's trace; ``image=false`` leaves out the image the model read (the page has it)."""
        entry, original = ctx.shelf.get(model), ctx.book.get(ref)
        probe = parse_probe(entry, query, layer, head, temperature, knockout)
        with ctx.shelf.lock:
            analysis = ctx.shelf.analyse(entry, prepared(original, entry, invert))
            view = forward_view(entry, analysis, probe)
            return {
                "ref": ref,
                "image": encode_array(analysis.image[0]) if image else None,
                **view,
                "truth": truth(entry, original, view["prediction"]["class"]),
                "original_truth": truth(entry, original, view["original"]["class"]),
            }

    return api
