"""Training modes: which parameters get gradients, that frozen ones stay bit-identical through an AdamW step,
that merging keeps the logits, adapters files that refuse a wrong base, and one line for bad settings."""

import pytest
import torch
import torch.nn.functional as F

from vitlab.engine.optim import build_optimizer, layer_decay_groups
from vitlab.errors import CheckpointError, ConfigError
from vitlab.layers.lora import LoRALinear
from vitlab.models import build_registered
from vitlab.models.tuning import (
    TuneOptions,
    Tuning,
    apply_tuning,
    base_sha256,
    load_adapters,
    merged,
    save_adapters,
    trainable_state,
)
from vitlab.models.vit import VisionTransformer
from vitlab.models.vit_config import ViTConfig

SMALL = dict(img_size=16, patch_size=4, in_chans=3, num_classes=5, embed_dim=32, depth=3, num_heads=4, mlp_ratio=2.0)


def small_vit(seed: int = 0, **overrides) -> VisionTransformer:
    torch.manual_seed(seed)
    return VisionTransformer(ViTConfig(**{**SMALL, **overrides}))


def is_head(name: str) -> bool:
    return name.startswith("head.")


# mode -> (overrides of the model, which parameter names train)
EXPECTED = {
    "full": ({}, lambda n: True),
    "head": ({}, is_head),
    "last-2": ({}, lambda n: is_head(n) or n.startswith(("blocks.1.", "blocks.2.", "norm."))),
    "lora": ({}, lambda n: is_head(n) or ".lora_" in n),
    "bitfit": ({}, lambda n: is_head(n) or n.endswith("bias") or ".norm" in n or n.startswith("norm.")),
    "prompt": ({"prompt_tokens": 3}, lambda n: is_head(n) or n == "prompt_token"),
    "prompt-deep": ({"prompt_tokens": 3, "prompt_deep": True}, lambda n: is_head(n) or "prompt" in n),
}


def tuned(mode: str, seed: int = 0) -> VisionTransformer:
    overrides, _ = EXPECTED[mode]
    model = small_vit(seed, **overrides)
    apply_tuning(model, Tuning.of(mode.removesuffix("-deep"), TuneOptions(targets="qkv,proj,fc1,fc2")))
    return model


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_only_the_modes_parameters_get_gradients_and_the_frozen_stay_bit_identical(mode):
    model = tuned(mode)
    _, trains = EXPECTED[mode]
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert names == {n for n, _ in model.named_parameters() if trains(n)}
    assert names  # every mode trains something
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    if mode == "lora":  # B starts at zero; move it so every adapter sees a gradient
        with torch.no_grad():
            for n, p in model.named_parameters():
                if ".lora_b." in n:
                    p.normal_(0, 0.1)
            before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = build_optimizer(model, "adamw", 1e-2, weight_decay=0.05)
    model.train()
    F.cross_entropy(model(torch.randn(4, 3, 16, 16)), torch.arange(4)).backward()
    for n, p in model.named_parameters():
        assert (p.grad is not None) == (n in names), n
    optimizer.step()
    for n, p in model.named_parameters():
        if n in names:
            assert not torch.equal(p, before[n]), f"{n} did not train"
        else:
            assert torch.equal(p, before[n]), f"{n} moved though frozen"


def test_layer_decay_still_scales_the_last_blocks():
    model = tuned("last-2")
    groups = layer_decay_groups(model, 0.05, 0.5)
    scales = {id(p): g["lr_scale"] for g in groups for p in g["params"]}
    assert scales[id(model.blocks[1].attn.qkv.weight)] == pytest.approx(0.5**2)
    assert scales[id(model.blocks[2].attn.qkv.weight)] == pytest.approx(0.5)
    assert sum(len(g["params"]) for g in groups) == sum(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("mode", ["lora", "head", "last-2", "bitfit", "prompt"])
def test_merged_model_is_plain_and_gives_the_adapted_logits(mode):
    model = tuned(mode).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.1 * torch.randn_like(p))  # trained: B non-zero, heads and biases moved
    plain = merged(model).eval()
    images = torch.randn(3, 3, 16, 16)
    assert (plain(images) - model(images)).abs().max() <= 1e-5
    assert not any(isinstance(m, LoRALinear) for m in plain.modules())
    assert set(plain.state_dict()) == set(small_vit(**EXPECTED[mode][0]).state_dict())
    assert all(p.requires_grad for p in plain.parameters())


