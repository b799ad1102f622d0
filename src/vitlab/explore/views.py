"""What each page shows, computed by vitlab's functions: JSON-ready dicts, tensors encoded.

- :func:`tokens_view`: an image cut into patches (``patchify``, ``num_tokens``) and what the token
  count costs (the cost model's full attention).
- :func:`attention_view`, :func:`maps_view`: a checkpoint's attention from one query, per layer and
  head, at a temperature; rollout, gradient and occlusion maps (:mod:`vitlab.explain`).
- :func:`prepared`, :func:`input_view`: the image as the model reads it (inverted, padded to its
  aspect on request), and what it then sees: resized, normalised, and how far from its training data.
- :func:`softmax_view`, :func:`mixing_view`, :func:`position_view`, :func:`position_dots_view`,
  :func:`local_attention_view`: the textbook's mechanics.
- :func:`cost_view`: every attention kind in :data:`~vitlab.analysis.cost.ATTENTION_COSTS` against
  resolution.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.nn.functional as F

from ..analysis.cost import ATTENTION_COSTS, TEXTBOOK_PAIRS, Workload, attention_cost, cost_table, flops, full_attention
from ..data import normalize
from ..explain.maps import (
    gradient_map,
    head_statistics,
    num_prefix_tokens,
    occlusion_map,
    query_rows,
    rollout_map,
    to_grid,
)
from ..layers.patch_embed import PatchTokenizer
from ..layers.position import LearnedPosition, RowColumnPosition, SinCosPosition
from ..ops.attention import attention_weights
from ..ops.patches import num_tokens, patchify
from ..ops.positions import sincos_1d, sincos_2d
from .arrays import encode_array
from .images import LabeledImage, RequestError
from .layerwise import mean_distances
from .loaded import Analysis, LoadedModel

Query = str | int
POSITION_KINDS = ("sincos", "learned", "random")
COST_METRICS = ("entries", "flops", "memory")
# Image sides for the cost chart, in patches: doubling, with the 1.5x steps between.
COST_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
# Cost series within this fraction of each other at every size draw as one line on a log chart
# spanning a few decades (5% is about the width of the line there).
COINCIDE = 0.05
# The normalised input of a training image has mean about 0 and std about 1; one whose mean is
# further than OOD_MEAN from 0, or whose std is outside OOD_STD, is far from what the model learned on.
OOD_MEAN = 0.75
OOD_STD = (0.5, 2.0)


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if not (low <= value <= high) or math.isnan(value):
        raise RequestError(f"{name} must lie in [{low}, {high}], got {value}")


def _stats(rows: torch.Tensor) -> dict[str, Any]:
    """:func:`~vitlab.explain.maps.head_statistics` of attention rows ``(..., N)``, encoded."""
    return {name: encode_array(values) for name, values in head_statistics(rows).items()}


# -- tokens -----------------------------------------------------------------------------------------


def tokens_view(image: torch.Tensor, patch: int) -> dict[str, Any]:
    """``image (1, C, H, W)`` cut into ``patch``-pixel patches (zero-padded bottom and right).

    Returns the grid, the padded size, the token matrix ``(N, P*P*C)``, the token count ``N``,
    full attention's entries ``N^2`` per head and layer, and their ratio to the textbook's
    first row (28x28 at patch 7).
    """
    _, c, h, w = image.shape
    _check_range("patch", patch, 1, min(h, w))
    tokens = num_tokens(h, w, patch, pad=True)
    grid = (-(-h // patch), -(-w // patch))
    matrix = patchify(image, patch, pad=True)[0]
    mix = full_attention(tokens, dim=matrix.shape[1], heads=1)
    reference = cost_table(TEXTBOOK_PAIRS[:1])[0]
    return {
        "patch": patch,
        "patch_range": [1, min(h, w)],
        "height": h,
        "width": w,
        "channels": c,
        "grid": list(grid),
        "padded": [grid[0] * patch, grid[1] * patch],
        "tokens": tokens,
        "token_width": matrix.shape[1],
        "matrix": encode_array(matrix),
        "entries": mix.entries,
        "score_flops": mix.score_flops,
        "reference": {
            "image": reference.image,
            "patch": reference.patch,
            "tokens": reference.tokens,
            "entries": reference.entries,
        },
        "ratio": mix.entries / reference.entries,
    }


# -- attention of a checkpoint -------------------------------------------------------------------


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


def _grid(entry: LoadedModel) -> tuple[int, int]:
    return cast(PatchTokenizer, entry.model.patch_embed).grid_size(*entry.image_size)


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
    if source != entry.dataset or picture.label not in entry.classes:
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
    _check_range("temperature", temperature, 0.01, 100.0)
    prefix, grid = num_prefix_tokens(entry.model), _grid(entry)
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


def pad_to_aspect(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``image (1, C, h, w)`` padded (centred) to the aspect of ``size (H, W)``, the padding filled
    per channel with the mean of the image's border, so it reads as background."""
    _, c, h, w = image.shape
    height, width = (h, -(-h * size[1] // size[0])) if h * size[1] >= w * size[0] else (-(-w * size[0] // size[1]), w)
    if (height, width) == (h, w):
        return image
    border = torch.cat([image[..., 0, :], image[..., -1, :], image[..., :, 0], image[..., :, -1]], -1).mean(-1)
    out = border[:, :, None, None].expand(1, c, height, width).clone()
    top, left = (height - h) // 2, (width - w) // 2
    out[..., top : top + h, left : left + w] = image
    return out


def prepared(
    picture: LabeledImage, entry: LoadedModel, invert: bool = False, keep_aspect: bool = False
) -> LabeledImage:
    """``picture`` as the model should read it: inverted (``1 - x``) and/or padded to the model's aspect
    (:func:`pad_to_aspect`, so the resize that follows does not stretch it). The reference names the
    options, so each variant is analysed, and cached, apart."""
    if not (invert or keep_aspect):
        return picture
    image = 1 - picture.image if invert else picture.image
    if keep_aspect:
        image = pad_to_aspect(image, entry.image_size)
    tags = [tag for tag, on in (("invert", invert), ("keep-aspect", keep_aspect)) if on]
    return LabeledImage(f"{picture.ref}|{'|'.join(tags)}", image, picture.label)


def domain_note(entry: LoadedModel, image: torch.Tensor, mean: float, std: float, inverted: bool = False) -> str | None:
    """A sentence when the normalised input's ``mean`` and ``std`` are far from the training images'
    (about 0 and 1; see :data:`OOD_MEAN`, :data:`OOD_STD`), else ``None``. ``image (1, C, H, W)`` is the
    fitted image in [0, 1], already inverted when ``inverted``: if its inverse would be nearer, the note
    says to invert it (or, when it is inverted already, to undo that)."""
    if abs(mean) <= OOD_MEAN and OOD_STD[0] <= std <= OOD_STD[1]:
        return None
    note = (
        f"This input is far from the images the model was trained on: its normalised mean is {mean:+.2f} and "
        f"its std {std:.2f}, where theirs are about 0 and 1. Read the prediction with care."
    )
    inverse = float(normalize(1 - image, entry.mean, entry.std).mean())
    if abs(inverse) < abs(mean) and abs(mean) > OOD_MEAN:
        if inverted:
            note += (
                f" Not inverted, its mean would be {inverse:+.2f}: the image was likely right as it was "
                f"(untick 'invert the image')."
            )
        else:
            note += (
                f" Inverted, its mean would be {inverse:+.2f}: its light and dark are likely swapped from the "
                f"training images' (try 'invert the image')."
            )
    return note


def input_view(
    entry: LoadedModel, analysis: Analysis, original: torch.Tensor, invert: bool = False, keep_aspect: bool = False
) -> dict[str, Any]:
    """What the model sees of ``original (1, C, h, w)``: the steps that made its input, the normalised
    input ``(C, H, W)`` and its range, the input's mean and std, and :func:`domain_note`."""
    _, c, h, w = original.shape
    size = entry.image_size
    steps = ["inverted: x becomes 1 − x"] if invert else []
    if c != entry.channels:
        steps.append(
            "colour to grey by luma (0.299 R + 0.587 G + 0.114 B)"
            if entry.channels == 1
            else "grey repeated into 3 channels"
        )
    if (h, w) != tuple(size):
        same_aspect = h * size[1] == w * size[0]
        how = (
            "padded to the model's aspect with the border's colour, then resized"
            if keep_aspect and not same_aspect
            else "resized"
        )
        stretched = "" if keep_aspect or same_aspect else " (stretched: 'keep the aspect ratio' pads it instead)"
        steps.append(f"{how} from {h}×{w} to {size[0]}×{size[1]}{stretched}")
    mean_words = ", ".join(f"{m:.3f}" for m in entry.mean)
    std_words = ", ".join(f"{s:.3f}" for s in entry.std)
    steps.append(f"normalised: (x − mean) / std with the training images' mean {mean_words} and std {std_words}")
    inputs = analysis.inputs[0]
    mean, std = float(inputs.mean()), float(inputs.std())
    return {
        "input": encode_array(inputs),
        "range": [float(inputs.min()), float(inputs.max())],
        "channels_words": "greyscale" if entry.channels == 1 else "RGB",
        "steps": steps,
        "mean": mean,
        "std": std,
        "out_of_domain": domain_note(entry, analysis.image, mean, std, invert),
    }


def maps_view(entry: LoadedModel, analysis: Analysis, query: Query) -> dict[str, Any]:
    """Rollout (attention models, from ``query``), gradient and occlusion maps ``(gh, gw)`` for the
    predicted class, each with its value range; computed once per image (rollout once per query)
    and cached. A model without patches (a CNN) is scored on squares of ``entry.map_patch`` pixels."""
    patch = entry.map_patch
    target = analysis.logits.argmax(-1)
    wanted: dict[str, tuple] = {"gradient": ("gradient",), "occlusion": ("occlusion",)}
    if analysis.weights:
        wanted = {"rollout": ("rollout", query), **wanted}
    maps = {}
    for method, key in wanted.items():
        if key not in analysis.maps:
            if method == "rollout":
                try:
                    value = rollout_map(analysis.weights, query, num_prefix_tokens(entry.model), _grid(entry))
                except ValueError as err:
                    raise RequestError(str(err)) from err
            elif method == "gradient":
                value = gradient_map(entry.model, analysis.inputs, target, patch)
            else:
                value = occlusion_map(entry.model, analysis.inputs, target, patch)
            analysis.maps[key] = value[0].detach()
        value = analysis.maps[key]
        maps[method] = {"values": encode_array(value), "range": [float(value.min()), float(value.max())]}
    return {
        "model": entry.index,
        "query": query,
        "target": entry.classes[int(target)],
        "patch": patch,
        "grid": list(entry.grid),
        "patches_of_the_model": entry.patch_size is not None,
        "maps": maps,
    }


# -- mechanics ----------------------------------------------------------------------------------------


def softmax_view(temperature: float = 1.0, keys: int = 16, dim: int = 16, seed: int = 0) -> dict[str, Any]:
    """One query against a row of ``keys`` random keys: scores ``q.k / sqrt(d)`` and the weights
    ``softmax(scores / T)`` by :func:`vitlab.ops.attention.attention_weights`, with their statistics."""
    _check_range("temperature", temperature, 0.01, 100.0)
    _check_range("keys", keys, 2, 256)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, 1, dim, generator=g)
    k = torch.randn(1, 1, keys, dim, generator=g)
    scores = (q @ k.transpose(-2, -1))[0, 0, 0] / math.sqrt(dim)
    weights = attention_weights(q, k, scale=1.0 / (temperature * math.sqrt(dim)))[0, 0, 0]
    return {
        "temperature": temperature,
        "keys": keys,
        "uniform": 1.0 / keys,
        "scores": encode_array(scores),
        "weights": encode_array(weights),
        "stats": {k: float(v) for k, v in head_statistics(weights).items()},
    }


def gaussian_attention(queries: torch.Tensor, keys: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """Row-stochastic ``(Q, K)``: ``A_ij = softmax_j(-|q_i - k_j|^2 / (2 h^2))`` for positions ``queries (Q, d)``
    and ``keys (K, d)``, attention as a Gaussian kernel smoother of bandwidth ``h``."""
    distance2 = ((queries[:, None, :] - keys[None, :, :]) ** 2).sum(-1)
    return torch.softmax(-distance2 / (2 * bandwidth**2), dim=-1)


def mixing_matrix(tokens: int, bandwidth: float) -> torch.Tensor:
    """:func:`gaussian_attention` ``(N, N)`` over token positions ``0 .. N-1`` (float64)."""
    position = torch.arange(tokens, dtype=torch.float64)[:, None]
    return gaussian_attention(position, position, bandwidth)


def mixing_view(bandwidth: float = 1.5, tokens: int = 24, seed: int = 0) -> dict[str, Any]:
    """Token mixing ``y = A v`` of a noisy step signal ``v`` by :func:`mixing_matrix`; ``reach`` is
    ``exp(entropy)`` of each row, the number of tokens it effectively averages, and ``mean_reach``
    its mean over rows."""
    _check_range("bandwidth", bandwidth, 0.05, 1000.0)
    _check_range("tokens", tokens, 2, 128)
    mixing = mixing_matrix(tokens, bandwidth)
    g = torch.Generator().manual_seed(seed)
    step = (torch.arange(tokens) >= tokens // 2).double()
    values = step + 0.3 * torch.randn(tokens, generator=g, dtype=torch.float64)
    reach = head_statistics(mixing)["entropy"].exp()
    return {
        "bandwidth": bandwidth,
        "tokens": tokens,
        "matrix": encode_array(mixing),
        "values": encode_array(values),
        "matrix_max": float(mixing.max()),
        "mixed": encode_array(mixing @ values),
        "row_sum_range": [float(mixing.sum(-1).min()), float(mixing.sum(-1).max())],
        "reach": encode_array(reach),
        "mean_reach": float(reach.mean()),
    }


def position_table(
    kind: str, grid: tuple[int, int], dim: int, base: float = 10000.0, seed: int = 0, entry: LoadedModel | None = None
) -> torch.Tensor:
    """Position vectors ``(gh*gw, D)``: 2-D sinusoids of frequency ``base``, the checkpoint's own
    table (``learned``; any absolute table the model has, at its grid), or seeded ``random`` ones."""
    if kind == "sincos":
        try:
            return sincos_2d(grid, dim, temperature=base)
        except ValueError as err:
            raise RequestError(str(err)) from err
    if kind == "random":
        return torch.randn(grid[0] * grid[1], dim, generator=torch.Generator().manual_seed(seed))
    if kind != "learned":
        raise RequestError(f"position kind must be one of {POSITION_KINDS}, got {kind!r}")
    if entry is None:
        raise RequestError(
            "learned positions come from a checkpoint: choose a model (start `vitlab explore --checkpoint RUN`)"
        )
    module = getattr(entry.model, "pos_embed", None)
    if not isinstance(module, (LearnedPosition, RowColumnPosition, SinCosPosition)):
        raise RequestError(
            f"{entry.name} adds no absolute position table (pos_embed="
            f"{getattr(entry.config, 'pos_embed', None)!r}): choose sincos or random"
        )
    with torch.no_grad():
        return module.table(_grid(entry))[0].detach().float()


def position_view(
    kind: str,
    grid: tuple[int, int] = (8, 8),
    dim: int = 64,
    base: float = 10000.0,
    seed: int = 0,
    reference: int = 0,
    entry: LoadedModel | None = None,
) -> dict[str, Any]:
    """Cosine similarity ``(N, N)`` between the position vectors of :func:`position_table` and its
    range, the reference patch's row on the grid, and the mean similarity of 4-neighbours and of
    all pairs of distinct patches."""
    if kind != "learned":
        _check_range("grid side", min(grid), 1, 32)
        _check_range("grid side", max(grid), 1, 32)
        _check_range("dim", dim, 4, 1024)
        _check_range("base", base, 1.0, 1e8)
    table = position_table(kind, grid, dim, base, seed, entry)
    if kind == "learned" and entry is not None:  # position_table refused a missing entry
        grid = _grid(entry)
    n = table.shape[0]
    _check_range("reference", reference, 0, n - 1)
    unit = F.normalize(table.double(), dim=-1)
    similarity = unit @ unit.T
    rows, cols = torch.div(torch.arange(n), grid[1], rounding_mode="floor"), torch.arange(n) % grid[1]
    adjacent = (rows[:, None] - rows[None]).abs() + (cols[:, None] - cols[None]).abs() == 1
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    return {
        "kind": kind,
        "grid": list(grid),
        "dim": table.shape[1],
        "base": base,
        "reference": reference,
        "similarity": encode_array(similarity),
        "range": [float(similarity.min()), float(similarity.max())],
        "reference_map": encode_array(similarity[reference].reshape(grid)),
        "adjacent": float(similarity[adjacent].mean()) if adjacent.any() else None,
        "all_pairs": float(similarity[off_diagonal].mean()) if n > 1 else None,
    }


def sinusoid_positions(positions: int, dim: int, scale: float = 1.0) -> torch.Tensor:
    """1-D transformer sinusoids ``(N, D)`` of positions ``0 .. N-1`` with every frequency times ``scale``:
    :func:`~vitlab.ops.positions.sincos_1d` at positions ``scale * i`` (float64)."""
    return sincos_1d(torch.arange(positions, dtype=torch.float64) * scale, dim, dtype=torch.float64)


def random_positions(positions: int, dim: int, seed: int = 0) -> torch.Tensor:
    """Seeded Gaussian position vectors ``(N, D)`` of variance 1/2 per entry, so their squared norm is
    ``D / 2`` on average, a sinusoid's exactly: a learned table as it starts (float64)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(positions, dim, generator=g, dtype=torch.float64) * math.sqrt(0.5)


def _dot_facts(dots: torch.Tensor, reference: int) -> dict[str, Any]:
    """Dot products ``(N, N)``, the reference's row, and the mean over the diagonal (squared norms),
    over neighbours ``|i - j| = 1`` and over all pairs ``i != j``."""
    n = dots.shape[0]
    offset = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    return {
        "dots": encode_array(dots),
        "row": encode_array(dots[reference]),
        "self": float(dots.diagonal().mean()),
        "neighbours": float(dots[offset.abs() == 1].mean()) if n > 1 else None,
        "all_pairs": float(dots[offset != 0].mean()) if n > 1 else None,
    }


def position_dots_view(
    positions: int = 32, dim: int = 64, scale: float = 1.0, seed: int = 0, reference: int = 0
) -> dict[str, Any]:
    """Pairwise dot products ``p_i . p_j`` ``(N, N)`` of 1-D sinusoidal positions at frequency ``scale``
    (:func:`sinusoid_positions`) beside random ones (:func:`random_positions`), with :func:`_dot_facts`
    of each and the largest magnitude of either, for one symmetric colour scale."""
    _check_range("positions", positions, 2, 256)
    _check_range("dim", dim, 2, 1024)
    _check_range("frequency scale", scale, 0.01, 100.0)
    _check_range("reference", reference, 0, positions - 1)
    if dim % 2:
        raise RequestError(f"a sinusoidal table needs an even width, got dim={dim}")
    tables = {"sincos": sinusoid_positions(positions, dim, scale), "random": random_positions(positions, dim, seed)}
    dots = {kind: table @ table.T for kind, table in tables.items()}
    return {
        "positions": positions,
        "dim": dim,
        "scale": scale,
        "reference": reference,
        "kinds": {kind: _dot_facts(value, reference) for kind, value in dots.items()},
        "magnitude": max(float(value.abs().max()) for value in dots.values()),
    }


def grid_coordinates(grid: int) -> torch.Tensor:
    """``(row, column)`` of every cell of a ``grid x grid`` raster ``(grid^2, 2)`` (float64)."""
    index = torch.arange(grid * grid)
    return torch.stack([index // grid, index % grid], -1).double()


def local_attention_view(grid: int = 14, sigma: float = 2.0, query: int | None = None) -> dict[str, Any]:
    """Synthetic local attention of patch ``query`` (default: the centre) over a ``grid x grid`` raster:
    :func:`gaussian_attention` of the grid distance with bandwidth ``sigma``, the weights ``(grid, grid)``
    with the weight on the query, :func:`~vitlab.explain.maps.head_statistics`, ``reach`` = exp(entropy),
    the patches it effectively averages, and ``rms_distance``, the weighted root-mean-square distance."""
    _check_range("grid", grid, 2, 64)
    _check_range("sigma", sigma, 0.05, 1000.0)
    query = (grid // 2) * grid + grid // 2 if query is None else query
    _check_range("query", query, 0, grid * grid - 1)
    cells = grid_coordinates(grid)
    weights = gaussian_attention(cells[query : query + 1], cells, sigma)[0]
    stats = head_statistics(weights)
    distance2 = ((cells - cells[query]) ** 2).sum(-1)
    return {
        "grid": grid,
        "sigma": sigma,
        "query": query,
        "weights": encode_array(weights.reshape(grid, grid)),
        "max": float(stats["max"]),
        "at_query": float(weights[query]),
        "sum": float(weights.sum()),
        "reach": float(stats["entropy"].exp()),
        "rms_distance": float((weights * distance2).sum().sqrt()),
        "uniform": 1.0 / (grid * grid),
    }


# -- cost ------------------------------------------------------------------------------------------------


def cost_view(
    patch: int = 16, dim: int = 768, heads: int = 12, depth: int = 12, max_image: int = 4096
) -> dict[str, Any]:
    """Every attention kind of :data:`ATTENTION_COSTS` at image sides ``patch * COST_STEPS`` up to
    ``max_image``: tokens, entries per head and layer, forward FLOPs and score memory per layer."""
    _check_range("patch", patch, 1, 64)
    _check_range("max_image", max_image, patch, 16384)
    sides = [patch * step for step in COST_STEPS if patch * step <= max_image]
    try:
        works = [Workload(image=side, patch=patch, dim=dim, heads=heads, depth=depth) for side in sides]
    except ValueError as err:
        raise RequestError(str(err)) from err
    series: dict[str, dict[str, list[float]]] = {}
    for kind in ATTENTION_COSTS:
        mixes = [attention_cost(work, kind) for work in works]
        series[kind] = {
            "entries": [m.entries for m in mixes],
            "memory": [m.memory for m in mixes],
            "flops": [flops(work, kind)["total"] for work in works],
        }
    coincide = {metric: coinciding({kind: series[kind][metric] for kind in series}) for metric in COST_METRICS}
    return {
        "patch": patch,
        "dim": dim,
        "heads": heads,
        "depth": depth,
        "images": sides,
        "tokens": [work.tokens for work in works],
        "kinds": list(ATTENTION_COSTS),
        "metrics": list(COST_METRICS),
        "series": series,
        "coincide": coincide,
        "coincide_tolerance": COINCIDE,
    }


def coinciding(series: dict[str, list[float]], tolerance: float = COINCIDE) -> list[list[str]]:
    """Groups of two or more series whose values lie within ``tolerance`` (relative) of their group's
    first series at every point, in the order given: lines a log chart draws on top of each other."""
    groups: list[list[str]] = []
    for name, values in series.items():
        for group in groups:
            first = series[group[0]]
            if all(abs(a - b) <= tolerance * max(abs(a), abs(b)) for a, b in zip(values, first)):
                group.append(name)
                break
        else:
            groups.append([name])
    return [group for group in groups if len(group) > 1]
