"""LoRA against peft's on the Hugging Face ViT: the same initial A and B give the same logits, and the same
logits again after one SGD step (q, k and v adapted separately inside vitlab's fused qkv)."""

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from vitlab.interop.hf import from_hf  # noqa: E402
from vitlab.layers.lora import LoRALinear  # noqa: E402
from vitlab.models.tuning import TuneOptions, Tuning, apply_tuning  # noqa: E402

# vitlab's target -> the Hugging Face layer inside block i (transformers >= 5 names, then the older ones)
HF_LAYERS = {
    "q": ("attention.q_proj", "attention.attention.query"),
    "k": ("attention.k_proj", "attention.attention.key"),
    "v": ("attention.v_proj", "attention.attention.value"),
    "proj": ("attention.o_proj", "attention.output.dense"),
    "fc1": ("mlp.fc1", "intermediate.dense"),
    "fc2": ("mlp.fc2", "output.dense"),
}
TARGETS = ("q", "k", "v", "proj", "fc1", "fc2")


def hf_block(model, i):
    root = model.base_model.model.vit if hasattr(model, "base_model") else model.vit
    layers = getattr(root, "layers", None) or root.encoder.layer
    return layers[i]


def hf_layer(block, target):
    for name in HF_LAYERS[target]:
        try:
            return block.get_submodule(name)
        except AttributeError:
            continue
    raise AssertionError(f"no Hugging Face layer for {target}")


def pair(targets, rank=4, alpha=8.0):
    """A random Hugging Face ViT with peft's LoRA (random B, so the adapters act), and vitlab's copy of it with
    the same A and B, both in float64."""
    torch.manual_seed(0)
    config = transformers.ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        num_labels=5,
    )
    hf = transformers.ViTForImageClassification(config).eval()
    ours = from_hf(hf).double().eval()
    names = sorted({n for t in targets for n in HF_LAYERS[t]})
    hf_names = [n for n, _ in hf.named_modules() if any(n.endswith("." + s) for s in names)]
    lora = peft.LoraConfig(
        r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=hf_names, modules_to_save=["classifier"]
    )
    adapted = peft.get_peft_model(hf, lora).double().eval()
    apply_tuning(ours, Tuning.of("lora", TuneOptions(rank=rank, alpha=alpha, targets=targets)))
    with torch.no_grad():
        for i, block in enumerate(ours.blocks):
            theirs = hf_block(adapted, i)
            for target in targets:
                layer = hf_layer(theirs, target)
                layer.lora_B["default"].weight.normal_(0, 0.1)
                mine = next(m for m in block.modules() if isinstance(m, LoRALinear) and target in m.parts)
                mine.lora_a[target].copy_(layer.lora_A["default"].weight)
                mine.lora_b[target].copy_(layer.lora_B["default"].weight)
    return adapted, ours


def logits(adapted, ours, images):
    return adapted(pixel_values=images).logits, ours(images)


@pytest.mark.parametrize("targets", [("q", "v"), TARGETS], ids=["q,v", "all"])
def test_lora_equals_peft_forward_and_after_one_sgd_step(targets):
    adapted, ours = pair(targets)
    images = torch.randn(4, 3, 32, 32, dtype=torch.float64)
    labels = torch.tensor([0, 1, 2, 3])
    theirs, mine = logits(adapted, ours, images)
    assert (theirs - mine).abs().max() <= 1e-6
    trainable = [sum(p.numel() for p in m.parameters() if p.requires_grad) for m in (adapted, ours)]
    assert trainable[0] == trainable[1]  # the adapters and the head, nothing else
    for model, out in ((adapted, theirs), (ours, mine)):
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
        F.cross_entropy(out, labels).backward()
        optimizer.step()
    theirs, mine = logits(adapted, ours, images)
    assert (theirs - mine).abs().max() <= 1e-6
    assert (theirs - logits(*pair(targets), images)[0]).abs().max() > 1e-3  # the step moved the logits
