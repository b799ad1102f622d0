"""Sizes out of range on the command line: exit code 2 and one line on stderr that names the option or field."""

import pytest
from safetensors.torch import save_file

from vitlab.cli.main import main
from vitlab.interop import vitlab_to_timm
from vitlab.models import build_registered


@pytest.mark.parametrize(
    "argv, named",
    [
        (["shapes", "--heads", "0"], "--heads"),
        (["shapes", "--depth", "0"], "--depth"),
        (["shapes", "--image", "-28"], "--image"),
        (["shapes", "--patch", "0"], "--patch"),
        (["shapes", "--dim", "100000"], "--dim"),
        (["shapes", "--channels", "0"], "--channels"),
        (["shapes", "--dim", "64", "--heads", "5"], "num_heads 5"),
        (["shapes", "--depth", "1024"], "traced at most"),
        (["params", "vit-seed", "--set", "num_heads=0"], "num_heads"),
        (["params", "vit-seed", "--set", "depth=0"], "depth"),
        (["params", "vit-seed", "--set", "depth=abc"], "depth must be an integer, got 'abc'"),
        (["params", "vit-seed", "--set", "mlp_ratio=NaN"], "mlp_ratio"),
        (["params", "vit-seed", "--set", "drop_path_rate=2"], "drop_path_rate"),
        (["params", "vit-seed", "--set", "qkv_bias=yes"], "qkv_bias must be true or false"),
        (
            ["params", "vit-seed", "--set", "embed_dim=16384", "--set", "num_heads=16", "--set", "depth=1024"],
            "parameters",
        ),
        (["params", "cnn-seed", "--set", "widths=[8,0]"], "widths[1]"),
        (["params", "swin-nano-patch2-window4-32", "--set", "depths=[2,-1,2]"], "depths[1]"),
        (["cost", "--image", "-224", "--patch", "16"], "image"),
        (["cost", "--image", "224", "--patch", "0"], "patch"),
        (["cost", "--pairs", "224/0"], "patch"),
        (["cost", "--mlp-ratio", "nan"], "--mlp-ratio"),
        (["cost", "--mlp-ratio", "inf"], "--mlp-ratio"),
        (["cost", "--heads", "0"], "--heads"),
        (["cost", "--batch", "-1"], "--batch"),
        (["cost", "--channels", "0"], "--channels"),
        (["cost", "--window", "0"], "--window"),
        (["cost", "--rank", "0"], "--rank"),
        (["cost", "--latents", "0"], "--latents"),
    ],
)
def test_sizes_out_of_range_are_one_line_naming_the_option(argv, named, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"vitlab {argv[0]}: error: ") and named in err


def test_convert_refuses_zero_heads(tmp_path, capsys):
    state = vitlab_to_timm(build_registered("vit-seed").state_dict())
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "timm.safetensors"))
    dst = tmp_path / "vitlab.safetensors"
    assert main(["convert", str(tmp_path / "timm.safetensors"), str(dst), "--num-heads", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "num_heads must be a positive integer" in err and not dst.exists()
    assert main(["convert", str(tmp_path / "timm.safetensors"), str(dst), "--num-heads", "4", "--img-size", "0"]) == 2
    assert "img_size" in capsys.readouterr().err and not dst.exists()
    assert main(["convert", str(tmp_path / "timm.safetensors"), str(dst), "--num-heads", "4"]) == 0 and dst.exists()
