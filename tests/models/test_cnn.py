"""The CNN baseline: shapes, parameter arithmetic, sizing against the ViTs, and the budget helper."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vitlab.experiments.textbook import TEXTBOOK_CNN
from vitlab.models import CNNConfig, SimpleCNN, build_registered, cnn_for_budget, count_params
from vitlab.models.cnn import cnn_widths


def conv_stack_params(
    in_chans: int, widths: tuple[int, ...], convs: int, classes: int, batch_norm: bool, hidden: int = 0
) -> int:
    """Independent arithmetic: 3x3 kernels, plus BN's scale and shift (or a conv bias), plus the hidden
    dense layer if any, plus the head."""
    total, chans = 0, in_chans
    for width in widths:
        for _ in range(convs):
            total += 9 * chans * width + (2 * width if batch_norm else width)
            chans = width
    if hidden:
        total, chans = total + chans * hidden + hidden, hidden
    return total + chans * classes + classes


def reference_logits(model: SimpleCNN, images: torch.Tensor) -> torch.Tensor:
    """The model's forward written out in functional torch on NCHW tensors (its own parameters and
    BatchNorm buffers; batch statistics in training mode)."""
    x = images
    for stage in model.stages:
        x = F.max_pool2d(x, 2) if isinstance(stage.pool, nn.MaxPool2d) else x
        for block in stage.blocks:
            x = F.conv2d(x, block.conv.weight, block.conv.bias, padding=1)
            if isinstance(block.norm, nn.BatchNorm2d):
                bn = block.norm
                x = F.batch_norm(
                    x,
                    bn.running_mean.clone(),
                    bn.running_var.clone(),
                    bn.weight,
                    bn.bias,
                    model.training,
                    bn.momentum,
                    bn.eps,
                )
            x = F.relu(x)
    x = x.mean(dim=(-2, -1))
    if model.config.hidden:
        x = F.relu(model.hidden[0](x))
    return model.head(x)


@pytest.mark.parametrize("name, side, feature_side", [("cnn-seed", 28, 7), ("cnn-digits", 8, 2)])
def test_registered_cnns_run_and_pool_between_stages(name, side, feature_side):
    model = build_registered(name).eval()
    images = torch.randn(3, 1, side, side)
    features = model.forward_features(images)
    assert features.shape == (3, model.embed_dim, feature_side, feature_side)
    assert model(images).shape == (3, model.num_classes)
    assert model.forward_head(features, pre_logits=True).shape == (3, model.embed_dim)


def test_pooling_stops_at_one_pixel():
    model = SimpleCNN(CNNConfig(img_size=8, widths=(4,) * 6))
    assert model.config.pools == (False, True, True, True, False, False)
    assert model.forward_features(torch.randn(2, 1, 8, 8)).shape == (2, 4, 1, 1)


@pytest.mark.parametrize("convs, norm", [(1, "batch"), (2, "batch"), (2, "none")])
def test_param_count_matches_arithmetic(convs, norm):
    cfg = CNNConfig(img_size=16, in_chans=3, num_classes=7, widths=(5, 9, 12), convs_per_stage=convs, norm=norm)
    model = SimpleCNN(cfg)
    expected = conv_stack_params(3, (5, 9, 12), convs, 7, norm == "batch")
    assert count_params(model) == count_params(model, trainable_only=False) == expected


def test_buffers_do_not_count_and_frozen_params_are_not_trainable():
    model = build_registered("cnn-seed")
    assert any(b.numel() for b in model.buffers())  # BatchNorm running statistics
    total = sum(p.numel() for p in model.parameters())
    model.stages[0].requires_grad_(False)
    frozen = sum(p.numel() for p in model.stages[0].parameters())
    assert count_params(model, trainable_only=False) == total
    assert count_params(model) == total - frozen


@pytest.mark.parametrize("cnn, vit", [("cnn-seed", "vit-seed"), ("cnn-digits", "vit-digits")])
def test_baselines_are_comparable_in_size(cnn, vit):
    ratio = count_params(build_registered(cnn)) / count_params(build_registered(vit))
    assert 0.85 <= ratio <= 1.15


def test_reset_classifier():
    model = build_registered("cnn-digits")
    model.reset_classifier(3)
    assert model.num_classes == 3 and model(torch.randn(2, 1, 8, 8)).shape == (2, 3)
    model.reset_classifier(0)
    assert isinstance(model.head, nn.Identity)
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, model.embed_dim)


def test_overrides_and_dict_round_trip():
    model = build_registered("cnn-seed", widths=(8, 16), dropout=0.1)
    assert model.config.widths == (8, 16) and model.embed_dim == 16
    assert CNNConfig.from_dict(model.config.to_dict()) == model.config


@pytest.mark.parametrize("norm", ["batch", "none"])
def test_hidden_layer_params_match_arithmetic(norm):
    cfg = CNNConfig(img_size=16, in_chans=3, num_classes=7, widths=(5, 9, 12), norm=norm, hidden=11)
    expected = conv_stack_params(3, (5, 9, 12), 1, 7, norm == "batch", hidden=11)
    assert count_params(SimpleCNN(cfg)) == cfg.approx_params == expected


def test_textbook_convnet_has_the_pages_parameter_count():
    model = build_registered(TEXTBOOK_CNN[0], **TEXTBOOK_CNN[1])
    assert count_params(model) == 60_554 == conv_stack_params(1, (32, 64, 64), 1, 10, False, hidden=64)
    assert model(torch.randn(2, 1, 28, 28)).shape == (2, 10)


def test_reset_classifier_keeps_the_hidden_layer():
    model = build_registered("cnn-seed", widths=(4, 8), hidden=6)
    hidden = model.hidden
    model.reset_classifier(3)
    assert model.hidden is hidden and model.head.in_features == 6 == model.embed_dim
    assert model.forward_head(model.forward_features(torch.randn(2, 1, 28, 28)), pre_logits=True).shape == (2, 6)


@pytest.mark.parametrize("norm, hidden", [("batch", 0), ("none", 0), ("none", 16)])
@pytest.mark.parametrize("training", [True, False])
def test_forward_and_gradients_match_a_plain_nchw_reference(norm, hidden, training):
    torch.manual_seed(0)
    model = SimpleCNN(CNNConfig(widths=(8, 16, 24), norm=norm, hidden=hidden)).train(training)
    images = torch.rand(6, 1, 28, 28)
    got, want = model(images), reference_logits(model, images)
    got_grads = torch.autograd.grad(got.square().sum(), list(model.parameters()))
    want_grads = torch.autograd.grad(want.square().sum(), list(model.parameters()))
    if training and norm == "batch":  # trains in NCHW, as the reference: the same float operations
        assert torch.equal(got, want) and all(map(torch.equal, got_grads, want_grads))
    else:  # channels-last: equal up to float rounding
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        for a, b in zip(got_grads, want_grads):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "bad",
    [
        dict(norm="layer"),
        dict(widths=()),
        dict(widths=(8, 0)),
        dict(convs_per_stage=0),
        dict(dropout=1.0),
        dict(hidden=-1),
    ],
)
def test_bad_config_raises(bad):
    with pytest.raises(ValueError):
        CNNConfig(**bad)


def test_wrong_channels_raise_a_clear_error():
    with pytest.raises(ValueError, match="in_chans"):
        build_registered("cnn-seed")(torch.randn(1, 3, 28, 28))


@pytest.mark.parametrize("budget", [5_000, 30_000, 72_000, 250_000, 1_000_000])
def test_budget_is_met_within_five_percent(budget):
    cfg = cnn_for_budget(budget, img_size=28, in_chans=1, num_classes=10)
    params = count_params(SimpleCNN(cfg))
    assert abs(params - budget) <= 0.05 * budget
    assert params == conv_stack_params(1, cfg.widths, 1, 10, True)


def test_budget_picks_the_closer_neighbour():
    budget = 40_000
    cfg = cnn_for_budget(budget, img_size=8, in_chans=1, num_classes=10)
    chosen = count_params(SimpleCNN(cfg))
    # every width family member on a fine grid is at least as far from the budget
    for m in torch.linspace(1, 40, 400).tolist():
        other = conv_stack_params(1, cnn_widths(m), 1, 10, True)
        assert abs(chosen - budget) <= abs(other - budget)


def test_width_family_is_monotone():
    counts = []
    for m in torch.linspace(0, 50, 80).tolist():
        with torch.device("meta"):
            counts.append(count_params(SimpleCNN(CNNConfig(widths=cnn_widths(m)))))
    assert all(a <= b for a, b in zip(counts, counts[1:]))
    assert counts[0] < counts[-1]


def test_bigger_budgets_give_wider_stages():
    widths = [
        cnn_for_budget(b, img_size=28, in_chans=1, num_classes=10).widths for b in (10_000, 40_000, 160_000, 640_000)
    ]
    for small, large in zip(widths, widths[1:]):
        assert all(a <= b for a, b in zip(small, large)) and small != large


def test_budget_below_the_smallest_model_raises():
    with pytest.raises(ValueError, match="below the smallest"):
        cnn_for_budget(10, img_size=28, in_chans=1, num_classes=10)
