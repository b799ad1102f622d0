"""The probes in words: :func:`~vitlab.explain.probes.run_probes`'s result as Markdown tables, and the
attention diagnostics by layer and head with a sentence on their trend with depth."""

from __future__ import annotations

import statistics
from typing import Any


def _f(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def probes_markdown(result: dict[str, Any], title: str) -> str:
    """The probes of :func:`run_probes` (``result``) as Markdown: one table per probe, the attention
    diagnostics by layer (means over heads) and head, and a sentence on the trend with depth."""
    from ..reporting import markdown_table

    lines = [
        f"# {title}",
        "",
        f"{result['images']:,} images; patches of {result['patch']} px ({result['patch_source']}).",
        "",
    ]
    if "permute" in result:
        p = result["permute"]
        lines += [
            f"## Patches shuffled ({p['permutations']} random orders of the {p['patches']} patches)",
            "",
            *markdown_table(
                [
                    "model",
                    "positions",
                    "clean accuracy",
                    "shuffled accuracy",
                    "agreement",
                    "largest probability change",
                ],
                [
                    [
                        r["model"],
                        r["positions"],
                        _f(r["clean_accuracy"]),
                        _f(r["accuracy"]),
                        _f(r["agreement"]),
                        f"{r['max_probability_change']:.2e}",
                    ]
                    for r in p["rows"]
                ],
            ),
            "",
            "Agreement: the share of images whose predicted class does not change when their patches are shuffled.",
            "",
        ]
    if "shift" in result:
        lines += [
            "## Shifted right and down",
            "",
            *markdown_table(
                ["pixels", "accuracy", "agreement"],
                [[str(r["pixels"]), _f(r["accuracy"]), _f(r["agreement"])] for r in result["shift"]],
            ),
            "",
        ]
    if "occlude" in result:
        entry = result["occlude"]
        keys = [k for k in entry if k not in ("patch", "clean")]
        lines += [
            "## Patches removed (tokens dropped where the model can; pixels zeroed)",
            "",
            *markdown_table(["clean", *keys], [[_f(entry["clean"]), *(_f(entry[k]) for k in keys)]]),
            "",
        ]
    if "resolution" in result:
        lines += [
            "## Other image sides (positions resampled)",
            "",
            *markdown_table(
                ["side", "accuracy", "agreement", "note"],
                [
                    ["x".join(map(str, r["size"])), _f(r.get("accuracy")), _f(r.get("agreement")), r.get("reason", "")]
                    for r in result["resolution"]
                ],
            ),
            "",
        ]
    if "attention" in result:
        lines += attention_lines(result["attention"])
    return "\n".join(lines)


def attention_lines(diag: dict[str, Any]) -> list[str]:
    """Markdown lines for :func:`attention_diagnostics` (or a convnet's receptive fields)."""
    from ..reporting import markdown_table

    if "receptive_fields" in diag:
        return [
            "## Receptive field by depth (a convnet)",
            "",
            *markdown_table(
                ["layer", "receptive field (px)", "mean distance within it (px)"],
                [[r["layer"], str(r["rf"]), _f(r["field_distance"], 2)] for r in diag["receptive_fields"]],
            ),
            "",
        ]
    layers = range(len(diag["mean_distance"]))

    def mean(name: str, layer: int) -> float | None:
        values = diag[name]
        return None if values is None else statistics.fmean(values[layer])

    body = [
        [
            str(layer + 1),
            _f(mean("mean_distance", layer), 2),
            _f(diag["rollout_distance"][layer], 2),
            _f(mean("entropy", layer), 3),
            _f(mean("neighbourhood", layer), 2),
            _f(mean("prefix_fraction", layer), 3),
            _f(mean("max", layer), 3),
            _f(mean("max_minus_min", layer), 3),
        ]
        for layer in layers
    ]
    heads = [
        [
            f"{layer + 1}.{head}",
            _f(diag["mean_distance"][layer][head], 2),
            _f(diag["entropy"][layer][head], 3),
            _f(diag["neighbourhood"][layer][head], 2),
            _f(None if diag["prefix_fraction"] is None else diag["prefix_fraction"][layer][head], 3),
            _f(diag["max"][layer][head], 3),
            _f(diag["max_minus_min"][layer][head], 3),
        ]
        for layer in layers
        for head in range(len(diag["mean_distance"][layer]))
    ]
    tokens = diag["tokens"]["patches"] + diag["tokens"]["prefix"]
    return [
        f"## Attention by depth ({diag['images']:,} images, means over the heads and the patch queries)",
        "",
        *markdown_table(
            [
                "layer",
                "mean attention distance (px)",
                "rollout distance (px)",
                "entropy (nats)",
                "neighbourhood exp(H) (tokens)",
                "weight on prefix tokens",
                "max weight",
                "max − min weight",
            ],
            body,
        ),
        "",
        f"Uniform attention over the patches would give a mean distance of {diag['uniform_distance']:.2f} px, an "
        f"entropy of {diag['uniform_entropy']:.3f} nats and a neighbourhood of {tokens} tokens, and put 1/{tokens} = "
        f"{1 / tokens:.4f} on every key (max − min 0). The mean attention distance **{diag['trend']}**.",
        "",
        "Per head (layer.head):",
        "",
        *markdown_table(["head", "distance (px)", "entropy", "exp(H)", "prefix", "max", "max − min"], heads),
        "",
    ]
