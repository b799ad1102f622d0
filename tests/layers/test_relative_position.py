"""Relative position bias for the plain ViT: the index against a loop, per-block and shared tables, refusals."""

import copy

import pytest
import torch

from vitlab.errors import ConfigError
from vitlab.explain import attention_weights
from vitlab.layers import RelativePositionBias
from vitlab.layers.relative_position import prefixed_position_index
from vitlab.models import VisionTransformer, ViTConfig

SMALL = dict(img_size=(12, 16), patch_size=4, embed_dim=16, depth=2, num_heads=2, num_classes=3)


def loop_index(grid, prefix):
    gh, gw = grid
    offsets = (2 * gh - 1) * (2 * gw - 1)
    cells = [(r, c) for r in range(gh) for c in range(gw)]
    n = prefix + len(cells)
    index = torch.empty(n, n, dtype=torch.long)
    for i in range(n):
        for j in range(n):
            if i < prefix and j < prefix:
                index[i, j] = offsets + 2
            elif i < prefix:
                index[i, j] = offsets
            elif j < prefix:
                index[i, j] = offsets + 1
            else:
                (ri, ci), (rj, cj) = cells[i - prefix], cells[j - prefix]
                index[i, j] = (ri - rj + gh - 1) * (2 * gw - 1) + (ci - cj + gw - 1)
    return index


@pytest.mark.parametrize("grid, prefix", [((3, 4), 0), ((3, 4), 1), ((2, 2), 3)])
def test_index_is_the_2d_offset_and_three_prefix_entries(grid, prefix):
    assert torch.equal(prefixed_position_index(grid, prefix), loop_index(grid, prefix))
    bias = RelativePositionBias(grid, 2, prefix)
    assert bias.relative_position_bias_table.shape == (RelativePositionBias.num_entries(grid, prefix), 2)
    out = bias()
    t = prefix + grid[0] * grid[1]
    assert out.shape == (1, 2, t, t)
    assert torch.equal(out[0, 1, 0, -1], bias.relative_position_bias_table[loop_index(grid, prefix)[0, -1], 1])


@torch.no_grad()
@pytest.mark.parametrize("rel_pos", ["per_block", "shared"])
@pytest.mark.parametrize("attention", ["full", "lsa", "sparse"])
def test_paths_agree_and_the_bias_changes_the_logits(rel_pos, attention):
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig(**SMALL, rel_pos=rel_pos, attention=attention, pos_embed="none")).eval()
    tables = [p for n, p in model.named_parameters() if n.endswith("relative_position_bias_table")]
    assert len(tables) == (2 if rel_pos == "per_block" else 1)
    images = torch.randn(2, 3, 12, 16)
    fast, (before, *_) = model(images), attention_weights(model, images)[1]
    for block in model.blocks:
        block.attn.fused = False
    torch.testing.assert_close(model(images), fast, atol=1e-6, rtol=1e-6)
    for table in tables:
        table.add_(torch.randn_like(table))
    assert (attention_weights(model, images)[1][0] - before).abs().max() > 0.1


@torch.no_grad()
def test_a_shared_table_is_stored_once_and_stays_shared_in_a_copy():
    model = VisionTransformer(ViTConfig(**SMALL, rel_pos="shared"))
    keys = [k for k in model.state_dict() if "relative_position" in k]
    assert keys == ["shared_rel_pos.relative_position_bias_table"]
    twin = copy.deepcopy(model)
    assert all(block.attn.shared_rel_pos is twin.shared_rel_pos for block in twin.blocks)
    assert "shared_rel_pos.relative_position_bias_table" in model.no_weight_decay()


def test_estimate_counts_the_tables():
    for rel_pos in ("per_block", "shared"):
        config = ViTConfig(**SMALL, rel_pos=rel_pos, class_token=True)
        count = sum(p.numel() for p in VisionTransformer(config).parameters())
        assert abs(config.approx_params - count) <= 0.02 * count


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(rel_pos="per_block", attention="window", class_token=False, pool="mean"), "rel_pos"),
        (dict(rel_pos="shared", dynamic_img_size=True), "dynamic_img_size"),
        (dict(rel_pos="both"), "rel_pos"),
    ],
)
def test_combinations_it_cannot_compute_are_refused(overrides, match):
    with pytest.raises(ConfigError, match=match):
        ViTConfig(**{**SMALL, **overrides})


def test_no_resampling_and_no_subsets():
    model = VisionTransformer(ViTConfig(**SMALL, rel_pos="per_block"))
    with pytest.raises(ConfigError, match="img_size"):
        model.set_image_size(32)
    with pytest.raises(ConfigError, match="rel_pos"):
        model.check_keep()
