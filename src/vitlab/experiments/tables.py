"""A study's tables (markdown lines): results per model and cell, robustness, who leads, the
token cost per patch size; and the number formats they share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis.cost import cost_table
from ..models import ViTConfig, get_config
from ..reporting import markdown_table
from .aggregates import Aggregate, Lead
from .axes import VARIANTS
from .records import CompareResult


def signed(value: float, digits: int = 3) -> str:
    return f"{value:+.{digits}f}".replace("-", "−")


def padded(side: int, patch: int) -> int:
    """``side`` rounded up to a multiple of ``patch``: the side a padding ViT sees."""
    return -(-side // patch) * patch


def token_costs(result: CompareResult) -> list[dict[str, Any]]:
    """The cost model's row per patch size for the study's ViT and image (square images only; a
    padded patch is priced on the padded image), with the ViT's parameter count at that patch (that
    of its runs without variants, ``None`` when the study has none). The cost model prices a plain ViT's
    global attention: a Swin (windows in stages) gets no table."""
    chans, height, width = result.data["image_shape"]
    vit = get_config(result.config.vit_name)
    if height != width or not isinstance(vit, ViTConfig):
        return []
    sizes = tuple((padded(height, p), p) for p in result.config.patch_sizes)
    rows = cost_table(
        sizes,
        dim=vit.embed_dim,
        depth=vit.depth,
        heads=vit.num_heads,
        mlp_ratio=vit.mlp_ratio,
        class_token=vit.class_token,
        in_chans=chans,
    )
    plain = [
        r
        for r in result.records.values()
        if r.kind == "vit" and all(r.axes.get(k, v) == v for k, v in VARIANTS.items())
    ]
    params = {r.axes["patch"]: r.params for r in plain}
    return [{**row.to_dict(), "params": params.get(row.patch)} for row in rows]


def format_mean_std(mean: float | None, std: float | None, digits: int = 4) -> str:
    if mean is None:
        return "–"
    text = f"{mean:.{digits}f}"
    return text if std is None else f"{text} ± {std:.{digits}f}"


def rows_text(axes: dict[str, Any], train_rows: int) -> str:
    return f"{train_rows:,}" + (" (full)" if axes.get("rows", 0) is None else "")


def results_table(aggregates: Sequence[Aggregate]) -> list[str]:
    """Markdown lines: the textbook's columns (Model, Rows, Parameters, Best val accuracy, Final
    train accuracy, Seconds), then Patch, Augment, the variant axes studied, Gap, ECE, Test accuracy,
    forward Images/s and Peak MB (and ToMe's Agreement when studied); mean ± std over seeds."""
    extra = _variant_columns(aggregates)
    agreement = any(a.mean["agreement"] is not None for a in aggregates)
    header = [
        "Model",
        "Rows",
        "Parameters",
        "Best val accuracy",
        "Final train accuracy",
        "Seconds",
        "Patch",
        "Augment",
        *(k.capitalize() for k in extra),
        "Gap",
        "ECE",
        "Test accuracy",
        "Images/s",
        "Peak MB",
        *(["Agreement"] if agreement else []),
    ]
    body = []
    for a in aggregates:
        m, s = a.mean, a.std
        body.append(
            [
                a.label.split(" patch")[0],
                rows_text(a.axes, a.train_rows),
                f"{m['params']:,.0f}",
                format_mean_std(m["best_val_acc"], s["best_val_acc"]),
                format_mean_std(m["final_train_acc"], s["final_train_acc"]),
                format_mean_std(m["seconds"], s["seconds"], 1),
                str(a.axes.get("patch", "–")),
                str(a.axes.get("augment", "–")),
                *(str(a.axes.get(k, "–")) for k in extra),
                format_mean_std(m["gap"], s["gap"]),
                format_mean_std(m["val_ece"], s["val_ece"]),
                format_mean_std(m["test_acc"], s["test_acc"]),
                format_mean_std(m["images_per_s"], s["images_per_s"], 0),
                format_mean_std(m["peak_mb"], s["peak_mb"], 1),
                *([format_mean_std(m["agreement"], s["agreement"])] if agreement else []),
            ]
        )
    return markdown_table(header, body)


def _variant_columns(aggregates: Sequence[Aggregate]) -> list[str]:
    """The axes the tables show after Patch and Augment: the variant axes studied, then any other."""
    others = sorted({k for a in aggregates for k in a.axes} - {"rows", "patch", "augment", "cnn", *VARIANTS})
    return [k for k in (*VARIANTS, *others) if any(k in a.axes for a in aggregates)]


def robustness_table(aggregates: Sequence[Aggregate]) -> list[str]:
    """Markdown lines: per model and patch grid (a CNN's grid is that of a ViT it meets), its clean,
    masked (tokens dropped, pixels zeroed) and cropped accuracy, mean ± std over seeds (``–`` where a
    model cannot drop tokens); ``[]`` when not measured."""
    measured = [a for a in aggregates if a.robustness]
    if not measured:
        return []
    scores = [k for k in measured[0].robustness[0]["mean"] if k != "clean"]
    extra = _variant_columns(measured)
    header = [
        "Model",
        "Rows",
        "Patch grid",
        "Augment",
        *(k.capitalize() for k in extra),
        "Clean",
        *(_probe_words(k) for k in scores),
    ]
    body = [
        [
            a.label.split(" patch")[0],
            rows_text(a.axes, a.train_rows),
            str(entry["patch"]),
            str(a.axes.get("augment", "–")),
            *(str(a.axes.get(k, "–")) for k in extra),
            *(format_mean_std(entry["mean"][k], entry["std"][k]) for k in ("clean", *scores)),
        ]
        for a in measured
        for entry in a.robustness
    ]
    return markdown_table(header, body)


def _probe_words(key: str) -> str:
    """``drop_0.25`` -> ``Drop 25%``; ``crop_0.75`` -> ``Crop 75%``."""
    kind, fraction = key.split("_")
    return f"{kind.capitalize()} {float(fraction) * 100:g}%"


def leads_table(leads: Sequence[Lead]) -> list[str]:
    """Markdown lines: per cell, both models' parameters and best val accuracy, the lead, its spread
    and the verdict."""
    names = [k for k in leads[0].axes if k != "rows"] if leads else []
    header = [
        "Rows",
        *("CNN" if n == "cnn" else n.capitalize() for n in names),
        "ViT params",
        "CNN params",
        "ViT best val",
        "CNN best val",
        "Lead (ViT − CNN)",
        "Spread",
        "Leader",
        "Verdict",
    ]
    body = [
        [
            rows_text(lead.axes, lead.train_rows),
            *(str(lead.axes[n]) for n in names),
            f"{lead.vit['params']:,.0f}",
            f"{lead.cnn['params']:,.0f}",
            f"{lead.vit['best_val_acc']:.4f}",
            f"{lead.cnn['best_val_acc']:.4f}",
            signed(lead.lead, 4),
            "–" if lead.spread is None else f"{lead.spread:.4f}",
            lead.leader,
            lead.verdict,
        ]
        for lead in leads
    ]
    return markdown_table(header, body)


def cost_lines(costs: Sequence[dict[str, Any]]) -> list[str]:
    header = [
        "Patch",
        "Tokens",
        "Attention entries (per head, per layer)",
        "vs first",
        "Forward FLOPs per image",
        "ViT parameters",
    ]
    body = [
        [
            str(c["patch"]),
            f"{c['tokens']:,}",
            f"{c['entries']:,}",
            f"{c['ratio']:,.2f}x",
            f"{c['flops']:,}",
            f"{c['params']:,}" if c["params"] is not None else "–",
        ]
        for c in costs
    ]
    return markdown_table(header, body)
