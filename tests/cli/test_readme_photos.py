"""The README's "Your own photos" commands, read from README.md and run literally: in a folder holding a 6-class
``photos/`` (train and val, JPEGs of 200-400 px) and ``my-photo.jpg``, with the hub id served by an offline
Hugging Face cache holding a random-init timm ``vit_tiny_patch16_224`` whose head is for ImageNet-21k's classes,
as the real one is. Every command must exit 0 and say something sensible."""

import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from vitlab.cli.main import main

README = Path(__file__).resolve().parents[2] / "README.md"
CLASSES = ("apple", "boat", "cloud", "dog", "leaf", "mug")
IN21K_CLASSES = 21843


def photo_commands(readme: str) -> list[str]:
    """The commands of the first ``bash`` block under the heading "Your own photos"."""
    heading = re.search(r"^#+ Your own photos\s*$", readme, re.MULTILINE)
    assert heading is not None, "README.md has no 'Your own photos' section"
    block = re.search(r"^```bash\n(.*?)^```", readme[heading.end() :], re.MULTILINE | re.DOTALL)
    assert block is not None, "the 'Your own photos' section has no bash block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def hub_ids(commands: list[str]) -> set[str]:
    """The ``timm/NAME[.TAG]`` ids the commands name."""
    return {word for command in commands for word in shlex.split(command) if word.startswith("timm/")}


def photo(path: Path, kind: int, rng: np.random.Generator) -> None:
    """A JPEG of 200-400 px a side: a textured background and a shape whose colour and form are the class's."""
    width, height = (int(v) for v in rng.integers(200, 401, size=2))
    ys, xs = np.mgrid[0:height, 0:width]
    background = 90 + 40 * np.sin(xs / rng.uniform(15, 40)) + 40 * np.cos(ys / rng.uniform(15, 40))
    pixels = np.stack([background + rng.normal(0, 12, (height, width)) for _ in range(3)], -1)
    image = Image.fromarray(pixels.clip(0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    colour = tuple(int(c) for c in (np.array([kind * 40 % 256, 255 - kind * 35, (kind * 90 + 60) % 256])))
    cx, cy, r = (
        width // 2 + int(rng.integers(-30, 31)),
        height // 2 + int(rng.integers(-30, 31)),
        min(width, height) // 4,
    )
    box = (cx - r, cy - r, cx + r, cy + r)
    [draw.ellipse, draw.rectangle, draw.pieslice, draw.chord, draw.rounded_rectangle, draw.ellipse][kind](
        box, fill=colour, **({"start": 30, "end": 300} if kind in (2, 3) else {})
    )
    image.save(path, quality=88)


def write_photos(root: Path, per_class: dict[str, int]) -> None:
    rng = np.random.default_rng(0)
    for split, count in per_class.items():
        for kind, name in enumerate(CLASSES):
            (root / split / name).mkdir(parents=True)
            for i in range(count):
                photo(root / split / name / f"{i:03d}.jpg", kind, rng)


@pytest.fixture
def hub_model(hub_cache, tmp_path):
    """Cache every hub id the README names as a random-init timm ViT (2 blocks, for time) with the 21k head."""
    timm = pytest.importorskip("timm")
    from timm.models._hub import save_for_hf

    def cache(hub_id: str) -> None:
        torch.manual_seed(0)
        name = hub_id.removeprefix("timm/")
        model = timm.create_model(name, pretrained=False, num_classes=IN21K_CLASSES, depth=2).eval()
        save_for_hf(model, tmp_path / name, safe_serialization=True)
        hub_cache(hub_id, tmp_path / name)

    return cache


@pytest.mark.slow
def test_the_readme_photo_commands_work_on_a_new_folder_of_photos(hub_model, tmp_path, monkeypatch, capsys):
    commands = photo_commands(README.read_text())
    assert [c.split()[:2] for c in commands] == [["vitlab", "evaluate"], ["vitlab", "train"], ["vitlab", "predict"]]
    for hub_id in hub_ids(commands):
        hub_model(hub_id)
    work = tmp_path / "work"
    write_photos(work / "photos", {"train": 5, "val": 2})
    photo(work / "my-photo.jpg", 3, np.random.default_rng(7))
    monkeypatch.chdir(work)

    evaluate, train, predict = commands
    assert main(shlex.split(evaluate)[1:]) == 0, evaluate
    said = capsys.readouterr().out
    assert f"its head predicts {IN21K_CLASSES} classes, not folder's 6" in said  # scored by its frozen features
    assert "folder val (12 images) accuracy" in said

    assert main(shlex.split(train)[1:]) == 0, train
    said = capsys.readouterr()
    out = Path(shlex.split(train)[shlex.split(train).index("--out") + 1])
    assert (out / "best" / "model.safetensors").is_file() and (out / "summary.json").is_file()
    assert "best val acc" in said.out and "about " in said.err  # the line, and the estimate up front

    assert main(shlex.split(predict)[1:]) == 0, predict
    line = capsys.readouterr().out.strip()
    assert line.startswith("my-photo.jpg") and any(f"{name} " in line for name in CLASSES)
