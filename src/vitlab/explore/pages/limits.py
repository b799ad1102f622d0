"""Limits page: what attention maps cannot tell. The model's most confident mistakes, the maps of a
model whose weights are noise beside the trained model's, and the deletion curve of each map.

What attention maps cannot tell: confident mistakes, maps of a model whose weights are noise, and
how fast each map's patches destroy the prediction.

- :func:`verdicts`: a model on a whole sample split (the images it was never trained on): each image's
  prediction, confidence and whether it is right; the most confident mistakes and right answers.
- :func:`randomised_view`: the maps of the same image by a copy of the model whose every weight tensor
  is replaced by noise of its own mean and spread (:func:`vitlab.explain.faithfulness.randomise_`, the
  ``--audit`` sanity check of Adebayo et al. 2018), beside the trained model's, with their Spearman rank
  correlation (:func:`vitlab.explain.faithfulness.spearman`). A map that barely changes shows the image, not
  the model.
- :func:`deletion_view`: deletion curves (as :func:`vitlab.explain.faithfulness.deletion_insertion` draws them): the
  probability of the predicted class as the patches are set to the mean image, most important first
  by each map (attention, rollout, gradient, occlusion), and by random orders; the area under each.

Each route answers the whole panel, or one piece of it (``method``: one map, one map of both models, one deletion
curve), so that the page fills a panel in piece by piece on a model too slow to answer it at once.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from fastapi import APIRouter
from torch import nn

from ...data import ImageDataset
from ...explain.faithfulness import curve_area, randomise_, ranking, spearman, step_counts
from ...explain.maps import ATTENTION_METHODS, masked_probs
from ...explain.record import attention_weights
from ..images import RequestError, model_images
from ..loaded import Analysis, LoadedModel
from . import Context
from .attention import (
    OCCLUSION_SQUARES,
    encoded,
    map_methods,
    map_set,
    methods_asked,
    parse_query,
    prediction,
    truth,
)

Query = str | int
SHOWN = 12  # mistakes and right answers listed
RANDOM_ORDERS = 8  # random patch orders averaged for the reference deletion curve
DELETION_STEPS = 16  # points of a deletion curve at most (one forward pass per point and order)
RANDOM_SEED = 0
BATCH = 256


def verdicts(entry: LoadedModel, data: ImageDataset, source: str) -> dict[str, Any]:
    """``entry`` on every image of ``data`` (a sample split of ``source``): accuracy, and the
    :data:`SHOWN` most confident mistakes and right answers, each ``{ref, label, predicted, confidence}``."""
    if source not in (entry.samples, entry.dataset) or list(data.classes) != list(entry.classes):
        raise RequestError(
            f"{source}'s classes are not those {entry.name} was trained on ({entry.dataset}): "
            f"choose the model's own dataset to see its mistakes"
        )
    probs = []
    with torch.no_grad():
        for start in range(0, len(data), BATCH):
            images = model_images(data.images[start : start + BATCH], entry.preprocess)
            probs.append(entry.model(entry.statistics.normalize(images)).float().softmax(-1))
    confidence, predicted = torch.cat(probs).max(-1)
    right = predicted == data.labels
    rows = [
        {
            "ref": f"{source}:{i}",
            "label": data.classes[int(data.labels[i])],
            "predicted": data.classes[int(predicted[i])],
            "confidence": float(confidence[i]),
        }
        for i in range(len(data))
    ]
    by_confidence = confidence.argsort(descending=True).tolist()
    return {
        "model": entry.index,
        "source": source,
        "images": len(data),
        "accuracy": float(right.float().mean()),
        "mistakes": [rows[i] for i in by_confidence if not right[i]][:SHOWN],
        "right": [rows[i] for i in by_confidence if right[i]][:SHOWN],
        "wrong_count": int((~right).sum()),
    }


def randomised_model(entry: LoadedModel) -> nn.Module:
    """A copy of ``entry``'s model with every weight tensor replaced by seeded noise of its own mean and
    spread (single numbers, such as a temperature, kept)."""
    model = copy.deepcopy(entry.model).eval()
    randomise_(model.parameters(), torch.Generator().manual_seed(RANDOM_SEED))
    return model


def randomised_view(
    entry: LoadedModel, analysis: Analysis, random: nn.Module, query: Query, trained: dict[str, torch.Tensor]
) -> dict[str, Any]:
    """The maps of the trained model (``trained``, computed once per image) and the same maps of ``random`` (the
    :func:`randomised_model`) for the trained model's predicted class, and each pair's rank correlation."""
    target = analysis.logits.argmax(-1)
    with torch.no_grad():
        if any(m in ATTENTION_METHODS for m in trained):
            logits, weights = attention_weights(random, analysis.inputs)
        else:
            logits, weights = random(analysis.inputs), []
    weights = [w.float() for w in weights]
    noise = map_set(random, analysis, weights, target, query, entry.map_patch, entry.grid, methods=list(trained))
    random_probs = logits.float().softmax(-1)[0]
    rho = {m: float(spearman(trained[m][None], noise[m][None])[0]) for m in trained}
    return {
        "model": entry.index,
        "query": query,
        "target": entry.classes[int(target)],
        "trained": encoded(trained),
        "randomised": encoded(noise),
        "spearman": {m: (None if v != v else v) for m, v in rho.items()},  # NaN (a constant map) as null
        "randomised_prediction": {
            "class": entry.classes[int(random_probs.argmax())],
            "confidence": float(random_probs.max()),
        },
    }


def deletion_curves(
    model: nn.Module, inputs: torch.Tensor, orders: torch.Tensor, target: torch.Tensor, patch: int
) -> torch.Tensor:
    """The deletion half of :func:`vitlab.explain.faithfulness.deletion_insertion` for one input ``(1, C, H, W)`` and
    many patch orders ``(M, N)``, in one batch: ``(M, S + 1)``, point ``s`` the class-``target`` probability with
    the first ``s`` patches of the order set to the mean image (:func:`~vitlab.explain.maps.masked_probs`)."""
    m, n = orders.shape
    counts = step_counts(n, min(n, DELETION_STEPS))
    rank = torch.empty_like(orders).scatter_(1, orders, torch.arange(n).expand(m, n))
    keep = rank[:, None, :] >= counts[None, :, None]  # (M, S + 1, N): not among the first s
    copies = inputs.expand(m, *inputs.shape[1:])
    return masked_probs(model, copies, keep, target.expand(m), patch)


def deletion_view(
    entry: LoadedModel, analysis: Analysis, maps: dict[str, torch.Tensor], with_random: bool = True
) -> dict[str, Any]:
    """Deletion curves ``(S + 1)`` of the predicted class for every map ``(gh, gw)`` of ``maps`` and (``with_random``)
    for the mean of :data:`RANDOM_ORDERS` seeded random orders (half as many on a grid of more than
    :data:`OCCLUSION_SQUARES` patches; the answer's ``random_orders`` says how many), with the area under each (lower:
    the map found the evidence sooner)."""
    target = analysis.logits.argmax(-1)
    n = math.prod(entry.grid)
    generator = torch.Generator().manual_seed(RANDOM_SEED)
    orders_wanted = RANDOM_ORDERS if n <= OCCLUSION_SQUARES else RANDOM_ORDERS // 2  # a large grid: half as many
    shuffles = [torch.randperm(n, generator=generator) for _ in range(orders_wanted if with_random else 0)]
    orders = torch.cat([*(ranking(value[None]) for value in maps.values()), *(s[None] for s in shuffles)])  # (M+R, N)
    deleted = deletion_curves(entry.model, analysis.inputs, orders, target, entry.map_patch)
    curves = dict(zip(maps, deleted[: len(maps)]))
    if shuffles:
        curves["random"] = deleted[len(maps) :].mean(0)
    return {
        "model": entry.index,
        "target": entry.classes[int(target)],
        **({"random_orders": len(shuffles)} if shuffles else {}),
        "patches": n,
        "removed": step_counts(n, min(n, DELETION_STEPS)).tolist(),
        "curves": {method: curve.tolist() for method, curve in curves.items()},
        "area": {method: float(curve_area(curve)) for method, curve in curves.items()},
    }


def router(ctx: Context) -> APIRouter:
    api = APIRouter()
    book, shelf = ctx.book, ctx.shelf

    def trained_maps(entry: LoadedModel, analysis: Analysis, query: Query, methods: list[str]) -> dict[str, Any]:
        """The trained model's maps ``methods`` of the analysed image (each cached with the analysis)."""
        target = analysis.logits.argmax(-1)
        return map_set(
            entry.model, analysis, analysis.weights, target, query, entry.map_patch, entry.grid, analysis.maps, methods
        )

    @api.get("/api/limits/verdicts")
    def judged(model: int, source: str) -> dict[str, Any]:
        entry, data = shelf.get(model), book.split(source)
        return shelf.memo(("verdicts", entry.index, source), lambda: verdicts(entry, data, source))

    @api.get("/api/limits/maps")
    def maps(model: int, ref: str, query: str = "mean", method: str | None = None) -> dict[str, Any]:
        entry, picture, parsed = shelf.get(model), book.get(ref), parse_query(query)
        with shelf.lock:
            analysis = shelf.analyse(entry, picture)
            methods = methods_asked(map_methods(analysis), method)
            predicted = prediction(entry, analysis.logits)
            return {
                "ref": ref,
                "model": entry.index,
                "grid": list(entry.grid),
                "target": predicted["class"],
                "maps": encoded(trained_maps(entry, analysis, parsed, methods)),
                "prediction": predicted,
                "truth": truth(entry, picture, predicted["class"]),
            }

    @api.get("/api/limits/randomised")
    def randomised(model: int, ref: str, query: str = "mean", method: str | None = None) -> dict[str, Any]:
        entry, picture, parsed = shelf.get(model), book.get(ref), parse_query(query)
        with shelf.lock:
            analysis = shelf.analyse(entry, picture)
            trained = trained_maps(entry, analysis, parsed, methods_asked(map_methods(analysis), method))
            view = randomised_view(entry, analysis, shelf.randomised(entry), parsed, trained)
            predicted = prediction(entry, analysis.logits)
            return {"ref": ref, **view, "prediction": predicted, "truth": truth(entry, picture, predicted["class"])}

    @api.get("/api/limits/deletion")
    def deletion(model: int, ref: str, query: str = "mean", method: str | None = None) -> dict[str, Any]:
        entry, picture, parsed = shelf.get(model), book.get(ref), parse_query(query)
        with shelf.lock:
            analysis = shelf.analyse(entry, picture)
            methods = methods_asked([*map_methods(analysis), "random"], method)
            maps = trained_maps(entry, analysis, parsed, [m for m in methods if m != "random"])
            return {"ref": ref, **deletion_view(entry, analysis, maps, "random" in methods)}

    return api
