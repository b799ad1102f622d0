"""The conclusion sentences follow the numbers: hand-made cells, verdicts checked both ways."""

import pytest

from vitlab.experiments import Lead, conclusions, describe_cell, lead_sentence


def make_lead(
    lead=0.031, spread=0.012, seeds=3, rows=300, patch=2, augment="none", train_rows=None, vit=None, cnn=None
):
    base = {"best_val_acc": 0.9, "gap": 0.05, "val_ece": 0.04, "params": 1000}
    vit_mean = {**base, "best_val_acc": 0.9 + lead, **(vit or {})}
    cnn_mean = {**base, **(cnn or {})}
    return Lead(
        {"rows": rows, "augment": augment, "patch": patch},
        train_rows or rows or 1257,
        "ViT patch 2",
        "CNN 1-2-4",
        vit_mean,
        cnn_mean,
        lead,
        spread,
        seeds,
    )


def test_lead_larger_than_the_spread():
    assert lead_sentence(make_lead(0.031, 0.012, 3)) == (
        "At 300 rows with patch 2 and no augmentation the ViT leads the CNN by 0.031 "
        "(spread 0.012 across 3 seeds): larger than the spread."
    )


def test_lead_within_the_spread_and_the_cnn_ahead():
    sentence = lead_sentence(make_lead(-0.02, 0.05, 5, augment="light", patch=4))
    assert sentence == (
        "At 300 rows with patch 4 and light augmentation the CNN leads the ViT by 0.020 "
        "(spread 0.050 across 5 seeds): within the spread."
    )


def test_one_seed_spread_unknown():
    lead = make_lead(0.1, None, 1, rows=None, train_rows=1257)
    assert lead.verdict == "spread unknown"
    assert lead_sentence(lead) == (
        "At 1,257 rows (the full pool) with patch 2 and no augmentation the ViT leads "
        "the CNN by 0.100, from one seed: the seed-to-seed spread is unknown."
    )


def test_tie_and_equal_spread_are_not_leads():
    tie = make_lead(0.0, 0.01, 3)
    assert tie.leader == "tie" and "tie at 0.900" in lead_sentence(tie)
    assert make_lead(0.01, 0.01, 3).verdict == "within the spread"  # a lead must exceed the spread


def test_describe_cell_names_new_axes_and_the_recipes_augmentation():
    assert describe_cell({"seed": 0, "rows": 50, "attention": "window"}, 50) == "At 50 rows with window attention"
    assert (
        describe_cell({"rows": 50, "augment": "recipe", "patch": 4}, 50)
        == "At 50 rows with patch 4 and the recipe's augmentation"
    )


def test_tally_and_trend_follow_the_numbers():
    small = make_lead(0.04, 0.01, 3, rows=300)
    large = make_lead(-0.01, 0.02, 3, rows=1200)
    text = conclusions([small, large])
    assert (
        "Over the 2 cells the ViT leads in 1 and the CNN in 1; the lead is larger than the seed-to-seed "
        "spread in 1 of them." in text
    )
    assert (
        "With patch 2 and no augmentation, the ViT's margin (ViT − CNN) goes from +0.040 at 300 rows to "
        "−0.010 at 1,200: more data moves it towards the CNN."
    ) in text
    flipped = conclusions([make_lead(-0.04, 0.01, 3, rows=300), make_lead(0.01, 0.02, 3, rows=1200)])
    assert any("from −0.040 at 300 rows to +0.010 at 1,200: more data moves it towards the ViT." in s for s in flipped)


def test_one_seed_tally_says_noise_cannot_be_ruled_out():
    text = conclusions([make_lead(0.05, None, 1), make_lead(0.02, None, 1, patch=4)])
    assert text[2] == (
        "Over the 2 cells the ViT leads in 2 and the CNN in 0; with one seed per cell no lead can be "
        "told apart from seed-to-seed noise (run with --seeds 3 or more)."
    )


