"""Attention page: a checkpoint's attention from a query per layer and head, what it sees, its
explanation maps, and its attention layer by layer (raw, mixed, rolled out).

What the Attention page shows of a checkpoint: its attention, its prediction, its explanation maps.

- :func:`parse_query`, :func:`tempered`: the query a request names, and attention at a temperature.
- :func:`prediction`, :func:`truth`: the predicted classes, and the image's true label beside them.
- :func:`attention_view`: a checkpoint's attention from one query, per layer and head, at a temperature
  (:func:`no_attention` for a model without self-attention layers).
- :func:`maps_view`: rollout, gradient and occlusion maps (:mod:`vitlab.explain`).

What the model reads of the image (inverted, padded, normalised) is :mod:`vitlab.explore.pages.tokens`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

import torch
from fastapi import APIRouter
from torch import nn

from ...explain.maps import (
    ATTENTION_METHODS,
    gradient_map,
    head_statistics,
    num_prefix_tokens,
    occlusion_map,
    query_attention,
    query_rows,
    rollout_map,
    to_grid,
)
from ...layers.patch_embed import PatchTokenizer
from ..arrays import encode_array
from ..images import LabeledImage, RequestError
from ..layerwise import Query, layerwise_view, mean_distances
from ..loaded import Analysis, LoadedModel
from ..ranges import check_range
from . import Context
from .tokens import input_view, prepared

OCCLUSION_SQUARES = 64  # squares occluded at most (one forward pass each): 14x14 patches are occluded 2x2 at a time


def occlusion_factor(grid: tuple[int, int]) -> int:
    """The side ``k`` (in cells) of the squares :func:`occlusion` occludes a ``grid`` in: the smallest that makes
    at most :data:`OCCLUSION_SQUARES` squares."""
    k = 1
    while -(-grid[0] // k) * -(-grid[1] // k) > OCCLUSION_SQUARES:
        k += 1
    return k


def occlusion(model: nn.Module, inputs: torch.Tensor, target: torch.Tensor, patch: int, grid: tuple[int, int]):
    """:func:`~vitlab.explain.maps.occlusion_map` over ``grid`` ``(gh, gw)`` within a budget: a grid of more than
    :data:`OCCLUSION_SQUARES` cells is occluded in squares of ``k x k`` cells (the smallest ``k`` that fits; one
    forward pass per square), each cell given its square's value. Returns the map ``(gh, gw)`` and ``k``."""
    k = occlusion_factor(grid)
    value = occlusion_map(model, inputs, target, patch * k)[0]
    return value.repeat_interleave(k, 0).repeat_interleave(k, 1)[: grid[0], : grid[1]], k


def map_set(
    model: nn.Module,
    analysis: Analysis,
    weights: list[torch.Tensor],
    target: torch.Tensor,
    query: Query,
    patch: int,
    grid: tuple[int, int],
    cache: dict[tuple, Any] | None = None,
    methods: Sequence[str] | None = None,
) -> dict[str, torch.Tensor]:
    """``{method: (gh, gw)}`` of ``model`` for the analysed input and class ``target``: last-layer attention
    (head mean) and rollout from ``query`` when ``weights`` are given, gradient and occlusion (:func:`occlusion`)
    always; only ``methods`` where they are named (as :func:`methods_asked` checks them). Each map is kept in
    ``cache`` (the analysis's own for the trained model: a map is computed once per image, and once per query where
    it depends on one), so a page that asks for its maps one at a time computes each once."""
    inputs = analysis.inputs
    cache = {} if cache is None else cache
    prefix = num_prefix_tokens(model)
    computes: dict[str, tuple[tuple, Any]] = {}
    if weights:
        computes["attention"] = (
            ("attention", query),
            lambda: query_attention(weights[-1:], query, prefix, grid)[0, 0].mean(0),
        )
        computes["rollout"] = (("rollout", query), lambda: rollout_map(weights, query, prefix, grid)[0])
    computes["gradient"] = (("gradient",), lambda: gradient_map(model, inputs, target, patch)[0])
    computes["occlusion"] = (("occlusion",), lambda: occlusion(model, inputs, target, patch, grid)[0])
    maps: dict[str, torch.Tensor] = {}
    for method in computes if methods is None else methods:
        key, compute = computes[method]
        if key not in cache:
            try:
                cache[key] = compute().detach()
            except ValueError as err:
                raise RequestError(str(err)) from err
        maps[method] = cache[key]
    return maps


