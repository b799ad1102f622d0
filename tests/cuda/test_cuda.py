"""What only a GPU can check: the CUDA paths of the model, the engine, DDP and the command line.

Marked ``cuda`` and skipped without a CUDA device; ``benchmarks/gpu_check.sh`` runs them on a lent GPU
(``pytest -m cuda tests/cuda``). Each compares the GPU against the CPU or against an exact property, never a
timing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import vitlab

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

SMALL = {"img_size": 32, "patch_size": 4, "embed_dim": 64, "depth": 2, "num_heads": 4, "num_classes": 10}


@pytest.fixture(autouse=True)
def _exact_fp32():
    """Full fp32 matrix products on the GPU (no TF32), so CPU and GPU agree to float rounding."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _pair() -> tuple[torch.nn.Module, torch.nn.Module]:
    cpu = vitlab.create_model("vit-tiny-patch16-224", **SMALL).train()
    gpu = vitlab.create_model("vit-tiny-patch16-224", **SMALL).train()
    gpu.load_state_dict(cpu.state_dict())
    return cpu, gpu.cuda()


def test_forward_and_backward_equal_the_cpu() -> None:
    """Logits (B, K) and every weight's gradient on the GPU equal the CPU's to float tolerance."""
    cpu, gpu = _pair()
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    for model, device in ((cpu, "cpu"), (gpu, "cuda")):
        model.zero_grad()
        F.cross_entropy(model(x.to(device)), y.to(device)).backward()
    torch.testing.assert_close(gpu(x.cuda()).cpu(), cpu(x), rtol=1e-4, atol=1e-4)
    for (name, p_cpu), (_, p_gpu) in zip(cpu.named_parameters(), gpu.named_parameters()):
        torch.testing.assert_close(p_gpu.grad.cpu(), p_cpu.grad, rtol=1e-3, atol=1e-5, msg=name)


def test_bf16_autocast_stays_close_to_fp32() -> None:
    """Under bf16 autocast (the engine's default on CUDA) logits stay within bf16's precision of fp32's and
    the fused attention kernel is the one that runs."""
    _, gpu = _pair()
    gpu.eval()
    x = torch.randn(16, 3, 32, 32, device="cuda")
    with torch.no_grad():
        full = gpu(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            half = gpu(x)
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.float(), full, rtol=5e-2, atol=5e-2)
    assert (half.float().argmax(1) == full.argmax(1)).float().mean() >= 0.9


def test_ddp_over_nccl_world_of_one_equals_one_process() -> None:
    """DDP over NCCL with one rank takes the same step as the plain model."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        plain, _ = _pair()
        plain = plain.cuda()
        wrapped = vitlab.create_model("vit-tiny-patch16-224", **SMALL).cuda().train()
        wrapped.load_state_dict(plain.state_dict())
        ddp = DistributedDataParallel(wrapped, device_ids=[0])
        x, y = torch.randn(8, 3, 32, 32, device="cuda"), torch.randint(0, 10, (8,), device="cuda")
        for model in (plain, ddp):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            F.cross_entropy(model(x), y).backward()
            opt.step()
        for (name, a), b in zip(plain.state_dict().items(), wrapped.state_dict().values()):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
    finally:
        dist.destroy_process_group()


def _vitlab(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(vitlab.__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "vitlab", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_training_on_the_gpu_matches_the_cpu_run(tmp_path: Path) -> None:
    """`vitlab train --device cuda` (fp32: --no-amp) on the digits learns as the CPU run does: the same
    data order and initialisation, validation accuracies within a few points."""
    accs = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        done = _vitlab("train", "--epochs", "3", "--device", device, "--no-amp", "--out", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        accs[device] = json.loads((out / "summary.json").read_text())["best_val_acc"]
    assert abs(accs["cuda"] - accs["cpu"]) <= 0.05, accs


def test_compiled_training_learns_as_the_eager_one(tmp_path: Path) -> None:
    """`vitlab train --compile` on CUDA (bf16 autocast, torch.compile) learns as the same run without
    compilation: the same data order and initialisation, validation accuracies within a few points."""
    accs = {}
    for name, extra in (("eager", ()), ("compiled", ("--compile",))):
        done = _vitlab(
            "train", "--epochs", "3", "--device", "cuda", *extra, "--out", str(tmp_path / name), cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        accs[name] = json.loads((tmp_path / name / "summary.json").read_text())["best_val_acc"]
    assert abs(accs["compiled"] - accs["eager"]) <= 0.05, accs


def test_a_streamed_epoch_on_the_gpu(tmp_path: Path) -> None:
    """Image files streamed through DataLoader workers and normalised on the GPU: one epoch trains."""
    from PIL import Image

    g = torch.Generator().manual_seed(0)
    for c in range(3):
        folder = tmp_path / "photos" / f"class{c}"
        folder.mkdir(parents=True)
        for i in range(24):
            pixels = (torch.rand(48, 64, 3, generator=g) * 80 + 60 * c).clamp(0, 255).to(torch.uint8)
            Image.fromarray(pixels.numpy()).save(folder / f"{i}.png")
    done = _vitlab(
        "train", "--dataset", "folder", "--data-dir", str(tmp_path / "photos"), "--model", "vit-tiny-patch16-224",
        "--image-size", "32", "--loader", "stream", "--epochs", "1", "--device", "cuda",
        "--out", str(tmp_path / "s"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "stream" in (done.stdout + done.stderr)


def test_jpegs_decoded_and_cropped_on_the_gpu_agree_with_the_cpu_path(tmp_path: Path) -> None:
    """data.decode=gpu on CUDA (nvJPEG, the crop drawn on the CPU) against the workers' PIL path: the same labels,
    and training crops and evaluation centre crops within interpolation tolerance."""
    from PIL import Image

    from vitlab.data import read_records
    from vitlab.data.preprocess import Preprocess
    from vitlab.data.stream import StreamDataset

    for c in range(2):
        (tmp_path / f"class{c}").mkdir()
        for i in range(8):
            y, x = torch.meshgrid(torch.linspace(0, 1, 60 + 4 * i), torch.linspace(0, 1, 80 - 3 * i), indexing="ij")
            pixels = torch.stack([torch.sin(6 * x + k) * 60 + 120 * y + 40 + 60 * (k == c) for k in range(3)], -1)
            Image.fromarray(pixels.clamp(0, 255).to(torch.uint8).numpy()).save(tmp_path / f"class{c}/{i}.jpg")
    records = read_records("folder", tmp_path)["train"]
    pre = Preprocess(image_size=(32, 32), interpolation="bicubic", crop_pct=0.875, crop_mode="center")
    for train in (True, False):
        out = {}
        for decode in ("cpu", "gpu"):
            data = StreamDataset(records, pre, train=train, decode=decode).on("cuda")
            batches = list(data.batches(range(len(data)), 5, seed=3, workers=1))
            out[decode] = torch.cat([b[0].cpu() for b in batches]), torch.cat([b[1].cpu() for b in batches])
        assert out["gpu"][0].shape == (16, 3, 32, 32) and torch.equal(out["gpu"][1], out["cpu"][1])
        diff = (out["gpu"][0].float() - out["cpu"][0].float()).abs()
        assert diff.mean() < 1.5 and diff.max() <= 16, (train, diff.mean(), diff.max())
