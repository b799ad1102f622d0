"""Files for people: one example explained, per-head attention examples, and checkpoint entry points.

- :func:`explain_example` writes ``maps.png`` (the image and every map over it), ``heads.png``
  (every layer's and head's attention from the query, titled with the head's spread) and
  ``explain.json`` (each map's grid and summary, the per-head statistics).
- :func:`attention_examples` writes per-head attention figures for the most confident correct and
  wrong validation predictions, the textbook's head-spread numbers in the titles (for reports).
- :func:`explain_checkpoint` / :func:`audit_checkpoint` do the same from a checkpoint written by
  ``vitlab train`` on its own dataset split, normalised with the training statistics.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data import DataSplits, ImageDataset, normalize
from ..engine import TrainConfig
from ..errors import CheckpointError
from ..models.config import Float, Int, Maybe
from ..runs import Loaded, RunDir, checkpoint_data
from ..runs.layout import CONFIG
from .audit import AuditResult, audit, write_audit
from .figures import plot_head_attention, plot_maps
from .maps import (
    Query,
    applicable_methods,
    compute_maps,
    default_query,
    head_attention,
    num_prefix_tokens,
    patch_layout,
)
from .textbook import textbook_figures

SPLITS = ("val", "test", "train")


def _split(splits: DataSplits, split: str) -> ImageDataset:
    data = getattr(splits, split, None) if split in SPLITS else None
    if data is None:
        raise ValueError(
            f"split {split!r} is not available for {splits.name}: choose one of "
            f"{[s for s in SPLITS if getattr(splits, s) is not None]}"
        )
    return data


def _summary(grid_map: torch.Tensor) -> dict[str, Any]:
    top = int(grid_map.flatten().argmax())
    return {
        "grid": grid_map.tolist(),
        "top_patch": [top // grid_map.shape[1], top % grid_map.shape[1]],
        "max": float(grid_map.max()),
        "min": float(grid_map.min()),
        "sum": float(grid_map.sum()),
    }


@torch.no_grad()
def explain_example(
    model: nn.Module,
    splits: DataSplits,
    index: int,
    out_dir: str | Path,
    methods: Sequence[str] | None = None,
    split: str = "val",
    query: Query | None = None,
    patch_size: int | None = None,
) -> dict[str, Any]:
    """Explain image ``index`` of ``split`` by ``methods`` (default: all that apply to the model): write
    the figures and ``explain.json``; return its content (``files`` lists the paths written)."""
    data = _split(splits, split)
    if not 0 <= index < len(data):
        raise ValueError(f"index {index} is outside the {split} split's {len(data)} images: use 0..{len(data) - 1}")
    model.eval()
    device = next(model.parameters()).device
    image = data.images[index]
    inputs = normalize(image[None].to(device), splits.mean, splits.std)
    probs = model(inputs).float().softmax(-1)[0]
    methods = applicable_methods(model) if methods is None else list(methods)
    query = default_query(model) if query is None else query
    size, grid = patch_layout(model, inputs.shape, patch_size)
    maps = {m: v[0].cpu() for m, v in compute_maps(model, inputs, methods, query=query, patch_size=size).items()}
    out = Path(out_dir)
    label, prediction = int(data.labels[index]), int(probs.argmax())
    title = f"{split} #{index}: {data.classes[label]} → {data.classes[prediction]} ({float(probs.max()):.3f})"
    files = [plot_maps(image, maps, out / "maps.png", title=title, patch=size)]
    report: dict[str, Any] = {
        "split": split,
        "index": index,
        "label": data.classes[label],
        "prediction": data.classes[prediction],
        "confidence": float(probs.max()),
        "probabilities": probs.tolist(),
        "patch_size": size,
        "grid": list(grid),
        "query": query,
        "maps": {m: _summary(v) for m, v in maps.items()},
    }
    if any(m in ("attention", "rollout") for m in methods):
        heads, stats = head_attention(model, inputs, query)
        files.append(
            plot_head_attention(image, heads[0], stats["spread"][0], out / "heads.png", title=title, patch=size)
        )
        report["heads"] = {name: value[0].tolist() for name, value in stats.items()}
    files.append(out / "explain.json")
    report["files"] = [str(f) for f in files]
    files[-1].write_text(json.dumps(report, indent=2) + "\n")
    return report


@torch.no_grad()
def attention_examples(
    model: nn.Module,
    splits: DataSplits,
    n_correct: int = 2,
    n_wrong: int = 2,
    out_dir: str | Path = ".",
    query: Query | None = None,
) -> list[Path]:
    """Per-head attention figures (every layer) for the ``n_correct`` most confident correct and
    ``n_wrong`` most confident wrong validation predictions (fewer when there are fewer).

    The query defaults to :func:`~vitlab.explain.maps.default_query`: the class token, or the
    mean of the patch queries for a mean-pooled model. Each panel's title gives the head's spread
    (most minus least attended weight; ``1/N`` is uniform), as in the textbook's table.
    Files: ``attention_correct_{k}.png``, ``attention_wrong_{k}.png``.
    """
    model.eval()
    device = next(model.parameters()).device
    data = splits.val
    inputs = normalize(data.images.to(device), splits.mean, splits.std)
    confidence, prediction = torch.cat([model(chunk).float().softmax(-1) for chunk in inputs.split(512)]).max(-1)
    correct = prediction == data.labels.to(device)
    out = Path(out_dir)
    paths = []
    for kind, group, count in (("correct", correct, n_correct), ("wrong", ~correct, n_wrong)):
        members = group.nonzero()[:, 0]
        picks = members[confidence[members].argsort(descending=True)[:count]]
        if not len(picks):
            continue
        heads, stats = head_attention(model, inputs[picks], query)
        n = num_prefix_tokens(model) + heads.shape[-1] * heads.shape[-2]
        for k, i in enumerate(picks.tolist()):
            title = (
                f"val #{i}: {data.classes[int(data.labels[i])]} → {data.classes[int(prediction[i])]} "
                f"(confidence {float(confidence[i]):.3f}); last-layer spreads "
                + ", ".join(f"{s:.3f}" for s in stats["spread"][k, -1].tolist())
                + f"; uniform 1/{n}"
            )
            paths.append(
                plot_head_attention(
                    data.images[i],
                    heads[k],
                    stats["spread"][k],
                    out / f"attention_{kind}_{k}.png",
                    title=title,
                    patch=patch_layout(model, inputs.shape)[0],
                )
            )
    return paths


# -- from a checkpoint ------------------------------------------------------------------------------


def checkpoint_train_config(ckpt: Loaded) -> TrainConfig:
    """The training run's config (``config.json`` of its run folder), else the default recipe for
    the checkpoint's model and config."""
    config_file = ckpt.path.parent.parent / CONFIG
    if config_file.is_file() and ckpt.kind == "classifier":
        saved = json.loads(config_file.read_text())
        if isinstance(saved, dict) and "model" in saved:
            return TrainConfig.from_dict(saved)
    if ckpt.name is None:
        raise CheckpointError(
            f"{ckpt.path} records no registered model name: the permuted-label check cannot "
            f"retrain it; pass --sanity-epochs 0"
        )
    model_config: Any = ckpt.model.config
    return TrainConfig(
        model=ckpt.name,
        model_overrides=model_config.to_dict(),
        dataset=ckpt.data.dataset or "digits",
        seed=ckpt.data.seed,
    )


