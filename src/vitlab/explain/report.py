"""Files for people: one example explained, per-head attention examples, and checkpoint entry points.

- :func:`explain_example` writes ``maps.png`` (the image and every map over it), ``heads.png``
  (every layer's and head's attention from the query, titled with the head's spread) and
  ``explain.json`` (each map's grid and summary, the per-head statistics).
- :func:`attention_examples` writes per-head attention figures for the most confident correct and
  wrong validation predictions, the textbook's head-spread numbers in the titles (for reports).
- :func:`explain_checkpoint` / :func:`audit_checkpoint` do the same from a checkpoint written by
  ``vitlab train`` on its own dataset split, normalised with the training statistics.
- :func:`probe_checkpoint` runs the probes of :mod:`~vitlab.explain.input_probes` and writes ``probes.json``,
  ``probes.md`` and ``attention_depth.png``.

A classifier (plain or distilled) gets every map; an encoder (MAE, DINO: no classifier head) the
attention maps and the attention probe, which need no classes. Other checkpoint kinds are refused in one
line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..checks import Float, Int, Maybe
from ..data import DataSplits, ImageDataset
from ..data.options import DataOptions
from ..errors import ConfigError, DataError
from ..runs import Loaded, RunDir, atomic_write, checkpoint_data, load_checkpoint
from ..runs.weights import run_at_size
from .audit import AuditOptions, AuditResult, Retrain, audit, write_audit
from .figures import plot_attention_depth, plot_head_attention, plot_maps
from .input_probes import PROBES, probes_markdown, run_probes
from .maps import (
    ATTENTION_METHODS,
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


SAMPLES = {"audit": 100, "probe": 1000}  # default images per mode


@dataclass(frozen=True)
class ExplainRequest:
    """What to explain and where to write it (the fields are ``vitlab explain``'s options).

    ``probes`` (names of :data:`~vitlab.explain.input_probes.PROBES`) runs the probes, else ``audit`` the audit,
    else ``images`` (image files, unlabelled) are explained, else one example (image ``index`` of ``split``).
    ``method`` None means every map that applies; ``samples`` None the mode's default (:data:`SAMPLES`).
    """

    out: str | Path = "explain"
    images: Sequence[str | Path] = ()
    dataset: str | None = None
    data_dir: str | Path | None = None
    split: str = "val"
    method: str | None = None
    index: int = 0
    query: Query | None = None
    patch_size: int | None = None
    textbook: bool = False
    audit: bool = False
    probes: Sequence[str] | None = None
    samples: int | None = None
    steps: int | None = None
    sanity_epochs: int = 5
    threshold: float = 0.5
    seed: int = 0
    device: str = "auto"
    overwrite: bool = False
    options: DataOptions | None = None

    def sample_count(self) -> int:
        """``samples``, else the mode's default."""
        return SAMPLES["probe" if self.probes else "audit"] if self.samples is None else self.samples

    def methods(self) -> tuple[str, ...] | None:
        """The maps asked for: ``(method,)``, or None for every map that applies."""
        return None if self.method is None else (self.method,)

    def check(self) -> None:
        """Refuse a mode or option that makes no sense (:class:`ConfigError` naming the option)."""
        if self.probes is not None:
            if self.audit:
                raise ConfigError("--probe and --audit are two separate measurements: run them one at a time")
            if not self.probes or any(name not in PROBES for name in self.probes):
                raise ConfigError(
                    f"--probe takes {', '.join(PROBES)} or all, comma-separated; got {','.join(self.probes)!r}"
                )
        if self.images and (self.probes is not None or self.audit):
            raise ConfigError(
                f"--{'probe' if self.probes is not None else 'audit'} measures the model on its dataset's images, "
                f"not on image files: drop the IMAGE arguments, or drop --{'probe' if self.probes else 'audit'}"
            )
        if self.images and (self.dataset is not None or self.data_dir is not None):
            raise ConfigError(
                "image files are explained without a dataset: drop --dataset / --data-dir, or drop the IMAGE arguments"
            )
        check_explain_options(
            index=self.index,
            patch_size=self.patch_size,
            samples=self.sample_count(),
            steps=self.steps,
            sanity_epochs=self.sanity_epochs,
            seed=self.seed,
            threshold=self.threshold,
        )


Retrainer = Callable[[Loaded], Retrain]
"""``retrainer(ckpt)``: the :data:`~vitlab.explain.audit.Retrain` that trains fresh copies of the checkpoint's
recipe for the permuted-label check (:func:`vitlab.tasks.classify.retrainer` for a classifier); it refuses a
checkpoint whose recipe it cannot rebuild."""


def _split(splits: DataSplits, split: str) -> ImageDataset:
    data = getattr(splits, split, None) if split in SPLITS else None
    if data is None:
        raise ConfigError(
            f"split {split!r} is not available for {splits.name}: choose one of "
            f"{[s for s in SPLITS if getattr(splits, s) is not None]}"
        )
    return splits.in_memory(split, "explanations")


def _summary(grid_map: torch.Tensor) -> dict[str, Any]:
    top = int(grid_map.flatten().argmax())
    return {
        "grid": grid_map.tolist(),
        "top_patch": [top // grid_map.shape[1], top % grid_map.shape[1]],
        "max": float(grid_map.max()),
        "min": float(grid_map.min()),
        "sum": float(grid_map.sum()),
    }


@dataclass(frozen=True)
class Example:
    """One image to explain: its pixels as drawn ``image`` ``(C, H, W)``, the model's input ``inputs``
    ``(1, C, H, W)``, its ``name`` in titles (``val #3``, a file's name) and its true ``label`` (None for an
    image file, which has none)."""

    image: torch.Tensor
    inputs: torch.Tensor
    name: str
    label: str | None = None


def _class_name(classes: Sequence[str], index: int) -> str:
    """Output ``index``'s class name, or the index for a model whose classes are not named."""
    return classes[index] if index < len(classes) else str(index)


@torch.no_grad()
def explain_example(model: nn.Module, splits: DataSplits, request: ExplainRequest) -> dict[str, Any]:
    """Explain image ``request.index`` of ``request.split`` (see :func:`explain_input`) into ``request.out``;
    return the report, which also names the split and index."""
    index, split = request.index, request.split
    data = _split(splits, split)
    if not 0 <= index < len(data):
        raise ConfigError(f"index {index} is outside the {split} split's {len(data)} images: use 0..{len(data) - 1}")
    device = next(model.parameters()).device
    image = data.images[index]
    label = data.classes[int(data.labels[index])]
    example = Example(image, splits.normalize(image[None].to(device)), f"{split} #{index}", label)
    return {"split": split, "index": index, **explain_input(model, example, data.classes, request, request.out)}


@torch.no_grad()
def explain_input(
    model: nn.Module, example: Example, classes: Sequence[str], request: ExplainRequest, out_dir: str | Path
) -> dict[str, Any]:
    """Explain ``example`` by ``request``'s ``method`` (default: all that apply to the model) from its ``query``
    (default :func:`~vitlab.explain.maps.default_query`): write ``maps.png``, ``heads.png`` (with an attention
    map) and ``explain.json`` into ``out_dir``, titled with the example's name, its label (when it has one) and
    the prediction among ``classes``; return the JSON's content (``files`` lists the paths written). An encoder
    (no classifier head) has no prediction: its report's ``prediction``, ``confidence`` and ``probabilities``
    are ``None`` and only the attention maps apply."""
    query, patch_size = request.query, request.patch_size
    methods: Sequence[str] | None = request.methods()
    model.eval()
    image, inputs = example.image, example.inputs
    encoder = is_encoder(model)
    methods = applicable_methods(model) if methods is None else list(methods)
    if encoder:
        methods = check_encoder_methods(methods)
    query = default_query(model) if query is None else query
    size, grid = patch_layout(model, inputs.shape, patch_size)
    maps = {m: v[0].cpu() for m, v in compute_maps(model, inputs, methods, query=query, patch_size=size).items()}
    out = Path(out_dir)
    probs = None if encoder else model(inputs).float().softmax(-1)[0]
    prediction = None if probs is None else _class_name(classes, int(probs.argmax()))
    named = example.name if example.label is None else f"{example.name}: {example.label}"
    if probs is None:
        title = f"{named} (an encoder: no prediction)"
    else:
        title = f"{named} → {prediction} ({float(probs.max()):.3f})"
    files = [plot_maps(image, maps, out / "maps.png", title=title, patch=size, query=query)]
    report: dict[str, Any] = {
        "label": example.label,
        "prediction": prediction,
        "confidence": None if probs is None else float(probs.max()),
        "probabilities": None if probs is None else probs.tolist(),
        "patch_size": size,
        "grid": list(grid),
        "query": query,
        "maps": {m: _summary(v) for m, v in maps.items()},
    }
    if any(m in ("attention", "rollout") for m in methods):
        heads, stats = head_attention(model, inputs, query)
        files.append(
            plot_head_attention(
                image, heads[0], out / "heads.png", title, size, {k: v[0] for k, v in stats.items()}, query
            )
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
    mean of the patch queries for a mean-pooled model. Each panel's title gives the head's most-attended
    key's weight (max) and the spread the textbook's table quotes (max − min; ``1/N`` each is uniform).
    Files: ``attention_correct_{k}.png``, ``attention_wrong_{k}.png``.
    """
    model.eval()
    device = next(model.parameters()).device
    data = splits.in_memory("val", "explanations")
    inputs = splits.normalize(data.images.to(device))
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
                f"(confidence {float(confidence[i]):.3f}); last layer, per head, max weight / max − min: "
                + ", ".join(
                    f"{top:.3f}/{spread:.3f}"
                    for top, spread in zip(stats["max"][k, -1].tolist(), stats["spread"][k, -1].tolist())
                )
                + f"; uniform: 1/{n} = {1 / n:.4f} each, max − min 0"
            )
            paths.append(
                plot_head_attention(
                    data.images[i],
                    heads[k],
                    out / f"attention_{kind}_{k}.png",
                    title,
                    patch_layout(model, inputs.shape)[0],
                    {name: value[k] for name, value in stats.items()},
                    query if query is not None else default_query(model),
                )
            )
    return paths


# -- from a checkpoint ------------------------------------------------------------------------------


def explain_checkpoint(path: str | Path | Loaded, request: ExplainRequest) -> dict[str, Any]:
    """:func:`explain_example` for a checkpoint (see :func:`checkpoint_data`) and ``request``, or with its
    ``images`` :func:`explain_files`; with its ``textbook``, also
    :func:`~vitlab.explain.textbook.textbook_figures` for its model."""
    request.check()
    if request.images:
        ckpt = path if isinstance(path, Loaded) else load_checkpoint(path, request.device)
        check_explainable(ckpt)
        examples = file_examples(ckpt, request)
        with RunDir(request.out).open("explain", overwrite=request.overwrite):
            report = explain_files(ckpt, examples, request)
            if request.textbook:
                report["files"] += [str(p) for p in textbook_figures(request.out, ckpt.model)]
        return {"checkpoint": str(ckpt.path), "model": ckpt.display_name, **report}
    ckpt, splits = explainable_data(path, request)
    with RunDir(request.out).open("explain", overwrite=request.overwrite):
        report = explain_example(ckpt.model, splits, request)
        if request.textbook:
            report["files"] += [str(p) for p in textbook_figures(request.out, ckpt.model)]
    return {"checkpoint": str(ckpt.path), "model": ckpt.name, "dataset": splits.name, **report}


def file_examples(ckpt: Loaded, request: ExplainRequest) -> list[Example]:
    """``request.images`` read as ``ckpt``'s data config says (changed by ``request.options``): each file through
    :meth:`~vitlab.data.DataConfig.load_image`, drawn as :meth:`~vitlab.data.DataConfig.eval_pixels` (in [0, 1])
    and fed to the model as :meth:`~vitlab.data.DataConfig.eval_transform` (what ``vitlab evaluate`` feeds it);
    the model is set to run at that size. A file that is missing or not an image is refused
    (:class:`DataError`) before any is explained."""
    data, model = ckpt.data.resolve(request.options), ckpt.model.eval()
    if data.in_chans not in (1, 3):
        raise DataError(f"{ckpt.path} takes {data.in_chans}-channel images; image files give 1 or 3")
    run_at_size(model, data.image_size)
    device = next(model.parameters()).device
    transform, examples = data.eval_transform(), []
    for path in map(Path, request.images):
        image = data.load_image(path)
        pixels = data.eval_pixels(image).float() / 255  # drawn in [0, 1]
        examples.append(Example(pixels, transform(image)[None].to(device), path.name))
    return examples


def explain_files(ckpt: Loaded, examples: Sequence[Example], request: ExplainRequest) -> dict[str, Any]:
    """:func:`explain_input` for each of ``examples`` (:func:`file_examples`), titled with the file's name and the
    prediction: one into ``request.out``, several each into its own folder there (named after the file). Returns
    ``{"examples": [each report, with its "image"], "files": [every file written]}``."""
    out = Path(request.out)
    folders = (
        [out]
        if len(examples) == 1
        else [out / f"{k:0{len(str(len(examples)))}d}_{Path(path).stem}" for k, path in enumerate(request.images)]
    )
    reports = []
    for example, path, folder in zip(examples, request.images, folders):
        folder.mkdir(parents=True, exist_ok=True)
        report = explain_input(ckpt.model, example, ckpt.data.classes, request, folder)
        reports.append({"image": str(path), **report})
    return {"examples": reports, "files": [f for r in reports for f in r["files"]]}


def audit_checkpoint(
    path: str | Path | Loaded, request: ExplainRequest, retrainer: Retrainer | None = None
) -> AuditResult:
    """:func:`~vitlab.explain.audit.audit` a checkpoint as ``request`` asks (its ``samples``, ``method``,
    ``split``, ``seed``, ``sanity_epochs``, ``threshold``, ``patch_size``, ``steps``) and :func:`write_audit` the
    result to ``request.out``.

    The permuted-label copy is trained ``sanity_epochs`` epochs by ``retrainer(ckpt)`` (:data:`Retrainer`);
    ``sanity_epochs`` 0 or no ``retrainer`` skips that check.
    """
    request.check()
    ckpt, splits = explainable_data(path, request)
    if is_encoder(ckpt.model):
        raise ConfigError(
            f"the audit scores maps by the predicted class's probability, and {ckpt.path} is an encoder without a "
            f"classifier head: fine-tune it (vitlab train --init) first, or explain it without --audit"
        )
    with RunDir(request.out).open("audit", overwrite=request.overwrite):
        retrain = retrainer(ckpt) if retrainer is not None and request.sanity_epochs > 0 else None
        options = AuditOptions(
            samples=request.sample_count(),
            methods=request.methods(),
            seed=request.seed,
            split=request.split,
            sanity_epochs=request.sanity_epochs,
            threshold=request.threshold,
            patch_size=request.patch_size,
            steps=request.steps,
        )
        result = audit(ckpt.model, splits, options, retrain)
        write_audit(result, request.out)
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


# -- what explain reads ----------------------------------------------------------------------------------

EXPLAINABLE = ("classifier", "distilled-classifier", "encoder")  # checkpoint kinds vitlab explain reads


def is_encoder(model: nn.Module) -> bool:
    """Whether ``model`` has no classifier head (``num_classes == 0``: a pretrained MAE or DINO encoder)."""
    return getattr(getattr(model, "config", None), "num_classes", None) == 0


def check_encoder_methods(methods: Sequence[str]) -> list[str]:
    """``methods`` for an encoder: the attention maps among them; a map that needs a class is refused."""
    needs_class = [m for m in methods if m not in ATTENTION_METHODS]
    if needs_class and all(m in needs_class for m in methods):
        raise ConfigError(
            f"--method {', '.join(needs_class)} maps a class's evidence, and an encoder has no classes: use "
            f"--method attention or rollout, or fine-tune it (vitlab train --init) first"
        )
    return [m for m in methods if m in ATTENTION_METHODS]


def explainable_data(path: str | Path | Loaded, request: ExplainRequest) -> tuple[Loaded, DataSplits]:
    """:func:`~vitlab.runs.checkpoint_data` for ``request``'s dataset, data folder and device, refusing a kind
    explain does not read before its data is loaded; its ``options`` (``--image-size``, ``--set data.FIELD``)
    change how image files are read, the model run at that size. The images explained are held in memory
    (``--loader memory`` unless a loader is set)."""
    ckpt = path if isinstance(path, Loaded) else load_checkpoint(path, request.device)
    check_explainable(ckpt)
    options = request.options or DataOptions()
    if options.loader == "auto":
        options = replace(options, loader="memory")
    ckpt, splits = checkpoint_data(ckpt, request.dataset, request.data_dir, request.device, options=options)
    run_at_size(ckpt.model, splits.image_shape[1:])
    return ckpt, splits


def check_explainable(ckpt: Loaded) -> None:
    """Refuse, in one line, a checkpoint kind vitlab explain does not read (segmenters, detectors,
    promptable and CLIP models)."""
    if ckpt.kind not in EXPLAINABLE:
        raise ConfigError(
            f"vitlab explain reads classifiers and pretrained encoders; {ckpt.path} is a {ckpt.kind} model: "
            f"see its masks, boxes or labels with `vitlab predict {ckpt.path} IMAGE`"
        )


def probe_checkpoint(path: str | Path | Loaded, request: ExplainRequest) -> dict[str, Any]:
    """Run ``request.probes`` (:data:`~vitlab.explain.input_probes.PROBES`) on the first ``samples`` images of
    its ``split`` and write ``probes.json``, ``probes.md`` and (with ``attention``) ``attention_depth.png`` into
    ``request.out``; return the JSON's content."""
    request.check()
    ckpt, splits = explainable_data(path, request)
    split, samples, out_dir, overwrite = request.split, request.sample_count(), request.out, request.overwrite
    probes, patch_size, seed = request.probes or (), request.patch_size, request.seed
    data = _split(splits, split)
    model = ckpt.model.eval()
    device_of = next(model.parameters()).device
    images = splits.normalize(data.images[:samples].to(device_of))
    labels = None if is_encoder(model) else data.labels[:samples].to(device_of)
    with RunDir(out_dir).open("explain", overwrite=overwrite):
        result = run_probes(model, images, labels, probes, patch_size, seed)
        out = Path(out_dir)
        name = ckpt.display_name
        report = {
            "checkpoint": str(ckpt.path),
            "model": name,
            "kind": ckpt.kind,
            "dataset": splits.name,
            "split": split,
            **result,
        }
        files = [out / "probes.json", out / "probes.md"]
        if "attention" in result:
            files.append(plot_attention_depth(result["attention"], out / "attention_depth.png", title=name))
        report["files"] = [str(f) for f in files]
        title = f"Probes of {name} ({ckpt.kind}) on {splits.name} {split}"
        atomic_write(files[1], (probes_markdown(report, title) + "\n").encode())
        atomic_write(files[0], (json.dumps(report, indent=2) + "\n").encode())
    return report
