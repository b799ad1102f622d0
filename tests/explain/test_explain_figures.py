"""Figures are real PNG files of the size their docstrings promise; the textbook demonstrations behave."""

import math
import struct
from pathlib import Path

import matplotlib
import pytest
import torch

from vitlab.explain.figures import (
    DPI,
    PANEL,
    plot_cascade,
    plot_curves,
    plot_head_attention,
    plot_maps,
    plot_matrices,
    plot_position_similarity,
    plot_temperature_sweep,
)
from vitlab.explain.maps import position_similarity
from vitlab.explain.report import attention_examples
from vitlab.explain.textbook import (
    TOKEN_KINDS,
    make_tokens,
    self_attention,
    temperature_sweep,
    textbook_figures,
)
from vitlab.ops.positions import sincos_2d


def png_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` from the PNG header, after checking the signature."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def inches(width: float, height: float) -> tuple[int, int]:
    return round(width * DPI), round(height * DPI)


def test_backend_is_headless():
    assert matplotlib.get_backend().lower() == "agg"


@pytest.mark.slow
def test_map_figures_have_the_promised_size(tmp_path):
    image = torch.rand(1, 8, 8)
    maps = {"a": torch.rand(4, 4), "b": torch.rand(4, 4), "c": torch.rand(4, 4)}
    path = plot_maps(image, maps, tmp_path / "maps.png", title="t", patch=2)
    assert png_size(path) == inches(PANEL * 4 * 1.25, PANEL + 1.4)
    heads = plot_head_attention(torch.rand(3, 8, 8), torch.rand(2, 3, 4, 4), tmp_path / "h.png")
    assert png_size(heads) == inches(PANEL * 4 + 1, PANEL * 2 + 1)
    curves = {
        "occlusion": {"deletion": [1, 0.5, 0], "insertion": [0, 0.5, 1]},
        "random": {"deletion": [1, 0.8, 0], "insertion": [0, 0.2, 1]},
    }
    assert png_size(plot_curves(curves, tmp_path / "c.png")) == inches(9, 3.6)
    cascade = plot_cascade({"gradient": [0.9, None, 0.1]}, ["head", "blocks.0", "tokens"], tmp_path / "k.png", 0.5)
    assert png_size(cascade) == inches(7, 3.6)


@pytest.mark.slow
def test_textbook_figures(tmp_path):
    paths = textbook_figures(tmp_path)
    assert [p.name for p in paths] == ["positions.png", "token_attention.png", "temperature.png"]
    assert png_size(paths[0]) == inches(3.2 * 2 + 1, 3.6)
    assert png_size(paths[1]) == inches(3 * 3 + 1, 3.6)
    assert png_size(paths[2]) == inches(7, 3.6)
    tables = {"x": torch.randn(9, 8)}
    assert png_size(plot_position_similarity(tables, (3, 3), tmp_path / "p.png")) == inches(3.2 + 1, 3.6)
    assert png_size(plot_matrices({"m": torch.rand(4, 4)}, tmp_path / "m.png")) == inches(3 + 1, 3.6)
    assert png_size(plot_temperature_sweep(torch.rand(2, 5), [1, 2], tmp_path / "t.png")) == inches(7, 3.6)


def test_position_similarity_of_sinusoids():
    sim = position_similarity(sincos_2d((6, 6), 64))
    torch.testing.assert_close(sim.diagonal(), torch.ones(36))
    torch.testing.assert_close(sim, sim.T)
    centre = 3 * 6 + 3
    # neighbours along a row are more alike than positions three columns away
    assert sim[centre, centre + 1] > sim[centre, centre - 3]
    assert sim[centre, centre + 6] > sim[centre, centre - 18]


def test_token_kinds_shape_their_attention():
    attention = {kind: self_attention(make_tokens(kind, n=16, dim=16, period=4)) for kind in TOKEN_KINDS}
    for matrix in attention.values():
        torch.testing.assert_close(matrix.sum(-1), torch.ones(16))
    repeated = attention["repeated"]
    torch.testing.assert_close(repeated[:, 4:], repeated[:, :-4])  # identical keys every period
    local = attention["local"]
    near = torch.stack([local[i, i + 1] for i in range(15)]).mean()
    far = torch.stack([local[i, i + 8] for i in range(8)]).mean()
    assert near > far
    with pytest.raises(ValueError, match="token kind"):
        make_tokens("spiral")


def test_temperature_sharpens_and_flattens():
    scores = torch.randn(16, generator=torch.Generator().manual_seed(0))
    weights = temperature_sweep(scores, [0.25, 1.0, 4.0, 1000.0])
    entropy = -(weights * weights.log()).sum(-1)
    assert torch.all(entropy[:-1] < entropy[1:])
    assert entropy[-1] == pytest.approx(math.log(16), abs=1e-3)
    with pytest.raises(ValueError, match="temperatures"):
        temperature_sweep(scores, [0.0])


@pytest.mark.slow
def test_attention_examples_for_the_compare_report(digits_run, tmp_path):
    paths = attention_examples(digits_run.model, digits_run.splits, out_dir=tmp_path)
    names = [p.name for p in paths]
    assert names[:2] == ["attention_correct_0.png", "attention_correct_1.png"]
    assert all(n.startswith("attention_wrong_") for n in names[2:]) and len(names) <= 4
    layers, heads = digits_run.model.config.depth, digits_run.model.config.num_heads
    assert all(png_size(p) == inches(PANEL * (1 + heads) + 1, PANEL * layers + 1) for p in paths)
