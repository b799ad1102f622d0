"""What the Attention page shows of a checkpoint: its attention, its prediction, its explanation maps.

- :func:`parse_query`, :func:`tempered`: the query a request names, and attention at a temperature.
- :func:`prediction`, :func:`truth`: the predicted classes, and the image's true label beside them.
- :func:`attention_view`: a checkpoint's attention from one query, per layer and head, at a temperature
  (:func:`no_attention` for a model without self-attention layers).
- :func:`maps_view`: rollout, gradient and occlusion maps (:mod:`vitlab.explain`).

What the model reads of the image (inverted, padded, normalised) is :mod:`vitlab.explore.input_views`.
"""

from __future__ import annotations

from typing import Any, cast

import torch

from ..explain.maps import head_statistics, num_prefix_tokens, query_rows, to_grid
from ..layers.patch_embed import PatchTokenizer
from .arrays import encode_array
from .images import LabeledImage, RequestError
from .layerwise import Query, mean_distances
from .limits import map_set, occlusion_factor
from .loaded import Analysis, LoadedModel
from .ranges import check_range


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


def maps_view(entry: LoadedModel, analysis: Analysis, query: Query) -> dict[str, Any]:
    """Rollout (attention models, from ``query``), gradient and occlusion maps ``(gh, gw)`` for the
    predicted class, each with its value range; computed once per image (rollout once per query)
    and cached (:func:`~vitlab.explore.limits.map_set`). A model without patches (a CNN) is scored on squares
    of ``entry.map_patch`` pixels; a large grid is occluded in squares of several patches
    (:func:`~vitlab.explore.limits.occlusion`, whose side in pixels ``occlusion_square`` says)."""
    patch = entry.map_patch
    target = analysis.logits.argmax(-1)
    every = map_set(entry.model, analysis, analysis.weights, target, query, patch, entry.grid, analysis.maps)
    maps = {
        method: {"values": encode_array(value), "range": [float(value.min()), float(value.max())]}
        for method, value in every.items()
        if method != "attention"
    }
    return {
        "model": entry.index,
        "query": query,
        "target": entry.classes[int(target)],
        "patch": patch,
        "grid": list(entry.grid),
        "patches_of_the_model": entry.patch_size is not None,
        "occlusion_square": patch * occlusion_factor(entry.grid),
        "maps": maps,
    }