def explain_checkpoint(
    path: str | Path | Loaded,
    out_dir: str | Path,
    *,
    dataset: str | None = None,
    data_dir: str | Path | None = None,
    index: int = 0,
    methods: Sequence[str] | None = None,
    split: str = "val",
    query: Query | None = None,
    patch_size: int | None = None,
    textbook: bool = False,
    device: str = "auto",
    overwrite: bool = False,
) -> dict[str, Any]:
    """:func:`explain_example` for a checkpoint (see :func:`checkpoint_data`); with ``textbook``, also
    :func:`~vitlab.explain.textbook.textbook_figures` for its model."""
    check_explain_options(index=index, patch_size=patch_size)
    ckpt, splits = checkpoint_data(path, dataset, data_dir, device)
    with RunDir(out_dir).open("explain", overwrite=overwrite):
        report = explain_example(ckpt.model, splits, index, out_dir, methods, split, query, patch_size)
        if textbook:
            report["files"] += [str(p) for p in textbook_figures(out_dir, ckpt.model)]
    return {"checkpoint": str(ckpt.path), "model": ckpt.name, "dataset": splits.name, **report}


def audit_checkpoint(
    path: str | Path | Loaded,
    out_dir: str | Path,
    *,
    dataset: str | None = None,
    data_dir: str | Path | None = None,
    samples: int = 100,
    methods: Sequence[str] | None = None,
    split: str = "val",
    seed: int = 0,
    sanity_epochs: int = 5,
    threshold: float = 0.5,
    patch_size: int | None = None,
    steps: int | None = None,
    device: str = "auto",
    overwrite: bool = False,
) -> AuditResult:
    """:func:`~vitlab.explain.audit.audit` a checkpoint and :func:`write_audit` the result to ``out_dir``.

    The permuted-label copy trains with the run's own config (:func:`checkpoint_train_config`) for
    ``sanity_epochs`` epochs; 0 skips it.
    """
    check_explain_options(
        patch_size=patch_size, samples=samples, sanity_epochs=sanity_epochs, threshold=threshold, steps=steps, seed=seed
    )
    ckpt, splits = checkpoint_data(path, dataset, data_dir, device)
    with RunDir(out_dir).open("audit", overwrite=overwrite):
        config = checkpoint_train_config(ckpt) if sanity_epochs > 0 else None
        result = audit(
            ckpt.model,
            splits,
            samples,
            methods,
            seed,
            split,
            config,
            sanity_epochs,
            threshold,
            patch_size=patch_size,
            steps=steps,
        )
        write_audit(result, out_dir)
    return result


def check_explain_options(**options: Any) -> None:
    """Refuse out-of-range explanation options (:class:`ConfigError` naming the option): ``index``,
    ``patch_size``, ``samples``, ``steps`` >= 1 (index, seed >= 0), ``sanity_epochs`` >= 0,
    ``threshold`` a rank correlation in [-1, 1]."""
    ranges = {
        "index": Maybe(Int(0, 2**31)),
        "patch_size": Maybe(Int(1, 4096)),
        "samples": Int(1, 1_000_000),
        "steps": Maybe(Int(1, 100_000)),
        "sanity_epochs": Int(0, 10_000),
        "seed": Int(0, 2**63 - 1),
        "threshold": Float(-1.0, 1.0),
    }
    for name, value in options.items():
        ranges[name](f"--{name.replace('_', '-')}", value)
