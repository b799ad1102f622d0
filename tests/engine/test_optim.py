import pytest
import torch
from torch import nn

from vitlab.engine.optim import ModelEma, WarmupCosine, build_optimizer, build_scheduler, param_groups
from vitlab.models import build_registered


def test_param_groups_skip_norms_biases_positions_tokens():
    model = build_registered("vit-digits", class_token=True, reg_tokens=2, pool="token", depth=1)
    decay, no_decay = param_groups(model, 0.05)
    names = {id(p): n for n, p in model.named_parameters()}
    decay_names = {names[id(p)] for p in decay["params"]}
    skip_names = {names[id(p)] for p in no_decay["params"]}
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    assert decay_names.isdisjoint(skip_names) and decay_names | skip_names == set(names.values())
    assert {
        "class_token",
        "reg_token",
        "pos_embed.weight",
        "blocks.0.norm1.weight",
        "blocks.0.norm1.bias",
        "head.bias",
    } <= skip_names
    assert {"head.weight", "blocks.0.attn.qkv.weight", "patch_embed.proj.weight"} <= decay_names


def test_unknown_optimizer_and_schedule_name_the_choices():
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="adamw"):
        build_optimizer(model, "lamb", 1e-3, 0.0)
    with pytest.raises(ValueError, match="cosine"):
        build_scheduler(torch.optim.SGD(model.parameters(), lr=1.0), "step", 10, 0, 1.0, 0.0)


def test_warmup_cosine_values():
    rule = WarmupCosine(total=10, warmup=2, floor=0.1)
    assert [rule(s) for s in (0, 1, 2)] == pytest.approx([0.5, 1.0, 1.0])
    assert rule(6) == pytest.approx(0.1 + 0.9 * 0.5)  # half-way through the cosine
    assert rule(10) == pytest.approx(0.1) and rule(50) == pytest.approx(0.1)
    assert WarmupCosine(10, 0, cosine=False)(7) == 1.0


def test_scheduler_drives_lr_per_step_to_min_lr():
    model = nn.Linear(2, 2)
    opt = build_optimizer(model, "adamw", lr=1e-2, weight_decay=0.1)
    sched = build_scheduler(opt, "cosine", total_steps=8, warmup_steps=2, lr=1e-2, min_lr=1e-4)
    lrs = []
    for _ in range(8):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(5e-3) and lrs[1] == pytest.approx(1e-2)
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:]))
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-4) and opt.param_groups[1]["lr"] == pytest.approx(1e-4)


def test_model_ema_update_rule():
    model = nn.Linear(3, 2)
    w0 = model.weight.detach().clone()
    ema = ModelEma(model, decay=0.999)
    with torch.no_grad():
        model.weight.add_(1.0)
    ema.update(model)  # first update: decay min(0.999, 2/11)
    torch.testing.assert_close(ema.module.weight, w0 + (1 - 2 / 11) * 1.0)
    state = ema.state_dict()
    other = ModelEma(nn.Linear(3, 2), decay=0.999)
    other.load_state_dict(state)
    assert other.updates == 1 and torch.equal(other.module.weight, ema.module.weight)
    with pytest.raises(ValueError, match="0.999"):
        ModelEma(model, decay=1.5)