def test_lora_adapts_q_k_v_separately_with_zero_b_and_alpha_over_r():
    model = small_vit()
    reference = small_vit()
    apply_tuning(model, Tuning.of("lora", TuneOptions(rank=2, alpha=6.0, targets="q,v")))
    qkv = model.blocks[0].attn.qkv
    assert isinstance(qkv, LoRALinear) and list(qkv.parts) == ["q", "v"] and qkv.scaling == 3.0
    assert all(torch.count_nonzero(b) == 0 for b in qkv.lora_b.values())
    images = torch.randn(2, 3, 16, 16)
    assert torch.equal(model.eval()(images), reference.eval()(images))  # B = 0: the base model's logits
    with torch.no_grad():
        qkv.lora_b["q"].normal_()
    x = torch.randn(5, 32)
    delta = qkv(x) - qkv.base(x)
    assert torch.count_nonzero(delta[:, 32:64]) == 0  # k untouched
    expected = 3.0 * x @ qkv.lora_a["q"].t() @ qkv.lora_b["q"].t()
    assert torch.allclose(delta[:, :32], expected, atol=1e-6)


def test_prompt_tokens_change_nothing_for_an_untuned_vit_and_deep_prompts_act_in_every_block():
    plain = small_vit()
    assert not any("prompt" in k for k in plain.state_dict())
    assert ViTConfig(**SMALL).num_prefix_tokens == 1
    deep = small_vit(prompt_tokens=2, prompt_deep=True).eval()
    assert deep.config.num_prefix_tokens == 3 and deep.deep_prompt.shape == (2, 2, 32)
    images = torch.randn(2, 3, 16, 16)
    before = deep(images)
    with torch.no_grad():
        deep.deep_prompt[1].add_(torch.randn(2, 32))  # a constant shift would vanish in the LayerNorm
    assert not torch.allclose(before, deep(images))
    params = sum(p.numel() for p in deep.parameters())
    assert ViTConfig(**SMALL, prompt_tokens=2, prompt_deep=True).approx_params == pytest.approx(params, rel=0.05)


def test_adapters_round_trip_and_refuse_another_base(tmp_path):
    model = tuned("lora")
    with torch.no_grad():
        for p in trainable_state(model).values():
            p.add_(0.1)
    path = save_adapters(model, Tuning.of("lora", TuneOptions(targets="qkv,proj,fc1,fc2")), tmp_path / "a.st", "test")
    base = small_vit(0)
    load_adapters(base, path)
    images = torch.randn(2, 3, 16, 16)
    assert torch.equal(base.eval()(images), model.eval()(images))
    assert base_sha256(base) == base_sha256(model)
    with pytest.raises(CheckpointError, match="another base model"):
        load_adapters(small_vit(1), path)


@pytest.mark.parametrize(
    ("mode", "options", "message"),
    [
        ("lora", {"rank": 0}, "tune.rank"),
        ("lora", {"rank": 40}, "rank 40 must lie in 1..32"),
        ("lora", {"targets": "qkv,attn_out"}, "unknown LoRA target 'attn_out': choose from q, k, v, proj"),
        ("last-4", {}, "more blocks than the model's 3"),
        ("sideways", {}, "tune must be one of"),
    ],
)
def test_bad_settings_are_refused_in_one_line(mode, options, message):
    with pytest.raises(ConfigError, match=message) as error:
        apply_tuning(small_vit(), Tuning.of(mode, TuneOptions(**options)))
    assert "\n" not in str(error.value)


def test_tuning_a_cnn_is_refused():
    with pytest.raises(ConfigError, match="SimpleCNN is not one"):
        apply_tuning(build_registered("cnn-digits"), Tuning.of("lora"))
