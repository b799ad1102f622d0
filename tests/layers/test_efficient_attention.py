"""Linear, low-rank and latent attention against their formulas; every kind by name in one ViT."""

import math

import pytest
import torch
import torch.nn.functional as F

from vitlab.explain.record import attention_weights
from vitlab.layers import (
    ATTENTION_KINDS,
    LatentAttention,
    LinearAttention,
    LowRankAttention,
    MultiHeadSelfAttention,
    build_attention,
)
from vitlab.models import VisionTransformer, ViTConfig
from vitlab.ops.attention import merge_heads, split_heads


def project(attn, mixed: torch.Tensor) -> torch.Tensor:
    return attn.proj(merge_heads(mixed))


def test_linear_attention_is_the_kernel_formula():
    attn = LinearAttention(24, 3).eval()
    x = torch.randn(2, 50, 24)
    q, k, v = attn.qkv_heads(x)
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    kernel = torch.einsum("bhnd,bhmd->bhnm", phi_q, phi_k)
    expected_weights = kernel / kernel.sum(-1, keepdim=True)
    with torch.no_grad():
        out, weights = attn.forward_with_weights(x)
        torch.testing.assert_close(attn(x), project(attn, expected_weights @ v), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out, attn(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights)
    assert (weights > 0).all()


def test_linear_attention_has_no_weights_to_drop():
    with pytest.raises(ValueError, match="attn_drop=0"):
        LinearAttention(24, 3, attn_drop=0.1)


def test_lowrank_with_identity_projections_is_full_attention():
    n = 12
    lowrank = LowRankAttention(16, 2, num_tokens=n, rank=n).eval()
    with torch.no_grad():
        lowrank.key_proj.copy_(torch.eye(n))
        lowrank.value_proj.copy_(torch.eye(n))
    full = MultiHeadSelfAttention(16, 2).eval()
    full.load_state_dict(lowrank.state_dict(), strict=False)
    x = torch.randn(2, n, 16)
    with torch.no_grad():
        torch.testing.assert_close(lowrank(x), full(x), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(lowrank.forward_with_weights(x)[1], full.forward_with_weights(x)[1])


def test_lowrank_is_attention_over_projected_keys_and_values():
    attn = LowRankAttention(16, 2, num_tokens=20, rank=5).eval()
    x = torch.randn(2, 20, 16)
    q, k, v = attn.qkv_heads(x)
    weights = torch.softmax(q @ (attn.key_proj @ k).transpose(-2, -1) / math.sqrt(8), dim=-1)  # (B, H, N, k)
    with torch.no_grad():
        out, effective = attn.forward_with_weights(x)
        torch.testing.assert_close(attn(x), project(attn, weights @ (attn.value_proj @ v)), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out, project(attn, effective @ v), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="built for 20 tokens and got 21"):
        attn(torch.randn(1, 21, 16))


def test_latent_attention_is_two_cross_attentions():
    attn = LatentAttention(16, 2, num_latents=4).eval()
    torch.nn.init.normal_(attn.latents)
    x = torch.randn(2, 30, 16)
    q, k, v = attn.qkv_heads(x)
    z = split_heads(attn.latents[None].expand(2, -1, -1), 2)
    pool = torch.softmax(z @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)  # (B, H, L, N)
    read = torch.softmax(q @ (pool @ k).transpose(-2, -1) / math.sqrt(8), dim=-1)  # (B, H, N, L)
    with torch.no_grad():
        out, effective = attn.forward_with_weights(x)
        torch.testing.assert_close(attn(x), project(attn, read @ (pool @ v)), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out, attn(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(effective, read @ pool, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(effective.sum(-1), torch.ones(2, 2, 30))


def small_vit(kind: str) -> VisionTransformer:
    return VisionTransformer(
        ViTConfig(
            img_size=16,
            patch_size=4,
            in_chans=1,
            num_classes=3,
            embed_dim=16,
            depth=2,
            num_heads=2,
            class_token=False,
            pool="mean",
            attention=kind,
            window_size=2,
            lowrank_k=5,
            num_latents=3,
        )
    )


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
def test_every_kind_trains_records_and_agrees_with_its_explicit_path(kind):
    model = small_vit(kind)
    assert all(block.attn.kind == kind for block in model.blocks)
    images = torch.randn(2, 1, 16, 16)
    F.cross_entropy(model(images), torch.tensor([0, 1])).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        fast = model(images)
        for block in model.blocks:
            block.attn.fused = False
        torch.testing.assert_close(model(images), fast, atol=1e-5, rtol=1e-5)
    _, weights = attention_weights(model, images)
    assert [tuple(w.shape) for w in weights] == [(2, 2, 16, 16)] * 2


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: build_attention("dilated", 16, 2), "unknown attention kind 'dilated'"),
        (lambda: build_attention("window", 16, 2), "needs the token grid"),
        (lambda: build_attention("lowrank", 16, 2), "needs the sequence length"),
        (lambda: MultiHeadSelfAttention(16, 2, kind="window"), "build_attention"),
        (lambda: ViTConfig(attention="lowrank", dynamic_img_size=True), "dynamic_img_size"),
    ],
)
def test_bad_choices_name_the_way_out(call, match):
    with pytest.raises(ValueError, match=match):
        call()
