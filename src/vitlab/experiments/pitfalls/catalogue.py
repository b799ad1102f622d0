"""What ``--preset pitfalls`` measures: each pitfall's claim, its grids and the effects that test it
(:func:`pitfalls_for`), on a dataset's :class:`Profile`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEEDS = 3

NAME = "pitfalls"


@dataclass(frozen=True)
class Profile:
    """What the preset trains on one dataset: the models, the base cell (``rows`` for ``epochs``, ``patch``),
    the patch sizes and the overlapping stride to study, the data-size sweep ``(rows, epochs)`` (``None``: the
    whole pool), the learning rates of the post-norm grid, and the page's test-accuracy protocol (or none)."""

    dataset: str
    vit: str
    cnn: str
    rows: int
    epochs: int
    patch: int
    patches: tuple[int, ...]
    stride: int
    sweep: tuple[tuple[int | None, int], ...]
    lrs: tuple[float, ...]
    test_protocol: tuple[int, int] | None  # (rows, epochs) of the page's test accuracy


PROFILES = {
    "fashion-mnist": Profile(
        "fashion-mnist",
        "vit-seed",
        "cnn-seed",
        rows=2000,
        epochs=8,
        patch=7,
        patches=(4, 7, 14),
        stride=4,
        sweep=((500, 10), (2000, 8), (8000, 2), (None, 1)),
        lrs=(1e-3, 3e-3, 1e-2),
        test_protocol=(4000, 15),
    ),
    "digits": Profile(
        "digits",
        "vit-digits",
        "cnn-digits",
        rows=600,
        epochs=15,
        patch=2,
        patches=(1, 2, 4),
        stride=1,
        sweep=((150, 30), (300, 20), (600, 15), (None, 10)),
        lrs=(1e-3, 3e-3, 1e-2),
        test_protocol=None,
    ),
}

PUBLISHED_TEST_ACC = 0.7640  # the page's ViT on the full Fashion-MNIST test split


@dataclass(frozen=True)
class Effect:
    """One measured effect of a claim: the ViT's ``metric`` at ``axis`` = ``value`` minus at ``baseline``
    (``seconds``: the log of their ratio), seed-paired within each setting of the grid's other axes, expected
    to have ``sign``; ``words`` name what is measured. ``axis="cnn"``: the ViT minus the CNN of its cell."""

    axis: str
    value: Any
    baseline: Any
    metric: str
    sign: int
    words: str


@dataclass(frozen=True)
class Pitfall:
    """A claim of the texts and how it is measured: ``grids`` (CompareConfig fields over the base, one
    study each), its ``effects``; or ``published`` (a point claim on ``metric``) or ``count`` (an exact
    token count)."""

    key: str
    claim: str
    source: str
    grids: tuple[dict[str, Any], ...]
    effects: tuple[Effect, ...] = ()
    cnn: bool = False  # whether its cells need their CNN trained
    published: float | None = None
    count: bool = False
    trend: str = ""  # a second claim: the effect moves against its sign from the first grid to the last


def _block_pitfalls(p: Profile) -> list[Pitfall]:
    """The pitfalls of the block: positions, post-norm, BatchNorm, a causal mask."""
    return [
        Pitfall(
            "positions",
            "Without positions the model cannot tell a shuffled image from the original (attention is "
            "permutation-equivariant), and it needs them",
            "all four texts",
            ({"position": ["abs", "sincos", "rope", "none"], "permute": True},),
            (
                Effect("position", "none", "abs", "permuted_agreement", 1, "agreement with shuffled patches"),
                Effect("position", "none", "abs", "best_val_acc", -1, "best validation accuracy"),
            ),
        ),
        Pitfall(
            "post-norm",
            "Post-norm without warmup diverges at ordinary learning rates; pre-norm is the robust default",
            "the Keras page; the chapter",
            ({"block": ["prenorm", "postnorm"], "lr": list(p.lrs), "warmup": [0.0, 2.0]},),
            (Effect("block", "postnorm", "prenorm", "best_val_acc", -1, "best validation accuracy"),),
        ),
        Pitfall(
            "batchnorm",
            "BatchNorm in a transformer block is a pitfall: per-token LayerNorm is why the block trains "
            "without batch-statistics trouble",
            "the Keras page",
            ({"norm": ["layernorm", "batchnorm"]},),
            (Effect("norm", "batchnorm", "layernorm", "best_val_acc", -1, "best validation accuracy"),),
        ),
        Pitfall(
            "causal",
            "A causal mask on patches hides a 'future' that does not exist (a classifier ViT needs none)",
            "the course notes",
            ({"mask": ["none", "causal"], "pool": ["mean", "token"]},),
            (Effect("mask", "causal", "none", "best_val_acc", -1, "best validation accuracy"),),
        ),
    ]


