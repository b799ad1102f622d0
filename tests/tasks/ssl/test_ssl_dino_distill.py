import copy

import pytest
import torch
import torch.nn.functional as F

from vitlab.models import build_registered
from vitlab.models.distilled import distilled_from
from vitlab.tasks.distill import distillation_loss
from vitlab.tasks.ssl.crops import multi_crop
from vitlab.tasks.ssl.dino import Centre, DINOHead, DINONet, dino_loss, ema_update_, teacher_temperature


def test_ema_teacher_update_is_the_exact_convex_combination():
    torch.manual_seed(0)
    student, teacher = torch.nn.Linear(3, 4), torch.nn.Linear(3, 4)
    before = copy.deepcopy(teacher)
    ema_update_(teacher, student, 0.9)
    for t, t0, s in zip(teacher.parameters(), before.parameters(), student.parameters()):
        torch.testing.assert_close(t, 0.9 * t0 + 0.1 * s, rtol=0, atol=1e-7)
    ema_update_(teacher, student, 0.0)
    assert all(torch.equal(t, s) for t, s in zip(teacher.parameters(), student.parameters()))


def test_centre_is_the_mean_of_all_teacher_outputs_seen():
    g = torch.Generator().manual_seed(0)
    centre = Centre(5, momentum=None)
    batches = [torch.randn(n, 5, generator=g) for n in (3, 7, 1, 4)]
    for b in batches:
        centre.update(b)
    torch.testing.assert_close(centre.centre, torch.cat(batches).mean(0))


def test_centre_with_momentum_is_the_ema_of_batch_means():
    centre = Centre(2, momentum=0.9)
    a, b = torch.tensor([[1.0, 3.0], [3.0, 5.0]]), torch.tensor([[10.0, 0.0]])
    centre.update(a)
    centre.update(b)
    torch.testing.assert_close(centre.centre, 0.9 * (0.1 * a.mean(0)) + 0.1 * b.mean(0))


def test_dino_loss_and_monitors_on_a_tiny_vit():
    torch.manual_seed(0)
    vit = build_registered("vit-digits", dynamic_img_size=True)
    student = DINONet(vit, DINOHead(64, 32, 32, 16))
    teacher = copy.deepcopy(student).requires_grad_(False)
    crops = multi_crop(torch.rand(4, 1, 8, 8), 8, 4, 2, generator=torch.Generator().manual_seed(0))
    assert [c.shape[-1] for c in crops] == [8, 8, 4, 4]
    centre = Centre(32)
    stats = dino_loss(
        [student(c) for c in crops], [teacher(c) for c in crops[:2]], centre, 0.1, teacher_temperature(0, 10)
    )
    stats.loss.backward()
    assert torch.isfinite(stats.loss) and 0 <= stats.teacher_entropy <= torch.log(torch.tensor(32.0)) + 1e-5
    assert stats.teacher_student_kl >= 0 and centre.centre.abs().sum() > 0
    assert teacher_temperature(0, 10) == 0.04 and teacher_temperature(10, 10) == 0.07


def test_soft_distillation_from_one_hot_teacher_reproduces_cross_entropy_gradient():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 5, generator=g, requires_grad=True)
    labels = torch.randint(0, 5, (6,), generator=g)
    sharp_teacher = F.one_hot(labels, 5).float() / 1e-3  # teacher = one-hot labels at temperature -> 0
    (grad_kd,) = torch.autograd.grad(distillation_loss(logits, sharp_teacher, "soft", 1.0), logits)
    (grad_ce,) = torch.autograd.grad(F.cross_entropy(logits, labels), logits)
    assert F.cosine_similarity(grad_kd.flatten(), grad_ce.flatten(), dim=0) > 0.9999
    torch.testing.assert_close(grad_kd, grad_ce)
    (grad_hard,) = torch.autograd.grad(distillation_loss(logits, F.one_hot(labels, 5).float(), "hard"), logits)
    torch.testing.assert_close(grad_hard, grad_ce)


def test_soft_distillation_is_scaled_by_t_squared():
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    kl = F.kl_div(F.log_softmax(s / 4, 1), F.softmax(t / 4, 1), reduction="batchmean")
    torch.testing.assert_close(distillation_loss(s, t, "soft", 4.0), 16 * kl)
    with pytest.raises(ValueError, match="soft"):
        distillation_loss(s, t, "medium")


def test_distilled_vit_trains_two_heads_and_infers_their_average():
    torch.manual_seed(0)
    base = build_registered("vit-digits").double()
    model = distilled_from(base)
    assert model.config.distill_token and not base.config.distill_token
    state = model.state_dict()
    assert set(state) == set(base.state_dict()) | {"dist_token", "head_dist.weight", "head_dist.bias"}
    assert all(torch.equal(state[k], v) for k, v in base.state_dict().items())  # float64 kept exactly
    images = torch.rand(3, 1, 8, 8, dtype=torch.float64)
    cls, dist = model.train()(images)
    assert cls.shape == dist.shape == (3, 10) and not torch.allclose(cls, dist)
    model.eval()
    with torch.no_grad():
        tokens = model.forward_features(images)  # (B, 1 + 16, D): the token first here
        cls = model.head(model.fc_norm(tokens[:, 1:].mean(dim=1)))
        dist = model.head_dist(model.fc_norm(tokens[:, 0]))
        torch.testing.assert_close(model(images), (cls + dist) / 2)
        torch.testing.assert_close(model.forward_head(tokens, pre_logits=True), tokens[:, 1:].mean(dim=1))
        with_zero_token = distilled_from(base)
        with_zero_token.dist_token.zero_()
        x, _ = base.embed(images)  # (B, 16, D): no prefix tokens
        x = torch.cat([torch.zeros_like(x[:, :1]), x], dim=1)  # a zero distillation token placed
        for block in base.blocks:
            x = block(x)
        torch.testing.assert_close(with_zero_token.forward_features(images), base.norm(x), rtol=0, atol=1e-12)


def test_only_a_vision_transformer_becomes_a_student():
    with pytest.raises(ValueError, match="VisionTransformer student"):
        distilled_from(build_registered("cnn-digits"))
