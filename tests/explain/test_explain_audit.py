"""Deletion / insertion curves, rank correlation, randomisation, and the audit on a trained digits model."""

import json
from functools import partial

import pytest
import torch
from scipy.stats import spearmanr

from vitlab.data import normalize
from vitlab.explain.audit import AuditOptions, MethodAudit, _verdict, audit, write_audit
from vitlab.explain.faithfulness import (
    cascade_stages,
    curve_area,
    deletion_insertion,
    randomise_,
    ranking,
    spearman,
    step_counts,
)
from vitlab.explain.maps import gradient_map
from vitlab.models import build_registered
from vitlab.models.vit import VisionTransformer
from vitlab.models.vit_config import ViTConfig
from vitlab.tasks.classify import train_copy


def tiny_vit() -> VisionTransformer:
    config = ViTConfig(img_size=8, patch_size=2, in_chans=1, num_classes=3, embed_dim=16, depth=2, num_heads=2)
    return VisionTransformer(config).eval()


def test_curves_start_and_end_where_they_must():
    model = tiny_vit()
    x = torch.randn(3, 1, 8, 8)
    order = torch.stack([torch.randperm(16) for _ in range(3)])
    target = torch.tensor([0, 1, 2])
    deletion, insertion = deletion_insertion(model, x, order, target)
    assert deletion.shape == insertion.shape == (3, 17)
    with torch.no_grad():
        intact = model(x).softmax(-1)[range(3), target]
        blank = model(torch.zeros_like(x)).softmax(-1)[range(3), target]
        one_hidden = x.clone()
        for b in range(3):
            r, c = divmod(int(order[b, 0]), 4)
            one_hidden[b, :, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2] = 0
        first_step = model(one_hidden).softmax(-1)[range(3), target]
    torch.testing.assert_close(deletion[:, 0], intact)
    torch.testing.assert_close(insertion[:, -1], intact)
    torch.testing.assert_close(deletion[:, -1], blank)
    torch.testing.assert_close(insertion[:, 0], blank)
    torch.testing.assert_close(deletion[:, 1], first_step)
    coarse, _ = deletion_insertion(model, x, order, target, steps=4)
    torch.testing.assert_close(coarse, deletion[:, ::4])


def test_step_counts_area_and_ranking():
    assert step_counts(16, 4).tolist() == [0, 4, 8, 12, 16]
    assert step_counts(5).tolist() == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="steps"):
        step_counts(16, 0)
    torch.testing.assert_close(curve_area(torch.full((2, 9), 0.3)), torch.full((2,), 0.3))
    torch.testing.assert_close(curve_area(torch.linspace(1, 0, 11)), torch.tensor(0.5))
    assert ranking(torch.tensor([[[0.1, 0.9], [0.5, 0.2]]])).tolist() == [[1, 2, 3, 0]]


def test_spearman_matches_scipy():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 3, 3, generator=g), torch.randn(4, 3, 3, generator=g)
    b[0] = a[0] * 2 + 1
    b[1] = -a[1]
    rho = spearman(a, b)
    assert rho[0] == pytest.approx(1) and rho[1] == pytest.approx(-1)
    for i in range(4):
        assert rho[i] == pytest.approx(spearmanr(a[i].flatten(), b[i].flatten()).statistic)
    assert torch.isnan(spearman(torch.ones(1, 4), torch.randn(1, 4))).all()


def test_cascade_stages_run_from_the_head_to_the_input_and_cover_every_parameter():
    model = VisionTransformer(
        ViTConfig(
            img_size=8, patch_size=2, in_chans=1, num_classes=3, embed_dim=16, depth=2, num_heads=2, class_token=True
        )
    )
    stages = cascade_stages(model)
    names = [name for name, _ in stages]
    assert names == ["head", "norm", "blocks.1", "blocks.0", "pos_embed", "patch_embed", "tokens"]
    seen = [id(p) for _, params in stages for p in params]
    assert sorted(seen) == sorted(id(p) for p in model.parameters())


def test_randomise_keeps_each_tensors_scale_but_not_its_values():
    layer = torch.nn.Linear(64, 64)
    with torch.no_grad():
        layer.weight.mul_(3).add_(1)
    before = layer.weight.detach().clone()
    randomise_(layer.parameters(), torch.Generator().manual_seed(0))
    after = layer.weight.detach()
    assert not torch.equal(before, after)
    assert float(after.mean()) == pytest.approx(float(before.mean()), abs=0.05)
    assert float(after.std()) == pytest.approx(float(before.std()), rel=0.05)


