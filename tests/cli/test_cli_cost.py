"""``vitlab cost``: the textbook's table with no arguments, pairs, and JSON."""

import json

from vitlab.cli.main import main


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
