"""``vitlab shapes``: printed shapes follow the formulas."""

import ast
import math

import pytest

from vitlab.analysis.qk import qk_variance, softmax_peak
from vitlab.cli.main import main
from vitlab.errors import ConfigError


def shapes_printed(out: str) -> dict[str, tuple]:
    """``name  layout  (1, 2, 3)`` lines -> ``{name: (1, 2, 3)}``."""
    found = {}
    for line in out.splitlines():
        if line.endswith(")") and "  " in line:
            name = line.split("  ")[0]
            found[name] = ast.literal_eval(line[line.rindex("(") :])
    return found


def test_default_vit_b16_with_class_token(capsys):
    assert main(["shapes", "--class-token"]) == 0
    shapes = shapes_printed(capsys.readouterr().out)
    n, t = (224 // 16) ** 2, (224 // 16) ** 2 + 1
    assert shapes["X_patch"] == (1, n, 16 * 16 * 3)
    assert shapes["Q"] == (1, 12, t, 768 // 12)
    assert shapes["QK^T"] == shapes["attention weights"] == (1, 12, t, t)
    assert shapes["block output"] == (1, t, 768)


def test_small_greyscale(capsys):
    assert (
        main(
            [
                "shapes",
                "--image",
                "28",
                "--patch",
                "7",
                "--dim",
                "64",
                "--heads",
                "4",
                "--channels",
                "1",
                "--depth",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    shapes = shapes_printed(out)
    assert shapes["X_patch"] == (1, 16, 49) and shapes["V"] == (1, 4, 16, 16)
    assert "(B, H, T, d)" in out


def test_bad_sizes_report_an_error(capsys):
    assert main(["shapes", "--image", "30", "--patch", "7"]) == 2
    assert "not divisible by patch 7" in capsys.readouterr().err


def test_qk_variance_follows_the_theory(capsys):
    assert main(["shapes", "--qk-variance"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("d_k"))
    rows = [line.split() for line in lines[start + 1 :]]
    assert [int(r[0]) for r in rows] == [4, 16, 64, 256]
    for r in rows:
        d, raw, scaled = int(r[0]), float(r[1]), float(r[3])
        assert int(r[2]) == d and r[4] == "1"
        # Var(q.k) = d; its sample variance over n draws has relative sd sqrt((2 + 6/d) / n): allow 5 of them
        tolerance = 5 * math.sqrt((2 + 6 / d) / 10_000)
        assert raw == pytest.approx(d, rel=tolerance)
        assert scaled == pytest.approx(1, rel=tolerance)
        assert scaled == pytest.approx(raw / d, abs=2e-3)  # printed to 3 and 2 decimals


def test_qk_variance_is_seeded_and_checked():
    assert qk_variance(16, 500, seed=3) == qk_variance(16, 500, seed=3)
    assert qk_variance(16, 500, seed=3) != qk_variance(16, 500, seed=4)
    with pytest.raises(ConfigError, match="samples"):
        qk_variance(16, 1)


def test_unscaled_softmax_saturates_and_scaled_does_not():
    peaks = {d: softmax_peak(d, keys=64, samples=400) for d in (4, 16, 64, 256)}
    raw = [peaks[d][0] for d in sorted(peaks)]
    scaled = [peaks[d][1] for d in sorted(peaks)]
    assert raw == sorted(raw) and raw[-1] > 0.8  # sharper with every width, near one-hot at 256
    assert max(scaled) - min(scaled) < 0.02  # the scaled score's softmax does not depend on d_k
    assert all(1 / 64 < s < r for s, r in zip(scaled, raw, strict=True))
    # d_k = 1: the scale is 1, so both are the same softmax
    assert softmax_peak(1, samples=50)[0] == pytest.approx(softmax_peak(1, samples=50)[1])


def test_qk_variance_plot_is_written_and_needs_the_table(tmp_path, capsys):
    png = tmp_path / "qk.png"
    assert main(["shapes", "--qk-variance", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "max weight" in capsys.readouterr().out
    assert main(["shapes", "--plot", str(tmp_path / "again.png")]) == 2
    assert "add --qk-variance" in capsys.readouterr().err
