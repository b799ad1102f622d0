"""``vitlab cost``: the textbook's table with no arguments, pairs, and JSON."""

import itertools
import json

import pytest

from vitlab.analysis.cost import conv_pairs
from vitlab.cli.main import main
from vitlab.errors import ConfigError


def table_rows(out: str) -> list[list[str]]:
    return [
        line.split()
        for line in out.splitlines()
        if line.split() and "x" in line.split()[0] and line.split()[0].replace("x", "").isdigit()
    ]


def test_no_arguments_prints_the_textbook_rows(capsys):
    assert main(["cost"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert [r[:2] for r in rows] == [
        ["28x28", "7"],
        ["28x28", "4"],
        ["64x64", "8"],
        ["224x224", "16"],
        ["224x224", "8"],
    ]
    assert [r[2] for r in rows] == ["16", "49", "64", "196", "784"]
    assert [r[3] for r in rows] == ["256", "2,401", "4,096", "38,416", "614,656"]
    assert [r[4] for r in rows] == ["1.0x", "9.4x", "16.0x", "150.1x", "2,401.0x"]
    for r in rows:  # computed, not typed in
        side, patch = int(r[0].split("x")[0]), int(r[1])
        assert int(r[3].replace(",", "")) == ((side // patch) ** 2) ** 2


def test_all_pairs_of_images_and_patches_as_json(capsys):
    assert (
        main(
            [
                "cost",
                "--image",
                "224,448",
                "--patch",
                "16,8",
                "--class-token",
                "--json",
                "--dim",
                "64",
                "--heads",
                "4",
                "--depth",
                "2",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert [(r["image"], r["patch"]) for r in report["rows"]] == [(224, 16), (224, 8), (448, 16), (448, 8)]
    for r in report["rows"]:
        assert r["tokens"] == (r["image"] // r["patch"]) ** 2 + 1
        assert r["entries"] == r["tokens"] ** 2
        assert r["attention_memory"] == 4 * 4 * r["entries"]
    assert report["settings"]["heads"] == 4


def test_pairs(capsys):
    assert main(["cost", "--pairs", "28/7,224/16"]) == 0
    assert [r[:3] for r in table_rows(capsys.readouterr().out)] == [["28x28", "7", "16"], ["224x224", "16", "196"]]


def test_bad_arguments(capsys):
    assert main(["cost", "--image", "224"]) == 2
    assert "--patch" in capsys.readouterr().err
    assert main(["cost", "--pairs", "30/7"]) == 2
    assert "not divisible" in capsys.readouterr().err


def brute_conv_pairs(h: int, w: int) -> int:
    """Every (i, j) pair of grid cells with j inside the 3x3 window centred on i, by enumeration."""
    cells = list(itertools.product(range(h), range(w)))
    return sum(abs(a - c) <= 1 and abs(b - d) <= 1 for (a, b), (c, d) in itertools.product(cells, cells))


@pytest.mark.parametrize("grid", [(1, 1), (1, 5), (2, 3), (4, 4), (5, 7)])
def test_conv_pairs_match_enumeration(grid):
    assert conv_pairs(grid) == brute_conv_pairs(*grid)
    assert conv_pairs(grid, kernel=1) == grid[0] * grid[1]
    h, w = grid
    assert conv_pairs(grid) <= 9 * h * w  # the interior count is an upper bound, cut at the borders


def test_even_kernel_is_refused():
    with pytest.raises(ConfigError, match="odd"):
        conv_pairs((4, 4), kernel=2)


def test_interaction_table_for_the_textbook_rows(capsys):
    assert main(["cost"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["tokens", "N"])
    rows = [line.split() for line in lines[start + 1 :]]
    assert [r[1] for r in rows] == ["4x4", "7x7", "8x8", "14x14", "28x28"]
    for r in rows:
        side = int(r[1].split("x")[0])
        n = side * side
        assert int(r[0].replace(",", "")) == n
        assert int(r[2].replace(",", "")) == brute_conv_pairs(side, side)
        assert int(r[3].replace(",", "")) == 9 * n
        assert int(r[4].replace(",", "")) == n * n
    assert rows[3][2:5] == ["1,600", "1,764", "38,416"]  # 3x3 conv on 14x14 against attention on 196 tokens


def test_interactions_in_json(capsys):
    assert main(["cost", "--pairs", "28/7,56/8", "--class-token", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    mixed = report["interactions"]
    assert [(m["image"], m["patch"], m["grid"]) for m in mixed] == [(28, 7, [4, 4]), (56, 8, [7, 7])]
    for m in mixed:
        assert m["conv3x3"] == brute_conv_pairs(*m["grid"])
        assert m["attention"] == m["tokens"] ** 2  # patch tokens only, not the class token
