"""The reports the analysis commands print are library functions that return their text."""

import json

import pytest

from vitlab.analysis.cost_report import cost_report, select_pairs
from vitlab.analysis.params import params_report
from vitlab.analysis.qk import QK_DIMS, qk_variance_report
from vitlab.analysis.shapes import shapes_report
from vitlab.cli.main import main
from vitlab.errors import ConfigError
from vitlab.models import describe_models

SIZES = dict(
    dim=768, depth=12, heads=12, mlp_ratio=4.0, in_chans=3, batch=1, class_token=False,
    window_size=7, lowrank_k=64, num_latents=16, sparse_local=None, sparse_stride=None,
)  # fmt: skip


@pytest.mark.parametrize(
    "argv, report",
    [
        (["cost"], lambda: cost_report(SIZES)),
        (["cost", "--json", "--pairs", "28/7"], lambda: cost_report(SIZES, pairs=[(28, 7)], as_json=True)),
        (["params", "vit-seed"], lambda: params_report("vit-seed", {})),
        (["shapes", "--image", "28", "--patch", "7"], lambda: shapes_report(image=28, patch=7)),
        (["models", "vit"], lambda: "\n".join(describe_models("vit"))),
    ],
)
def test_each_command_prints_its_report(argv, report, capsys):
    assert main(argv) == 0
    assert capsys.readouterr().out == report() + "\n"


def test_cost_report_json_and_pairs():
    report = json.loads(cost_report(SIZES, ("full", "window"), images=[224], patches=[16, 8], as_json=True))
    assert [(r["image"], r["patch"]) for r in report["rows"]] == [(224, 16), (224, 8)]
    assert list(report["attention"]) == ["window"]
    assert select_pairs(None, None, None) == ((28, 7), (28, 4), (64, 8), (224, 16), (224, 8))
    assert select_pairs(None, None, [8], plot=True)[:2] == ((224, 8), (320, 8))
    with pytest.raises(ConfigError, match="not both"):
        select_pairs([(28, 7)], [28], None)
    with pytest.raises(ConfigError, match="go together"):
        select_pairs(None, [28], None)


def test_params_report_refuses_a_model_too_large_to_build():
    assert "71,946" in params_report("vit-seed", {})
    with pytest.raises(ConfigError, match="--max-gib"):
        params_report("vit-seed", {"img_size": 560}, limit_gib=0.001)


def test_qk_variance_report_has_a_row_per_width():
    lines = qk_variance_report().splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("d_k"))
    assert [int(line.split()[0]) for line in lines[start + 1 :]] == list(QK_DIMS)
