"""A study's grid expanded into cells and runs: :func:`plan_compare` (each cell's ViT and the CNN
matched to its parameter count), the study's data (:func:`load_splits`, :func:`data_shape`) and a
run's model (:func:`build_architecture`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product
from typing import Any, cast

from torch import nn

from ..data import DataSplits, load_dataset
from ..data.preprocess import Preprocess
from ..data.registry import photo_sources
from ..errors import ConfigError
from ..models import VisionTransformer, build_registered, cnn_for_budget, count_params, get_config
from ..ops.patches import divisibility_error
from ..tasks.classify.train import resize_splits
from .axes import CNN_CHOICES, VARIANT_FIELDS, VARIANTS, VIT_TRAINING, Axis
from .config import CompareConfig
from .records import Cell, Plan, RunPlan
from .variants import skip_reason, vit_overrides, with_tome


def grid_axes(config: CompareConfig) -> list[Axis]:
    """The study's axes, outermost first: seed, rows, augment, patch, then each variant axis the study
    varies, then the CNN met (so each seed's grid completes before the next seed starts, and runs
    sharing a training set are consecutive). A variant listing only its default is no axis: the
    registered ViT as is; likewise ``cnns=["matched"]``."""
    axes = [
        Axis("seed", "seed", tuple(range(config.seeds))),
        Axis("rows", "rows", tuple(config.rows)),
        Axis("augment", "augment", tuple(config.augment)),
        Axis("patch", "patch_size", tuple(config.patch_sizes), only="vit"),
    ]
    axes += [
        Axis(name, VARIANT_FIELDS[name], tuple(getattr(config, name)), only="vit")
        for name, default in VARIANTS.items()
        if getattr(config, name) != [default]
    ]
    return axes + ([Axis("cnn", "cnn", tuple(config.cnns), only="cnn")] if config.cnns != ["matched"] else [])


def data_shape(splits: DataSplits) -> dict[str, Any]:
    """The model fields the data fixes: ``num_classes``, ``in_chans``, ``img_size``."""
    chans, height, width = splits.image_shape
    return {"num_classes": splits.num_classes, "in_chans": chans, "img_size": (height, width)}


def model_params(name: str, **overrides: Any) -> int:
    """Trainable parameters of ``build_registered(name, **overrides)``."""
    return count_params(build_registered(name, **overrides))


def _run_key(kind: str, values: dict[str, Any], overrides: dict[str, Any]) -> str:
    settings = ",".join(f"{k}={'full' if k == 'rows' and v is None else v}" for k, v in values.items())
    extra = "" if kind == "vit" else ",widths=" + "-".join(map(str, overrides["widths"]))
    return f"{kind}:{settings}{extra}"


# match(ViT overrides) -> (ViT parameters, the matched CNN's overrides, its parameters)
Matcher = Callable[[dict[str, Any]], tuple[int, dict[str, Any], int]]


def cnn_matcher(config: CompareConfig, shape: dict[str, Any]) -> Matcher:
    """A function that sizes ``config.cnn_name`` to the ViT with given overrides (each ViT shape sized once,
    by :func:`~vitlab.models.cnn_for_budget`); it raises :class:`~vitlab.errors.ConfigError` when the CNN
    family cannot get within ``param_tolerance`` of the ViT's parameter count."""
    cnn_base = get_config(config.cnn_name)
    matched: dict[str, tuple[int, dict[str, Any], int]] = {}

    def match(vit_overrides: dict[str, Any]) -> tuple[int, dict[str, Any], int]:
        key = repr(sorted(vit_overrides.items()))
        if key not in matched:
            vit_params = model_params(config.vit_name, **shape, **vit_overrides)
            budget = cnn_for_budget(
                vit_params,
                shape["img_size"],
                shape["in_chans"],
                shape["num_classes"],
                stages=len(cnn_base.widths),
                convs_per_stage=cnn_base.convs_per_stage,
                norm=cnn_base.norm,
                dropout=cnn_base.dropout,
            )
            cnn_overrides = {"widths": list(budget.widths)}
            cnn_params = model_params(config.cnn_name, **shape, **cnn_overrides)
            if abs(cnn_params - vit_params) > config.param_tolerance * vit_params:
                raise ConfigError(
                    f"the closest {config.cnn_name} has {cnn_params:,} parameters against the ViT's "
                    f"{vit_params:,} at {vit_overrides}: more than ±{config.param_tolerance:.0%} "
                    f"apart; choose another --cnn family or ViT"
                )
            matched[key] = vit_params, cnn_overrides, cnn_params
        return matched[key]

    return match


def _check_patches(config: CompareConfig, shape: dict[str, Any]) -> None:
    height, width = shape["img_size"]
    for patch in config.patch_sizes:
        if not config.pad and (height % patch or width % patch):
            raise ConfigError(
                f"patch {patch} of --patches {','.join(map(str, config.patch_sizes))}: "
                f"{divisibility_error(height, width, patch)}; compare pads with --pad"
            )


def _vit_overrides(config: CompareConfig, shape: dict[str, Any], values: dict[str, Any]) -> tuple[dict, str | None]:
    """The ViT's overrides in a cell with axis ``values``, or why it cannot be built (:func:`skip_reason`, or
    the model's own refusal in one line)."""
    reason, overrides = skip_reason(config, shape, values), {}
    if reason is None:
        try:  # any other combination the model refuses
            overrides = vit_overrides(config, shape, values)
            get_config(config.vit_name, **shape, **overrides)
        except ConfigError as err:
            reason = " ".join(str(err).split())
    return overrides, reason


