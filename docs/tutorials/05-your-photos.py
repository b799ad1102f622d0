# %% [markdown]
# # 5. Fine-tune a pretrained ViT on your own photos
#
# What you need: a folder of photos, one sub-folder per class (`photos/CLASS/*.jpg`, or
# `photos/train/CLASS/…` and `photos/val/CLASS/…` for splits of your own), and a pretrained ViT from the
# Hugging Face hub, named by its id (`timm/NAME[.TAG]`, `hf-hub:timm/NAME`, or a Hugging Face `ORG/NAME`).
# Three commands take you from there to a fine-tuned model:
#
# ```bash
# vitlab evaluate timm/vit_tiny_patch16_224.augreg_in21k --dataset folder --data-dir photos --split val
# vitlab train --init timm/vit_tiny_patch16_224.augreg_in21k --recipe finetune --dataset folder --data-dir photos --out runs/photos
# vitlab predict runs/photos my-photo.jpg
# ```
#
# On your machine the hub id is downloaded once into the Hugging Face cache and read from there after that
# (`HF_HUB_OFFLINE=1` keeps it offline). **This page is built offline**, so it first makes a stand-in: a
# small random-initialised model of the same architecture, saved into a private hub cache under the same id
# (with its own preprocessing), and a generated folder of photos — exactly what vitlab's tests do. The
# commands are then the three above, unchanged. Its accuracies mean nothing (the stand-in learned nothing
# before); yours will.

# %%
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image


def vitlab(command: str) -> None:
    """Run a vitlab command as you would type it in a terminal, and show what it prints."""
    print("$ vitlab", command)
    done = subprocess.run([sys.executable, "-m", "vitlab", *shlex.split(command)], capture_output=True, text=True)
    print(done.stdout.strip()[-2500:])
    if done.returncode:
        raise RuntimeError(done.stderr)


work = Path(tempfile.mkdtemp())
os.chdir(work)

# %% [markdown]
# ## The stand-in (skip this on your machine)

# %%
import timm  # noqa: E402  (only the stand-in needs timm; vitlab reads the weights itself)
from timm.models._hub import save_for_hf  # noqa: E402

CLASSES = ("ant", "bee", "cat")
HUB_ID = "timm/vit_tiny_patch16_224.augreg_in21k"


def cache_repo(cache: Path, repo: str, folder: Path, commit: str = "0" * 39 + "1") -> None:
    """``folder``'s files laid out as the Hugging Face cache holds a downloaded repo."""
    import hashlib

    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "snapshots" / commit).mkdir(parents=True)
    (root / "blobs").mkdir()
    for file in sorted(folder.iterdir()):
        blob = root / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        blob.write_bytes(file.read_bytes())
        (root / "snapshots" / commit / file.name).symlink_to(Path("..", "..", "blobs", blob.name))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)


torch.manual_seed(0)
stand_in = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=len(CLASSES), depth=2)
save_for_hf(stand_in, work / "push", model_config={"label_names": list(CLASSES)}, safe_serialization=True)
os.environ.update(HF_HOME=str(work / "hf"), HF_HUB_CACHE=str(work / "hf" / "hub"), HF_HUB_OFFLINE="1")
cache_repo(work / "hf" / "hub", HUB_ID, work / "push")

rng = np.random.default_rng(0)
for split, count in (("train", 6), ("val", 3)):
    for c, name in enumerate(CLASSES):
        (work / "photos" / split / name).mkdir(parents=True)
        for i in range(count):
            height, width = (int(v) for v in rng.integers(90, 160, size=2))
            pixels = rng.normal(60, 25, size=(height, width, 3))
            pixels[..., c] += 120  # each class its own hue
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(work / "photos" / split / name / f"{i}.jpg")
Image.open(work / "photos" / "val" / "bee" / "0.jpg").save(work / "my-photo.jpg")
print(sorted(str(p.relative_to(work)) for p in (work / "photos").glob("*/*")))

# %% [markdown]
# ## 1. How good is the model before fine-tuning?
#
# `evaluate` feeds the model **its own preprocessing**: timm's `pretrained_cfg` (input size, resize of the
# shorter side to size / crop_pct, centre crop, bicubic or bilinear, its own mean and std) or a Hugging Face
# `preprocessor_config.json` — so vitlab's logits equal timm's own eval pipeline on the same photos.

# %%
vitlab(f"evaluate {HUB_ID} --dataset folder --data-dir photos --split val")

# %% [markdown]
# A real pretrained classifier has its *own* classes (ImageNet-21k's 21,843 for this id), not yours; where
# they differ, what measures it on your classes is a probe on its frozen features (see `vitlab evaluate
# --help`), and the fine-tune below gives it a new head.
#
# ## 2. Fine-tune
#
# `--init HUB_ID` without `--model` fine-tunes that architecture with a new head for your classes, keeping
# the model's preprocessing and mean/std. `--recipe finetune` is AdamW at a low peak rate with one warmup
# epoch, layer-wise learning-rate decay 0.75, drop-path 0.1, RandomResizedCrop + flip and label smoothing.
# (Here one short epoch, `--epochs 1 --batch-size 6`, to keep the page quick.)

# %%
vitlab(
    f"train --init {HUB_ID} --recipe finetune --dataset folder --data-dir photos --out runs/photos "
    f"--epochs 1 --batch-size 6 --threads 2 --quiet"
)

# %% [markdown]
# Which weights a fine-tune updates — all of them, the head only, the last K blocks, LoRA adapters, the
# biases, or prompt tokens — is chosen with `--tune`: see [choosing what to fine-tune](../how-to/tuning.md).
#
# ## 3. Predict
#
# The checkpoint records the preprocessing, so `predict`, `evaluate`, `explain` and `export` feed the model
# exactly as training did.

# %%
vitlab("predict runs/photos my-photo.jpg")

# %% [markdown]
# ## Where next
#
# - Read photos at another size or crop: `--image-size N`, `--set data.crop_pct=0.875`,
#   `data.crop_mode=center|squash|border`, `data.interpolation=bicubic` ([datasets](../how-to/datasets.md)).
# - Look inside the fine-tuned model: `vitlab explain runs/photos my-photo.jpg`
#   ([tutorial 4](04-looking-inside.md)), or `vitlab explore` ([the explorer](../how-to/explorer.md)).
# - Ship it: `vitlab export runs/photos --to onnx|timm|hf` ([exporting](../how-to/export.md)).
# - More photos than memory: [6. Past one machine](06-past-one-machine.md).