def test_verdicts():
    random = (0.4, 0.5)
    assert _verdict(MethodAudit("m", 0.2, 0.7, 0.1, permuted_rho=0.2), random, 0.5) == "passes"
    assert _verdict(MethodAudit("m", 0.2, 0.7, 0.9), random, 0.5).startswith("not explaining the model")
    assert "labels permuted" in _verdict(MethodAudit("m", 0.2, 0.7, 0.1, permuted_rho=0.6), random, 0.5)
    assert _verdict(MethodAudit("m", 0.45, 0.45, 0.1), random, 0.5) == "no better than a random order"


@pytest.fixture(scope="module")
def digits_audit(digits_run, tmp_path_factory):
    retrain = partial(train_copy, digits_run.config, device=next(digits_run.model.parameters()).device)
    result = audit(digits_run.model, digits_run.splits, AuditOptions(samples=80, seed=0, sanity_epochs=2), retrain)
    out = tmp_path_factory.mktemp("audit")
    return result, out, write_audit(result, out)


@pytest.mark.slow
def test_occlusion_order_deletes_faster_than_a_random_order(digits_run, digits_audit):
    result, _, _ = digits_audit
    assert digits_run.val_acc > 0.7
    occlusion = result.row("occlusion")
    assert occlusion.deletion_auc < result.random["deletion_auc"]
    assert occlusion.insertion_auc > result.random["insertion_auc"]


@pytest.mark.slow
def test_randomising_the_weights_changes_gradient_maps(digits_run, digits_audit):
    result, _, _ = digits_audit
    for method in ("gradient", "gradxinput"):
        row = result.row(method)
        assert row.randomised_rho < 0.5 and row.permuted_rho < 0.5
        assert len(row.cascade) == len(result.stages)
    # the control: the same model's map correlates perfectly with itself, so a low rho means change
    splits = digits_run.splits
    inputs = normalize(splits.val.images[torch.tensor(result.samples)], splits.mean, splits.std)
    trained = gradient_map(digits_run.model, inputs)
    assert torch.all(spearman(trained, gradient_map(digits_run.model, inputs)) > 0.999)


@pytest.mark.slow
def test_audit_files(digits_audit):
    result, out, paths = digits_audit
    assert {p.name for p in paths} >= {
        "audit.json",
        "audit.md",
        "curves.png",
        "cascade.png",
        "case_confident_correct.png",
    }
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)
    saved = json.loads((out / "audit.json").read_text())
    assert [m["method"] for m in saved["methods"]] == ["attention", "rollout", "gradient", "gradxinput", "occlusion"]
    assert saved["samples"] == 80 and len(saved["sample_indices"]) == 80
    for row in saved["methods"]:
        assert 0 <= row["deletion_auc"] <= 1 and 0 <= row["insertion_auc"] <= 1 and row["verdict"]
        assert len(row["cascade"]) == len(saved["cascade_stages"])
    table = (out / "audit.md").read_text()
    assert all(f"| {m} |" in table for m in ("attention", "rollout", "occlusion", "random order"))
    kinds = [c["kind"] for c in saved["cases"]]
    assert kinds[:2] == ["confident correct", "unsure correct"]
    confidences = [c["confidence"] for c in saved["cases"]]
    assert confidences[0] >= confidences[1]
    assert all(len(c["head_spreads"]) == 2 for c in saved["cases"])


def test_audit_input_errors(digits_run):
    with pytest.raises(ValueError, match="split"):
        audit(digits_run.model, digits_run.splits, AuditOptions(samples=4, split="holdout"))
    with pytest.raises(ValueError, match="samples"):
        audit(digits_run.model, digits_run.splits, AuditOptions(samples=0))


def test_audit_of_a_convnet_skips_attention(digits_run):
    cnn = build_registered("cnn-digits", widths=(4, 8)).eval()
    result = audit(cnn, digits_run.splits, AuditOptions(samples=6, patch_size=4, steps=2))
    assert [r.method for r in result.rows] == ["gradient", "gradxinput", "occlusion"]
    assert len(result.curves["random"]["deletion"]) == 3
    assert result.stages[0] == "head" and all(c.head_spreads is None for c in result.cases)
    with pytest.raises(ValueError, match="gradient and occlusion"):
        audit(cnn, digits_run.splits, AuditOptions(samples=2, methods=["attention"], patch_size=4))