def cell_runs(
    config: CompareConfig,
    shape: dict[str, Any],
    axes: Sequence[Axis],
    combo: Sequence[Any],
    overrides: dict[str, Any],
    match: Matcher,
) -> tuple[RunPlan, RunPlan]:
    """The ViT run (with ``overrides``) and the CNN run of the cell with axis values ``combo``: the CNN
    matched to the ViT (:func:`cnn_matcher`) or the fixed one of its ``cnn`` axis value; the ViT distils
    from the CNN when its ``distill`` value is ``cnn``."""
    values = {axis.name: value for axis, value in zip(axes, combo)}
    vit_values = {axis.name: value for axis, value in zip(axes, combo) if axis.only != "cnn"}
    cnn_values = {axis.name: value for axis, value in zip(axes, combo) if axis.only != "vit"}
    train_fields = {axis.field: value for axis, value in zip(axes, combo) if axis.only is None}
    vit_train = {VIT_TRAINING[name]: values[name] for name in VIT_TRAINING if values.get(name) is not None}
    vit_params, cnn_overrides, cnn_params = match(overrides)
    fixed = CNN_CHOICES[values.get("cnn", "matched")]
    cnn_model = config.cnn_name
    if fixed is not None:
        cnn_model, cnn_overrides = fixed[0], dict(fixed[1])
        cnn_params = model_params(cnn_model, **shape, **cnn_overrides)
    cnn = RunPlan(
        _run_key("cnn", cnn_values, cnn_overrides),
        "cnn",
        cnn_model,
        cnn_overrides,
        train_fields,
        cnn_values,
        cnn_params,
    )
    distil = values.get("distill", VARIANTS["distill"]) == "cnn"
    vit = RunPlan(
        _run_key("vit", vit_values, overrides),
        "vit",
        config.vit_name,
        overrides,
        {**train_fields, **vit_train},
        vit_values,
        vit_params,
        teacher=cnn.key if distil else None,
    )
    return vit, cnn


def plan_compare(config: CompareConfig, shape: dict[str, Any]) -> Plan:
    """Expand ``config`` into cells and runs for data of ``shape`` (see :func:`data_shape`).

    Raises :class:`~vitlab.errors.ConfigError` when a patch size does not divide the image (without
    ``config.pad``), when the CNN family cannot get within ``param_tolerance`` of the ViT's parameter
    count, or when every combination is skipped (:func:`skip_reason`).
    """
    _check_patches(config, shape)
    axes = grid_axes(config)
    match = cnn_matcher(config, shape)
    runs: dict[str, RunPlan] = {}
    cells: list[Cell] = []
    skipped: dict[str, dict[str, Any]] = {}
    for combo in product(*(axis.values for axis in axes)):
        values = {axis.name: value for axis, value in zip(axes, combo)}
        overrides, reason = _vit_overrides(config, shape, values)
        if reason is not None:
            own = {axis.name: values[axis.name] for axis in axes if axis.only == "vit"}
            skipped.setdefault(repr(own), {"axes": own, "reason": reason})
            continue
        vit, cnn = cell_runs(config, shape, axes, combo, overrides, match)
        for run in (cnn, vit) if vit.teacher is not None else (vit, cnn):
            runs.setdefault(run.key, run)
        if values["patch"] not in (grids := runs[cnn.key].mask_patches):
            grids.append(values["patch"])
        runs[vit.key].mask_patches = [values["patch"]]
        cells.append(Cell(values, vit.key, cnn.key))
    if not cells:
        raise ConfigError(
            f"every combination of the study is skipped ({'; '.join(skipped_summary(list(skipped.values())))}): "
            f"change the values of --patches and the ViT variant axes"
        )
    return Plan(axes, cells, list(runs.values()), list(skipped.values()))


def skipped_summary(skipped: Sequence[dict[str, Any]]) -> list[str]:
    """One line per reason among a plan's ``skipped`` combinations, naming the axis values all of its
    combinations share: ``patch 2, stem resnet (4 combinations): the ResNet stem ...``."""
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for skip in skipped:
        by_reason.setdefault(skip["reason"], []).append(skip["axes"])
    lines = []
    for reason, combos in by_reason.items():
        shared = {k: v for k, v in combos[0].items() if all(c[k] == v for c in combos)}
        count = f" ({len(combos)} combinations)" if len(combos) > 1 else ""
        lines.append(f"{', '.join(f'{k} {v}' for k, v in shared.items())}{count}: {reason}")
    return lines


def load_splits(config: CompareConfig, seed: int, rows: int | None) -> DataSplits:
    """The study's data for ``seed`` and ``rows`` (``normalization="unit"``: mean 0 and std 1, so the
    models see the pixels as loaded, in [0, 1]). Image files are read at ``image_size`` (default 32) into
    memory; a tensor dataset is resized to it when it is set."""
    common: dict[str, Any] = {"seed": seed, "rows": rows, "normalization": config.normalization}
    if config.dataset in photo_sources():
        side = config.image_size or 32
        preprocess = Preprocess(image_size=(side, side))
        return load_dataset(config.dataset, config.data_dir, preprocess=preprocess, loader="memory", **common)
    splits = load_dataset(config.dataset, config.data_dir, **common)
    return splits if config.image_size is None else resize_splits(splits, config.image_size)


def build_architecture(run: RunPlan, shape: dict[str, Any]) -> nn.Module:
    """A freshly initialised model of ``run``'s architecture for data of ``shape``: its model and
    overrides, with a distillation token when it has a teacher, merging tokens for ``tome``."""
    model = build_registered(run.model, **shape, **run.overrides, **({"distill_token": True} if run.teacher else {}))
    if run.axes.get("attention") != "tome":
        return model
    return with_tome(cast(VisionTransformer, model), shape["img_size"])  # tome runs are ViTs (see plan_compare)
