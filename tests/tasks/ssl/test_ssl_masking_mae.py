import pytest
import torch

from vitlab.errors import ConfigError
from vitlab.models import build_registered
from vitlab.ops.patches import patchify
from vitlab.tasks.ssl.mae import MAEConfig, MaskedAutoencoder, mae_loss
from vitlab.tasks.ssl.masking import Masking, gather_tokens, num_visible, random_masking


@pytest.mark.parametrize("n, ratio", [(16, 0.75), (49, 0.75), (10, 0.33), (7, 0.5), (196, 0.9)])
def test_masking_keeps_round_n_times_one_minus_ratio(n, ratio):
    m = random_masking(3, n, ratio, generator=torch.Generator().manual_seed(0))
    keep = round(n * (1 - ratio))
    assert m.num_keep == keep == num_visible(n, ratio)
    assert m.keep.shape == (3, keep)
    assert (m.mask.sum(1) == n - keep).all()
    # the kept indices are exactly the unmasked positions
    assert (m.mask.gather(1, m.keep) == 0).all()


def test_masking_restores_order_exactly_and_is_seeded():
    x = torch.randn(4, 16, 5)
    m = random_masking(4, 16, 0.75, generator=torch.Generator().manual_seed(1))
    shuffled = gather_tokens(x, m.shuffle)
    assert torch.equal(gather_tokens(shuffled, m.restore), x)
    again = random_masking(4, 16, 0.75, generator=torch.Generator().manual_seed(1))
    other = random_masking(4, 16, 0.75, generator=torch.Generator().manual_seed(2))
    assert torch.equal(m.shuffle, again.shuffle) and not torch.equal(m.shuffle, other.shuffle)


def test_masking_rejects_ratios_that_keep_nothing():
    with pytest.raises(ValueError, match="ratio"):
        random_masking(1, 4, 1.0)
    with pytest.raises(ValueError, match="keeps no token"):
        random_masking(1, 4, 0.9)


@pytest.mark.parametrize("norm_pix", [False, True])
def test_mae_loss_ignores_visible_patches(norm_pix):
    g = torch.Generator().manual_seed(0)
    pred, target = torch.randn(2, 16, 4, generator=g), torch.randn(2, 16, 4, generator=g)
    mask = random_masking(2, 16, 0.75, generator=g).mask
    changed = target.clone()
    visible = mask == 0
    changed[visible] = changed[visible] + 10 * torch.randn_like(changed[visible])
    base = mae_loss(pred, target, mask, norm_pix)
    assert torch.allclose(base, mae_loss(pred, changed, mask, norm_pix))
    hidden = target.clone()
    hidden[mask == 1] += torch.randn(hidden[mask == 1].shape, generator=g)
    assert not torch.allclose(base, mae_loss(pred, hidden, mask, norm_pix))


def test_mae_forward_scores_its_predictions_against_patchified_pixels():
    torch.manual_seed(0)
    vit = build_registered("vit-digits")
    mae = MaskedAutoencoder(vit, MAEConfig(decoder_dim=32, decoder_depth=1)).eval()
    images = torch.rand(2, 1, 8, 8)
    loss, pred, mask = mae(images, torch.Generator().manual_seed(0))
    assert pred.shape == (2, 16, 4) and mask.shape == (2, 16) and loss.ndim == 0
    assert (mask.sum(1) == 12).all()
    assert torch.allclose(loss, mae_loss(pred, patchify(images, 2), mask))
    loss.backward()
    assert vit.patch_embed.proj.weight.grad.abs().sum() > 0


def test_mae_encoder_runs_on_visible_tokens_only():
    torch.manual_seed(0)
    vit = build_registered("vit-digits")
    mae = MaskedAutoencoder(vit, MAEConfig(decoder_dim=32, decoder_depth=1))
    seen = []
    vit.blocks[0].register_forward_hook(lambda mod, inp, out: seen.append(inp[0].shape))
    m = random_masking(2, 16, 0.75, generator=torch.Generator().manual_seed(0))
    latent = mae.encode(torch.rand(2, 1, 8, 8), m)
    assert seen == [torch.Size([2, 4, 64])] and latent.shape == (2, 4, 64)


@pytest.mark.parametrize("overrides", [{}, dict(pos_embed="rope", class_token=True, reg_tokens=1)])
def test_mae_encoding_every_token_in_order_is_forward_features(overrides):
    vit = build_registered("vit-digits", **overrides).eval()
    mae = MaskedAutoencoder(vit, MAEConfig(decoder_dim=32, decoder_depth=1))
    order = torch.arange(16).expand(2, -1)
    everything = Masking(order, order, torch.zeros(2, 16), 16)
    images = torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(mae.encode(images, everything), vit.forward_features(images), rtol=0, atol=0)


def test_mae_with_rotary_positions_is_the_blocks_on_gathered_tokens_and_tables():
    vit = build_registered("vit-digits", pos_embed="rope", class_token=True).double().eval()
    mae = MaskedAutoencoder(vit, MAEConfig(decoder_dim=32, decoder_depth=1)).double()
    images = torch.rand(2, 1, 8, 8, dtype=torch.float64)
    m = random_masking(2, 16, 0.75, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        tokens, grid = vit.embed(images)  # (B, 1 + 16, D)
        x = torch.cat([tokens[:, :1], gather_tokens(tokens[:, 1:], m.keep)], dim=1)
        sin, cos = vit.rope(grid)  # (1 + 16, d): row 0 the class token
        rows = torch.cat([torch.zeros(2, 1, dtype=torch.long), 1 + m.keep], dim=1)
        rope = sin[rows][:, None], cos[rows][:, None]  # (B, 1, 1 + K, d)
        for block in vit.blocks:
            x = block(x, rope, grid)
        torch.testing.assert_close(mae.encode(images, m), vit.norm(x), rtol=0, atol=1e-12)
    loss, _, _ = mae(images, torch.Generator().manual_seed(1))
    loss.backward()
    assert torch.isfinite(loss) and vit.blocks[0].attn.qkv.weight.grad.abs().sum() > 0


def test_mae_refuses_attention_that_needs_every_patch():
    with pytest.raises(ConfigError, match="lowrank"):
        MaskedAutoencoder(build_registered("vit-digits", attention="lowrank", lowrank_k=4))
