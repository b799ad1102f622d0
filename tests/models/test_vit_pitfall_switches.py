"""The pitfall switches in a whole ViT: BatchNorm blocks, a causal mask, an overlapping tokenizer."""

import pytest
import torch

from vitlab.errors import ConfigError
from vitlab.layers.norm import TokenBatchNorm
from vitlab.models import build_registered, count_params, get_config


def test_batch_norm_blocks_train_and_evaluate_and_read_every_token():
    model = build_registered("vit-seed", block_norm="batchnorm", pool="token", class_token=True)
    norms = [m for m in model.modules() if isinstance(m, TokenBatchNorm)]
    assert len(norms) == 2 * model.config.depth
    assert model.readout is None  # statistics over all tokens, not the class token alone
    # a BatchNorm has the LayerNorm's two parameters per feature (its running statistics are buffers)
    assert count_params(model) == count_params(build_registered("vit-seed", pool="token", class_token=True))
    images = torch.rand(4, 1, 28, 28)
    model.train()
    model(images).sum().backward()
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(images), model.forward_head(model.forward_features(images)))


def test_a_causal_class_token_sees_only_itself_so_the_image_cannot_reach_it():
    model = build_registered("vit-seed", causal=True, pool="token", class_token=True).eval()
    a, b = torch.rand(2, 1, 28, 28), torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model(a), model(b))  # the logits ignore the image
        mean_pooled = build_registered("vit-seed", causal=True).eval()
        assert not torch.allclose(mean_pooled(a), mean_pooled(b))
        # the last patch reads every token: its row of weights is nowhere zero
        from vitlab.explain import attention_weights

        _, weights = attention_weights(mean_pooled, a)
        assert bool((weights[0][:, :, -1] > 0).all()) and float(weights[0][:, :, 0, 1:].abs().max()) == 0


def test_an_overlapping_tokenizer_makes_more_tokens_than_h_w_over_p_squared():
    config = get_config("vit-seed", patch_stride=4)
    assert config.grid == (6, 6) and config.overlapping
    model = build_registered("vit-seed", patch_stride=4).eval()
    images = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        assert model.forward_features(images).shape == (2, 36, 64)
        assert model(images).shape == (2, 10)
    # the position table grows with the tokens: 36 x 64 against 16 x 64
    assert count_params(model) - count_params(build_registered("vit-seed")) == (36 - 16) * 64
    assert build_registered("vit-seed", patch_stride=7).config.grid == (4, 4)  # stride = patch: tiling


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"patch_stride": 8}, "exceeds patch_size"),
        ({"patch_stride": 3, "patch_embed": "spt"}, "needs patch_embed"),
        ({"patch_stride": 3, "pad": True}, "needs patch_embed"),
        ({"causal": True, "attention": "linear"}, "causal"),
        ({"block_norm": "groupnorm"}, "block_norm"),
        ({"img_size": 6, "patch_stride": 3}, "smaller than one"),
    ],
)
def test_bad_switches_are_refused_in_one_line(overrides, match):
    with pytest.raises(ConfigError, match=match):
        get_config("vit-seed", **overrides)


def test_overlapping_tokens_cannot_be_dropped_like_patches():
    with pytest.raises(ConfigError, match="overlapping"):
        build_registered("vit-seed", patch_stride=4).check_keep()
