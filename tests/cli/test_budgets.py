"""Budgets before allocation: work a user's settings control is estimated first and refused in one line that
names the figure and the limit, before anything is allocated.

- generated data (``shapes`` for segment / detect / promptable, captioned shapes for CLIP): ``count`` x
  ``image_size``^2 x the bytes a pixel takes at the peak of making it, against
  ``vitlab.data.shapes.GENERATED_DATA_LIMIT``;
- ``vitlab params``: the model's estimated weights and position tables against ``--max-gib``.
"""

import resource

import pytest

from vitlab.cli.main import main
from vitlab.data import shapes
from vitlab.data.captions import generate_captioned_shapes
from vitlab.errors import ConfigError


def address_space() -> int:
    """This process's virtual memory now, bytes (Linux)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


@pytest.mark.parametrize(
    "argv, figure",
    [
        (["train", "--task", "segment", "--set", "count=10000000"], "10,000,000 generated shapes images of 64x64"),
        (["train", "--task", "segment", "--set", "image_size=8192"], "5,000 generated shapes images of 8192x8192"),
        (["train", "--task", "detect", "--set", "image_size=4096"], "5,000 generated shapes images of 4096x4096"),
        (["train", "--task", "promptable", "--set", "count=10000000"], "10,000,000 generated shapes images"),
        (["train", "--task", "clip", "--set", "image_size=8192"], "20,000 generated captioned shapes images"),
        (["train", "--task", "clip", "--set", "count=10000000"], "10,000,000 generated captioned shapes images"),
    ],
)
def test_generated_data_over_the_budget_is_refused_naming_figure_and_limit(argv, figure, capsys):
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and figure in lines[0], lines
    assert "GiB of memory, over the limit of 8.0 GiB for generated data" in lines[0]
    assert "GENERATED_DATA_LIMIT" in lines[0] and "lower count or image_size" in lines[0]


def test_the_limit_is_the_documented_constant_and_the_generators_check_it_too(monkeypatch):
    assert shapes.GENERATED_DATA_LIMIT == 8 * 2**30
    need = shapes.generated_bytes("shapes", 100, 32)
    monkeypatch.setattr(shapes, "GENERATED_DATA_LIMIT", need - 1)
    with pytest.raises(ConfigError, match="100 generated shapes images of 32x32 pixels"):
        shapes.generate_shapes(100, 32)
    with pytest.raises(ConfigError, match="over the limit"):
        generate_captioned_shapes(10_000, 32)
    monkeypatch.setattr(shapes, "GENERATED_DATA_LIMIT", need)
    assert len(shapes.generate_shapes(100, 32)) == 100  # the limit itself is allowed


def test_params_refuses_a_huge_position_table_before_building_it(capsys):
    argv = ["params", "vit-seed", "--set", "img_size=8192", "--set", "patch_size=1"]
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # 4 GiB more than this process holds: building the 16 GiB table would fail here, not exhaust the machine
    resource.setrlimit(resource.RLIMIT_AS, (address_space() + 4 * 2**30, hard))
    try:
        assert main(argv) == 2
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "has about 4,295,035,212 parameters (position tables included), 16.0 GiB at fp32" in lines[0]
    assert "builds at most 4 GiB (--max-gib)" in lines[0]


def test_params_builds_what_the_limit_allows(capsys):
    assert main(["params", "vit-seed", "--set", "img_size=56", "--max-gib", "0.001"]) == 0
    assert "total" in capsys.readouterr().out
    assert main(["params", "vit-seed", "--set", "img_size=560", "--max-gib", "0.001"]) == 2
    assert "builds at most 0.001 GiB (--max-gib)" in capsys.readouterr().err
    assert main(["params", "vit-seed", "--max-gib", "0"]) == 2
    assert "--max-gib must be a positive number" in capsys.readouterr().err


def test_a_study_of_ten_million_seeds_is_refused_before_planning(tmp_path, capsys):
    out = tmp_path / "never-written"
    assert main(["compare", "--seeds", "10000000", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "10,000,000 seeds" in err and "limit of 100,000" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