def map_methods(analysis: Analysis) -> list[str]:
    """The maps :func:`map_set` makes of an analysis: attention and rollout where the model has attention layers,
    gradient and occlusion always, cheapest first (the order a page asks for them one at a time)."""
    return [*(ATTENTION_METHODS if analysis.weights else ()), "gradient", "occlusion"]


def methods_asked(offered: Sequence[str], method: str | None) -> list[str]:
    """Every method ``offered`` (``method`` None: the whole answer), or the one piece ``method`` names."""
    if method is None:
        return list(offered)
    if method not in offered:
        raise RequestError(f"method must be one of {', '.join(offered)} for this model, got {method!r}")
    return [method]


def encoded(maps: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Each map encoded with its value range."""
    return {
        method: {"values": encode_array(value), "range": [float(value.min()), float(value.max())]}
        for method, value in maps.items()
    }


def _stats(rows: torch.Tensor) -> dict[str, Any]:
    """:func:`~vitlab.explain.maps.head_statistics` of attention rows ``(..., N)``, encoded."""
    return {name: encode_array(values) for name, values in head_statistics(rows).items()}


def patch_grid(entry: LoadedModel) -> tuple[int, int]:
    """The patch grid ``(gh, gw)`` of ``entry``'s model at its image size."""
    return cast(PatchTokenizer, entry.model.patch_embed).grid_size(*entry.image_size)


def parse_query(text: str) -> Query:
    """``"cls"``, ``"mean"`` or a patch index as text -> the query :mod:`vitlab.explain` takes."""
    if text in ("cls", "mean"):
        return text
    if text.isdigit():
        return int(text)
    raise RequestError(f"query must be 'cls', 'mean' or a patch index, got {text!r}")


def tempered(weights: torch.Tensor, temperature: float) -> torch.Tensor:
    """Attention weights ``(..., N)`` with their logits divided by ``temperature``.

    ``log w`` equals the logits up to a constant per row, which softmax ignores, so
    ``softmax(log w / T)`` is exactly ``softmax(logits / T)``. ``T = 1`` returns ``weights``.
    """
    if temperature == 1.0:
        return weights
    return torch.softmax(weights.double().log() / temperature, dim=-1).to(weights.dtype)


def prediction(entry: LoadedModel, logits: torch.Tensor, top: int = 5) -> dict[str, Any]:
    """The predicted class, its softmax confidence, the ``top`` classes with probabilities, and every
    class's probability in class order."""
    probs = logits[0].softmax(-1)
    values, index = probs.topk(min(top, probs.numel()))
    return {
        "class": entry.classes[int(index[0])],
        "index": int(index[0]),
        "confidence": float(values[0]),
        "top": [{"class": entry.classes[int(i)], "probability": float(v)} for v, i in zip(values, index)],
        "probabilities": probs.tolist(),
    }


def truth(entry: LoadedModel, picture: LabeledImage, predicted: str) -> dict[str, Any]:
    """The image's true label beside the prediction: ``correct`` is ``True`` / ``False`` when the image
    comes from the model's own dataset, else ``None`` with a ``note`` saying why it cannot be judged."""
    source = picture.ref.partition(":")[0]
    if picture.label is None:
        return {"label": None, "correct": None, "note": "an uploaded or drawn image has no true label"}
    if source not in (entry.samples, entry.dataset) or picture.label not in entry.classes:
        return {
            "label": picture.label,
            "correct": None,
            "note": f"a {source} image: its label is not one of the classes {entry.name} was trained on",
        }
    return {"label": picture.label, "correct": picture.label == predicted, "note": None}


def no_attention(entry: LoadedModel, analysis: Analysis) -> dict[str, Any]:
    """What the Attention page shows of a model without self-attention layers: its prediction and why
    there are no attention weights (its gradient and occlusion maps come from :func:`maps_view`)."""
    return {
        "model": entry.index,
        "attention": False,
        "reason": f"{entry.name} has no self-attention layers, so it has no attention weights to show: "
        f"its gradient and occlusion maps below explain it",
        "image": encode_array(analysis.image[0]),
        "grid": list(entry.grid),
        "prediction": prediction(entry, analysis.logits),
    }


def attention_view(entry: LoadedModel, analysis: Analysis, query: Query, temperature: float = 1.0) -> dict[str, Any]:
    """The query's attention in every layer and head, the logits divided by ``temperature``.

    ``heat`` ``(L, H, gh, gw)`` are the weights on the patches, ``rows`` ``(L, H, N)`` on every
    key (prefix tokens first), ``stats`` the per-head statistics of those rows, ``distance`` each
    head's mean attention distance in patches over every patch query (at temperature 1) and
    ``uniform`` the weight ``1/N`` of a head that ignores content. A model without attention layers
    gets :func:`no_attention`.
    """
    if not analysis.weights:
        return no_attention(entry, analysis)
    check_range("temperature", temperature, 0.01, 100.0)
    prefix, grid = num_prefix_tokens(entry.model), patch_grid(entry)
    weights = torch.stack([tempered(w, temperature) for w in analysis.weights], 1)  # (1, L, H, N, N)
    try:
        rows = query_rows(weights, query, prefix)[0]  # (L, H, N)
    except ValueError as err:
        raise RequestError(str(err)) from err
    heat = to_grid(rows, prefix, grid)
    return {
        "model": entry.index,
        "attention": True,
        "query": query,
        "temperature": temperature,
        "grid": list(grid),
        "prefix": prefix,
        "keys": rows.shape[-1],
        "uniform": 1.0 / rows.shape[-1],
        "heat": encode_array(heat),
        "heat_max": float(heat.max()),
        "rows": encode_array(rows),
        "stats": _stats(rows),
        "distance": encode_array(mean_distances(analysis.weights, prefix, grid)),
        "image": encode_array(analysis.image[0]),
        "prediction": prediction(entry, analysis.logits),
    }


def maps_view(entry: LoadedModel, analysis: Analysis, query: Query, method: str | None = None) -> dict[str, Any]:
    """Rollout (attention models, from ``query``), gradient and occlusion maps ``(gh, gw)`` for the
    predicted class, each with its value range (only ``method``'s where one is named: a page fills its maps in one
    at a time); computed once per image (rollout once per query) and cached (:func:`map_set`). A model without
    patches (a CNN) is scored on squares of ``entry.map_patch`` pixels; a large grid is occluded in squares of
    several patches (:func:`occlusion`, whose side in pixels ``occlusion_square`` says)."""
    patch = entry.map_patch
    target = analysis.logits.argmax(-1)
    methods = methods_asked([m for m in map_methods(analysis) if m != "attention"], method)
    maps = map_set(entry.model, analysis, analysis.weights, target, query, patch, entry.grid, analysis.maps, methods)
    return {
        "model": entry.index,
        "query": query,
        "target": entry.classes[int(target)],
        "patch": patch,
        "grid": list(entry.grid),
        "patches_of_the_model": entry.patch_size is not None,
        "occlusion_square": patch * occlusion_factor(entry.grid),
        "maps": encoded(maps),
    }


LayerView = Callable[[LoadedModel, Analysis, Query], dict[str, Any]]  # the maps or the layers of a query


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    book, shelf = ctx.book, ctx.shelf

    @api.get("/api/attention")
    def attention(
        model: int,
        ref: str,
        query: str = "mean",
        temperature: float = 1.0,
        invert: bool = False,
        keep_aspect: bool = False,
    ) -> dict[str, Any]:
        entry, original = shelf.get(model), book.get(ref)
        reference = shelf.reference(entry)
        with shelf.lock:
            analysis = shelf.analyse(entry, prepared(original, entry, invert, keep_aspect))
            view = attention_view(entry, analysis, parse_query(query), temperature)
            return {
                "ref": ref,
                **view,
                "truth": truth(entry, original, view["prediction"]["class"]),
                "seen": input_view(entry, analysis, original.image, reference, invert, keep_aspect),
            }

    def explained(view: LayerView, model: int, ref: str, query: str, invert: bool, keep_aspect: bool) -> dict[str, Any]:
        """``view`` of model ``model``'s analysis of image ``ref`` from ``query``."""
        entry = shelf.get(model)
        picture = prepared(book.get(ref), entry, invert, keep_aspect)
        with shelf.lock:
            return {"ref": ref, **view(entry, shelf.analyse(entry, picture), parse_query(query))}

    @api.get("/api/maps")
    def maps(
        model: int,
        ref: str,
        query: str = "mean",
        invert: bool = False,
        keep_aspect: bool = False,
        method: str | None = None,
    ) -> dict[str, Any]:
        return explained(partial(maps_view, method=method), model, ref, query, invert, keep_aspect)

    @api.get("/api/layers")
    def layers(
        model: int, ref: str, query: str = "mean", invert: bool = False, keep_aspect: bool = False
    ) -> dict[str, Any]:
        return explained(layerwise_view, model, ref, query, invert, keep_aspect)

    return api
