"""Every figure vitlab writes states its scale and fits its box: no text overlaps other text or leaves the canvas
(measured from matplotlib's renderer extents after drawing), and every map has a colour bar on its data's range."""

import pytest
import torch
from matplotlib.figure import Figure

from vitlab.plotting import fit, layout_problems, range_words, scale_problems


@pytest.fixture
def drawn(monkeypatch):
    """The figures saved while a test runs (each saved as usual, and kept to be measured)."""
    figures: list[Figure] = []
    save = Figure.savefig

    def keep(self, *args, **kwargs):
        figures.append(self)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


def assert_fits(figures):
    assert figures, "no figure was written"
    for fig in figures:
        assert layout_problems(fig) == []
        assert scale_problems(fig) == []


def grid_maps(layers, heads, side, uniform=False):
    g = torch.Generator().manual_seed(0)
    maps = torch.rand(layers, heads, side, side, generator=g)
    if uniform:
        maps = torch.full_like(maps, 1 / (side * side + 1)) + 1e-5 * maps
    return maps / maps.sum((-1, -2), keepdim=True)


LONG_TITLE = (
    "val #244: 1 → 1 (confidence 0.940); last layer, per head, max weight / max − min: 0.958/0.958, "
    "0.720/0.720, 0.467/0.438, 0.485/0.366; uniform: 1/197 = 0.0051 each, max − min 0"
)


@pytest.mark.parametrize("uniform", [False, True])
def test_explanation_maps_state_their_scale(drawn, tmp_path, uniform):
    from vitlab.explain.figures import plot_head_attention, plot_maps

    image = torch.rand(3, 32, 32)
    heads = grid_maps(4, 4, 8, uniform)
    maps = {
        "attention": heads[-1, 0],
        "rollout": heads[-1, 1],
        "gradient": 100 * heads[0, 2],
        "occlusion": -heads[0, 3],
    }
    plot_maps(image, maps, tmp_path / "maps.png", title=LONG_TITLE, patch=4, query="cls")
    spreads, maxima = heads.amax((-1, -2)) - heads.amin((-1, -2)), heads.amax((-1, -2))
    stats = {"spread": spreads, "max": maxima}
    plot_head_attention(image, heads, tmp_path / "heads.png", LONG_TITLE, patch=4, stats=stats, query="cls")
    assert_fits(drawn)
    bars = [ax for fig in drawn for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert bars and all(("near-uniform" in bar.get_ylabel()) == uniform for bar in bars[-1:])


def test_textbook_and_audit_figures_fit(drawn, tmp_path):
    from vitlab.explain.figures import (
        plot_attention_depth,
        plot_cascade,
        plot_curves,
        plot_matrices,
        plot_position_similarity,
        plot_temperature_sweep,
    )

    curves = {m: {"deletion": [1, 0.5, 0.2], "insertion": [0.1, 0.6, 0.9]} for m in ("attention", "rollout", "random")}
    plot_curves(curves, tmp_path / "curves.png", title=LONG_TITLE)
    stages = ["head", *(f"block {i}" for i in range(11, -1, -1)), "patch embedding"]
    plot_cascade({"attention": [0.9] * len(stages), "gradient": [None] * len(stages)}, stages, tmp_path / "c.png", 0.5)
    plot_position_similarity(
        {"learned": torch.randn(16, 8), "sinusoidal": torch.randn(16, 8)}, (4, 4), tmp_path / "p.png"
    )
    plot_matrices(
        {"random": torch.rand(17, 17).softmax(-1), "local": torch.eye(17)}, tmp_path / "m.png", title=LONG_TITLE
    )
    plot_temperature_sweep(torch.rand(3, 197).softmax(-1), [0.5, 1.0, 2.0], tmp_path / "t.png")
    depth = {"mean_distance": [[3.0, 4.0]] * 12, "rollout_distance": [5.0] * 12, "uniform_distance": 6.0}
    plot_attention_depth(depth, tmp_path / "d.png", title=LONG_TITLE)
    assert_fits(drawn)


def test_comparison_figures_fit(drawn, tmp_path):
    from vitlab.experiments.aggregates import Aggregate
    from vitlab.experiments.figures import plot_accuracy_vs_rows, plot_gap, plot_learning_curves

    aggregates = []
    for rows, train_rows in ((300, 300), (None, 1258)):
        for augment in ("none", "recipe"):
            for label in ("ViT patch 2", "ViT patch 4", "CNN 39-77-154"):
                metrics = {"best_val_acc": 0.9, "gap": 0.05}
                aggregates.append(
                    Aggregate(
                        "cnn" if label.startswith("CNN") else "vit",
                        label,
                        {"rows": rows, "augment": augment},
                        train_rows,
                        2,
                        metrics,
                        {"best_val_acc": 0.01, "gap": 0.01},
                        {"val_acc": [0.5, 0.8, 0.9], "train_acc": [0.5, 0.9, 1.0]},
                    )
                )
    plot_accuracy_vs_rows(aggregates, tmp_path / "a.png")
    plot_learning_curves(aggregates, tmp_path / "l.png")
    plot_gap(aggregates, tmp_path / "gap.png")
    assert_fits(drawn)


def test_evaluation_figures_fit(drawn, tmp_path):
    from vitlab.engine.figures import plot_confusion, plot_reliability
    from vitlab.engine.metrics import reliability

    probs = torch.rand(200, 10).softmax(-1)
    bins = reliability(probs, torch.randint(0, 10, (200,)))
    plot_reliability(bins, tmp_path / "r.png", calibrated=bins, title=LONG_TITLE)
    classes = [f"a class named {k}" for k in range(12)]
    plot_confusion(torch.randint(0, 50, (12, 12)).tolist(), classes, tmp_path / "confusion.png", title=LONG_TITLE)
    assert_fits(drawn)


def test_analysis_figures_fit(drawn, tmp_path):
    from vitlab.analysis.cost import cost_figure
    from vitlab.analysis.qk import qk_variance_figure

    cost_figure((32, 64, 128, 224), 16).savefig(tmp_path / "cost.png")
    dims = (8, 64, 512)
    qk_variance_figure({d: (float(d), 1.0) for d in dims}, {d: (0.9, 0.1) for d in dims}, 197).savefig(
        tmp_path / "q.png"
    )
    assert_fits(drawn)


def test_the_checks_see_what_they_measure(tmp_path):
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.imshow(torch.rand(4, 4).numpy())
    ax.set_title("a title " * 12)
    fig.text(0.5, 0.5, "here")
    fig.text(0.5, 0.5, "there")
    problems = layout_problems(fig)
    assert any("leaves the canvas" in p for p in problems) and any("overlaps" in p for p in problems)
    assert any("no colour bar" in p for p in scale_problems(fig))
    assert range_words(0.0049, 0.0052).endswith("near-uniform") and "near" not in range_words(0.0, 1.0)
    assert all(len(line) <= 40 for line in fit(LONG_TITLE, 3, 9).split("\n"))