def _smaller_patch_raises(p: Profile, metric: str, meaning: str) -> tuple[Effect, Effect]:
    """The profile's smallest patch raises ``metric`` (its ``meaning``) over its own patch; its largest lowers it."""
    return (
        Effect("patch", min(p.patches), p.patch, metric, 1, meaning),
        Effect("patch", max(p.patches), p.patch, metric, -1, meaning),
    )


def _patch_pitfalls(p: Profile) -> list[Pitfall]:
    """The pitfalls of the patch: its cost, the detail it keeps, overlapping windows."""
    return [
        Pitfall(
            "patch-cost",
            "Shrinking the patch to 'see more detail' multiplies the cost: halving it quadruples the tokens",
            "the Keras page; the course notes",
            ({"patches": list(p.patches)},),
            _smaller_patch_raises(p, "seconds", "training seconds"),
        ),
        Pitfall(
            "patch-detail",
            "Small patches preserve fine detail; large ones make each token summarise more of the image",
            "the NumPy chapter; the course notes",
            ({"patches": list(p.patches)},),
            _smaller_patch_raises(p, "best_val_acc", "best validation accuracy"),
        ),
        Pitfall(
            "overlap",
            "Counting overlapping windows as H W / P^2 miscounts the tokens (ViT patches tile)",
            "the course notes",
            ({"stride": ["patch", str(p.stride)]},),
            (Effect("stride", str(p.stride), "patch", "best_val_acc", 1, "best validation accuracy"),),
            count=True,
        ),
    ]


def _data_pitfalls(p: Profile) -> list[Pitfall]:
    """The pitfalls of the data: augmentation, and the claim that ViTs need huge data."""
    return [
        Pitfall(
            "augmentation",
            "Augmentation hurt on this data (centred, pose-normalised images)",
            "the Keras page",
            ({"augment": ["none", "light", "strong"]},),
            (
                Effect("augment", "light", "none", "best_val_acc", -1, "best validation accuracy"),
                Effect("augment", "strong", "none", "best_val_acc", -1, "best validation accuracy"),
            ),
        ),
        Pitfall(
            "huge-data",
            "'ViTs need huge data', quoted as a law: a CNN of the same size leads on small data",
            "the course notes; the chapter (the Keras page calls it conditional)",
            tuple({"rows": [rows], "epochs": epochs, "cnns": ["matched"]} for rows, epochs in p.sweep),
            (Effect("cnn", "vit", "cnn", "best_val_acc", -1, "best validation accuracy, ViT − CNN"),),
            cnn=True,
            trend="… and the ViT catches up as the rows grow",
        ),
    ]


def pitfalls_for(profile: Profile) -> list[Pitfall]:
    """The preset's pitfalls on ``profile``'s dataset."""
    p = profile
    out = [*_block_pitfalls(p), *_patch_pitfalls(p), *_data_pitfalls(p)]
    if p.test_protocol is not None:
        rows, epochs = p.test_protocol
        out.append(
            Pitfall(
                "test-accuracy",
                f"The page's ViT scores {PUBLISHED_TEST_ACC:.4f} on the full test split ({rows:,} rows, "
                f"{epochs} epochs)",
                "the Keras page",
                ({"rows": [rows], "epochs": epochs},),
                published=PUBLISHED_TEST_ACC,
            )
        )
    return out
