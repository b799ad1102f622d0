"""The training-mode axis of a comparison: its values checked, planned as a ViT-only axis, and the report's
section: each mode's costs and the seed-paired verdict against full fine-tuning."""

import pytest

from vitlab.errors import ConfigError
from vitlab.experiments.config import CompareConfig
from vitlab.experiments.plan import grid_axes
from vitlab.experiments.records import CompareResult, Plan, RunRecord
from vitlab.experiments.tuning import tune_groups, tune_lines, tune_verdicts


def test_tuning_needs_a_pretrained_encoder_and_known_modes():
    with pytest.raises(ConfigError, match="nothing pretrained: give --init CKPT"):
        CompareConfig(tune=["full", "head"])
    with pytest.raises(ConfigError, match="tune must be one of"):
        CompareConfig(tune=["full", "sideways"], init="runs/encoder")
    config = CompareConfig(tune=["full", "last-2", "lora"], init="runs/encoder")
    axis = next(a for a in grid_axes(config) if a.name == "tune")
    assert (axis.field, axis.values, axis.only) == ("tune", ("full", "last-2", "lora"), "vit")
    assert not any(a.name == "tune" for a in grid_axes(CompareConfig()))  # the default is no axis


def record(mode: str, seed: int, rows: int, acc: float) -> RunRecord:
    cost = {"trainable_params": 10 if mode != "full" else 100, "total_params": 100}
    cost |= {"optimizer_state_bytes": 8 * cost["trainable_params"], "step_seconds": 0.01}
    return RunRecord(
        key=f"{mode}-{seed}-{rows}",
        kind="vit",
        model="vit-digits",
        widths=None,
        axes={"seed": seed, "rows": rows, "patch": 2, "tune": mode},
        train_rows=rows,
        params=100,
        best_val_acc=acc,
        best_epoch=1,
        final_train_acc=acc,
        gap=0.0,
        val_ece=None,
        test_acc=acc,
        seconds=1.0,
        curves={},
        cost=cost,
    )


def result_of(records):
    config = CompareConfig(tune=["full", "head", "lora"], init="runs/encoder", seeds=3)
    plan = Plan(grid_axes(config), [], [])
    return CompareResult(config, plan, {r.key: r for r in records}, {}, 1.0, 1.0)


def test_the_section_judges_each_mode_against_full_fine_tuning_by_seed_pairs():
    records = []
    for seed, noise in enumerate((0.0, 0.01, -0.01)):
        records += [
            record("full", seed, 50, 0.60 + noise),
            record("head", seed, 50, 0.70 + noise),  # better by 0.1 on every seed
            record("lora", seed, 50, 0.60 - noise),  # as good, noisily
            record("full", seed, 500, 0.90 + noise),
            record("head", seed, 500, 0.80 + noise),  # worse by 0.1
        ]
    result = result_of(records)
    _, found = tune_verdicts(tune_groups(result))
    verdicts = {(v["rows"], v["mode"]): (round(v["difference"], 6), v["verdict"]) for v in found}
    assert verdicts == {
        (50, "head"): (0.1, "beats full fine-tuning"),
        (50, "lora"): (0.0, "inconclusive"),
        (500, "head"): (-0.1, "loses to full fine-tuning"),
    }
    text = "\n".join(tune_lines(result))
    assert "## Training modes" in text and "| 50 rows | head | 0.7000 ± 0.0100 | 10 / 100 | 0.1 KiB |" in text