def test_gap_augment_patch_and_calibration_sentences():
    leads = [
        make_lead(0.01, 0.02, 3, augment="none", patch=2, vit={"gap": 0.15, "val_ece": 0.08}, cnn={"gap": 0.01}),
        make_lead(
            0.03,
            0.02,
            3,
            augment="light",
            patch=2,
            vit={"gap": 0.05, "val_ece": 0.06},
            cnn={"gap": 0.02, "best_val_acc": 0.88},
        ),
        make_lead(0.05, 0.02, 3, augment="none", patch=4, vit={"gap": 0.10, "val_ece": 0.02}, cnn={"gap": 0.03}),
    ]
    text = conclusions(leads, tokens={2: 16, 4: 4})
    assert (
        "The train−val gap averages +0.100 for the ViT and +0.020 for the CNN (the ViT's is the larger in 3 of 3 "
        "cells): on average the ViT overfits more."
    ) in text
    # light vs none, matched on rows and patch 2 only: ViT 0.93 - 0.91, CNN 0.88 - 0.90
    assert (
        "Light augmentation changes best validation accuracy by +0.020 for the ViT and −0.020 for the CNN "
        "(mean over 1 matched cells)."
    ) in text
    # patch 2 averages (0.91 + 0.93) / 2 = 0.92 < patch 4's 0.95
    assert (
        "The ViT does best with patch 4 (4 tokens), mean best validation accuracy 0.950, and worst with patch 2 "
        "(16 tokens), 0.920."
    ) in text
    assert text[-1] == (
        "Validation ECE at the best epoch averages 0.053 for the ViT and 0.040 for the CNN: the CNN "
        "is the better calibrated."
    )


def test_negative_gaps_are_not_called_overfitting():
    text = conclusions([make_lead(0.0, None, 1, vit={"gap": -0.2}, cnn={"gap": -0.1})])
    assert any(
        s.endswith("neither model overfits on average (training accuracy stays at or below validation accuracy).")
        for s in text
    )


@pytest.mark.parametrize(
    "lead,spread,verdict",
    [
        (0.05, 0.01, "larger than the spread"),
        (-0.05, 0.01, "larger than the spread"),
        (0.005, 0.01, "within the spread"),
        (0.05, None, "spread unknown"),
    ],
)
def test_verdict(lead, spread, verdict):
    assert make_lead(lead, spread, 1 if spread is None else 3).verdict == verdict


def test_recipe_augmentation_sentence():
    leads = [make_lead(0.0, None, 1, augment="none"), make_lead(0.04, None, 1, augment="recipe")]
    assert (
        "The recipe's augmentation changes best validation accuracy by +0.040 for the ViT and +0.000 for the "
        "CNN (mean over 1 matched cells)."
    ) in conclusions(leads)


def test_variant_sentences_compare_each_value_with_the_default():
    def lead(attention, acc, speed, memory, seconds=10.0, final=None, agreement=None):
        made = make_lead(
            0.0,
            None,
            1,
            vit={
                "best_val_acc": acc,
                "final_val_acc": final or acc,
                "images_per_s": speed,
                "peak_mb": memory,
                "seconds": seconds,
                "agreement": agreement,
            },
        )
        made.axes["attention"] = attention
        return made

    leads = [
        lead("full", 0.90, 1000.0, 8.0, final=0.88),
        lead("window", 0.86, 2000.0, 2.0, seconds=15.0),
        lead("tome", 0.87, 1500.0, 6.0, agreement=0.95),
    ]
    text = conclusions(leads)
    assert (
        "Window attention changes the ViT's best validation accuracy by −0.040 against full attention (mean over "
        "1 matched cell), with training wall time x1.50, forward throughput x2.00 (faster) and peak forward "
        "memory x0.25."
    ) in text
    assert (
        "Token merging (ToMe, applied to the trained full-attention ViT without retraining) keeps 95.0% of its "
        "validation predictions and moves validation accuracy at the final weights from 0.880 to 0.870, with "
        "forward throughput x1.50 (faster) and peak forward memory x0.75 (mean over 1 matched cell)."
    ) in text
    # one value alone is no comparison
    assert not any("attention changes" in s for s in conclusions(leads[1:2]))
