"""The textbook's claims: the page's differences from its own table, verdicts decided by the seed
spread (checked both ways on hand-made runs), and the report's table beside the published one."""

import math
from types import SimpleNamespace

import pytest

from vitlab.experiments import CLAIMS, PUBLISHED, claim_verdicts
from vitlab.experiments.aggregates import Aggregate
from vitlab.experiments.textbook import published_difference
from vitlab.experiments.textbook_report import textbook_table, verdict_table
from vitlab.reporting import judge


def test_published_differences_follow_the_pages_table():
    assert published_difference("best_val_acc", 1000) == pytest.approx(0.0370)
    assert published_difference("best_val_acc", 4000) == pytest.approx(0.0350)
    assert published_difference("gap", 1000) == pytest.approx(0.1690 - 0.0270)
    assert published_difference("gap", 4000) == pytest.approx(0.1215 - 0.0040)
    assert math.exp(published_difference("seconds", 1000)) == pytest.approx(62.0 / 42.8)
    assert math.exp(published_difference("seconds", 4000)) == pytest.approx(56.6 / 94.3)
    assert PUBLISHED["vit", 1000]["params"] == 70_922 and PUBLISHED["convnet", 4000]["params"] == 60_554


@pytest.mark.parametrize(
    "values,sign,verdict",
    [
        ([0.03, 0.04, 0.05], 1, "reproduced"),  # mean 0.04, 2 SE = 0.0115
        ([0.03, 0.04, 0.05], -1, "not reproduced"),
        ([-0.01, 0.02, 0.05], 1, "inconclusive"),  # mean 0.02, 2 SE = 0.0346
        ([0.30], 1, "inconclusive"),  # one seed: no spread, no verdict
    ],
)
def test_judge_uses_two_standard_errors(values, sign, verdict):
    mean, band, found = judge(values, sign)
    assert mean == pytest.approx(sum(values) / len(values)) and found == verdict
    if len(values) > 1:
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        assert band == pytest.approx(2 * sd / math.sqrt(len(values)))


def _study(vit, cnn):
    """Cells and records of a textbook-shaped study: per (rows, seed), ViT and CNN metric dicts."""
    cells, records = [], {}
    for (rows, seed), v in vit.items():
        records[f"v{rows}{seed}"] = SimpleNamespace(**v)
        records[f"c{rows}{seed}"] = SimpleNamespace(**cnn[rows, seed])
        cells.append(
            SimpleNamespace(
                axes={"seed": seed, "rows": rows, "augment": "none", "patch": 7, "cnn": "textbook"},
                vit=f"v{rows}{seed}",
                cnn=f"c{rows}{seed}",
            )
        )
    return cells, records


def test_verdicts_follow_the_paired_differences():
    vit, cnn = {}, {}
    for seed in range(3):
        # the ViT leads at 1,000 rows by ~0.03, trails at 4,000 by ~0.05; its gap is larger only at 1,000;
        # it is slower at both sizes
        vit[1000, seed] = dict(best_val_acc=0.72 + 0.001 * seed, gap=0.15, seconds=20.0 + seed)
        cnn[1000, seed] = dict(best_val_acc=0.69, gap=0.02, seconds=10.0)
        vit[4000, seed] = dict(best_val_acc=0.80, gap=0.01 * seed, seconds=40.0)
        cnn[4000, seed] = dict(best_val_acc=0.85 - 0.002 * seed, gap=0.01 * seed, seconds=30.0 + seed)
    verdicts = claim_verdicts(*_study(vit, cnn))
    assert [v.claim for v in verdicts] == list(CLAIMS)
    assert [v.verdict for v in verdicts] == ["reproduced", "not reproduced", "inconclusive", "not reproduced"]
    assert all(v.setting == {"augment": "none", "patch": 7, "cnn": "textbook"} for v in verdicts)
    gap = verdicts[2]
    assert [p.verdict for p in gap.parts] == ["reproduced", "inconclusive"] and gap.parts[1].mean == 0
    timing = verdicts[3].parts
    assert timing[0].verdict == "reproduced" and timing[1].verdict == "not reproduced"  # slower at 4,000 too
    assert timing[0].mean == pytest.approx(sum(math.log((20 + s) / 10) for s in range(3)) / 3)
    table = "\n".join(verdict_table(verdicts))
    assert "| The ViT leads at 1,000 rows | the textbook-size plain CNN |" in table
    assert "1,000 rows: +0.0370" in table and "1,000 rows: +0.0310 ± 0.0012, 3 seeds (reproduced)" in table
    assert "×1.45" in table and "**not reproduced**" in table


def test_claims_at_rows_not_trained_are_left_out():
    vit = {(1000, s): dict(best_val_acc=0.7, gap=0.1, seconds=1.0) for s in range(2)}
    cnn = {(1000, s): dict(best_val_acc=0.6, gap=0.0, seconds=2.0) for s in range(2)}
    assert [v.claim.text for v in claim_verdicts(*_study(vit, cnn))] == ["the ViT leads at 1,000 rows"]


def test_the_textbook_table_sets_published_numbers_beside_vitlabs():
    def agg(kind, label, rows, cnn=None):
        axes = {"rows": rows, "augment": "none", **({"patch": 7} if kind == "vit" else {"cnn": cnn})}
        mean = {
            "params": 71946.0 if kind == "vit" else 60554.0,
            "best_val_acc": 0.72,
            "final_train_acc": 0.9,
            "seconds": 12.0,
            "test_acc": 0.71,
        }
        return Aggregate(kind, label, axes, rows, 5, mean, {k: 0.01 for k in mean}, {})

    lines = textbook_table(
        [
            agg("vit", "ViT patch 7", 1000),
            agg("cnn", "CNN 32-64-64 (textbook-size plain)", 1000, "textbook"),
            agg("cnn", "CNN 24-48-96 (size-matched)", 4000, "matched"),
        ]
    )
    assert lines[0] == (
        "| Model | Rows | Parameters (textbook) | Parameters (vitlab) | Best val accuracy (textbook) "
        "| Best val accuracy (vitlab) | Final train accuracy (textbook) | Final train accuracy "
        "(vitlab) | Seconds (textbook) | Seconds (vitlab) | Test accuracy (vitlab) |"
    )
    assert lines[2].startswith("| ViT | 1,000 | 70,922 | 71,946 | 0.7160 | 0.7200 ± 0.0100 | 0.8850 |")
    assert lines[3].startswith("| CNN 32-64-64 (textbook-size plain) | 1,000 | 60,554 | 60,554 | 0.6790 |")
    assert lines[4].startswith("| CNN 24-48-96 (size-matched) | 4,000 | – | 60,554 | – |")
