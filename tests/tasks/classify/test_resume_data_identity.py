"""Dataset identity on resume: a run's state records each split's image count, fingerprint and byte sizes, and
``--resume`` on data that changed since (an image added, removed or replaced by other bytes; a shard added to a wds
glob or one of its members replaced) is refused in one line naming the dataset and what changed, as a changed
setting is; the same data resumes."""

import numpy as np
import pytest
from tests.data.test_records import CLASSES, make_photos, photo_bytes, write_folder, write_shards, write_tar

from vitlab.cli.main import main

TINY = ["--image-size", "16", "--batch-size", "8", "--epochs", "1", "--set", "depth=1", "--set", "embed_dim=16"]
TINY += ["--set", "num_heads=2", "--set", "patch_size=8", "--set", "warmup_epochs=0", "--quiet", "--device", "cpu"]


def refused(argv: list[str], capsys) -> str:
    """The one line ``vitlab ARGV`` is refused with (exit 2)."""
    capsys.readouterr()
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "on other data than it trained with" in lines[0], lines
    return lines[0]


def other_bytes(rng: np.random.Generator, label: int, old: bytes) -> bytes:
    """Another photo of class ``label``, of another length than ``old``."""
    while True:
        _, data = photo_bytes(rng, label, 1)  # a PNG
        if len(data) != len(old):
            return data


@pytest.mark.slow
def test_resume_refuses_a_folder_whose_images_changed_and_resumes_it_unchanged(tmp_path, capsys):
    rng = np.random.default_rng(35)
    data = write_folder(tmp_path / "photos", make_photos(rng, per_class=6))
    argv = ["train", "--dataset", "folder", "--data-dir", str(data), *TINY, "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    argv.append("--resume")
    files = sorted(p for p in data.rglob("*") if p.is_file())
    classes = sorted(p.name for p in data.iterdir())
    for case in range(9):  # each kind three times, at files drawn by the seed
        how = ("added", "removed", "replaced")[case % 3]
        path = files[int(rng.integers(len(files)))]
        kept = path.read_bytes()
        label = classes.index(path.parent.name)
        added = path.with_name(f"added-{case}.png")
        if how == "added":
            added.write_bytes(other_bytes(rng, label, b""))
        elif how == "removed":
            path.unlink()
        else:
            path.write_bytes(other_bytes(rng, label, kept))
        line = refused(argv, capsys)
        assert f"folder in {data} changed (" in line, (how, line)
        if how == "replaced":  # the same names: only the sizes tell
            assert "byte sizes" in line and "images" not in line, line
        else:
            assert "images" in line and "fingerprint" in line, (how, line)
        added.unlink(missing_ok=True)
        path.write_bytes(kept)
    assert main(argv) == 0  # the data it trained on: resumes (the run had finished: nothing more to train)


@pytest.mark.slow
def test_resume_refuses_a_shard_added_to_the_glob_or_a_member_replaced(tmp_path, capsys):
    rng = np.random.default_rng(35)
    shards, photos = tmp_path / "shards", make_photos(rng, per_class=6)
    write_shards(shards, photos)
    pattern = str(shards / "train-*.tar")
    argv = ["train", "--dataset", "wds", "--data-dir", pattern, *TINY, "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    argv.append("--resume")
    extra = write_tar(shards / "train-000002.tar", [("x.png", photo_bytes(rng, 0, 1)[1]), ("x.cls", b"ant")])
    line = refused(argv, capsys)
    assert f"wds in {pattern} changed" in line and "images" in line and "fingerprint" in line, line
    extra.unlink()
    write_shards(shards, [(cls, name, other_bytes(rng, CLASSES.index(cls), data)) for cls, name, data in photos])
    line = refused(argv, capsys)
    assert "byte sizes" in line and "images" not in line, line
    write_shards(shards, photos)
    assert main(argv) == 0
