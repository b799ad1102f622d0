"""``vitlab shapes``: printed shapes follow the formulas."""

import ast

from vitlab.cli.main import main


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
