"""``vitlab params``: the table prints computed figures with thousands separators."""

import torch

from vitlab.cli.main import main
from vitlab.models import build_registered, count_params


def line_with(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(start))


def test_vit_seed_table(capsys):
    assert main(["params", "vit-seed"]) == 0
    out = capsys.readouterr().out
    d = 64
    assert line_with(out, "patch projection").split()[-1] == f"{7 * 7 * d + d:,}"
    assert "49 -> 64" in line_with(out, "patch projection")
    assert line_with(out, "position embedding").split()[-1] == f"{16 * d:,}"
    assert line_with(out, "block 1 attention").split()[-1] == f"{4 * (d * d + d):,}"
    assert line_with(out, "block 1 MLP").split()[-1] == f"{d * 128 + 128 + 128 * d + d:,}"
    total = sum(p.numel() for p in build_registered("vit-seed").parameters())
    assert line_with(out, "total").split()[-1] == f"{total:,}" == "71,946"
    assert line_with(out, "non-trainable").split()[-1] == "0"
    fixed = count_params(build_registered("vit-seed-sincos"))
    assert f"{total:,} - {16 * d:,} = {fixed:,}" in out
    assert "textbook" in out


def test_overrides_change_the_model(capsys):
    assert main(["params", "vit-seed", "--set", "depth=1", "--set", "pos_embed=sincos2d"]) == 0
    out = capsys.readouterr().out
    assert "block 2" not in out and "position embedding" not in out and "note" not in out
    total = count_params(build_registered("vit-seed", depth=1, pos_embed="sincos2d"))
    assert line_with(out, "total").split()[-1] == f"{total:,}"


def test_cnn_table(capsys):
    assert main(["params", "cnn-seed", "--set", "widths=[8,16]"]) == 0
    out = capsys.readouterr().out
    assert line_with(out, "stage 2").split()[-1] == f"{9 * 8 * 16 + 2 * 16:,}"
    assert line_with(out, "total").split()[-1] == f"{count_params(build_registered('cnn-seed', widths=(8, 16))):,}"


def test_bad_overrides_name_the_way_out(capsys):
    assert main(["params", "vit-seed", "--set", "depth"]) == 2
    assert "key=value" in capsys.readouterr().err
    assert main(["params", "vit-seed", "--set", "deep=2"]) == 2
    assert "depth" in capsys.readouterr().err


def test_vit_seed_compares_the_input_stage_with_a_convolution(capsys):
    assert main(["params", "vit-seed"]) == 0
    out = capsys.readouterr().out
    line = line_with(out, "for comparison")
    c, d = 1, 64
    conv = torch.nn.Conv2d(c, d, 3)  # the oracle: PyTorch's own count
    assert sum(p.numel() for p in conv.parameters()) == 3 * 3 * c * d + d == 640
    assert f"Conv2D({d}, 3x3) on 1 channel = 3*3*{c}*{d} + {d} = 640 parameters" in line
    assert f"{7 * 7 * d + d:,} on the patch projection and {16 * d:,} on the position table" in out


def test_convolution_comparison_follows_the_model(capsys):
    assert main(["params", "vit-seed", "--set", "in_chans=3", "--set", "pos_embed=sincos2d"]) == 0
    out = capsys.readouterr().out
    assert f"= 3*3*3*64 + 64 = {3 * 3 * 3 * 64 + 64:,} parameters" in out
    assert "position table" not in out
    assert main(["params", "cnn-seed"]) == 0
    assert "for comparison" not in capsys.readouterr().out
