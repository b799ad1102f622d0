"""The photo sources (folder, manifest, wds, hf) read the same images into the same splits and batches;
official splits, labels, the image door's modes and the choice of loader."""

import csv
import importlib.util
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.data import load as load_module
from vitlab.data import load_dataset, make_splits, read_image, read_records
from vitlab.data import records as records_module
from vitlab.data.dataset import ImageDataset, Source
from vitlab.data.image import decode_image
from vitlab.data.preprocess import Preprocess
from vitlab.data.records import split_records
from vitlab.data.stream import StreamDataset
from vitlab.data.wds_records import expand_braces
from vitlab.errors import DataError

CLASSES = ["ant", "bee", "cat"]


def photo_bytes(rng: np.random.Generator, label: int, k: int) -> tuple[str, bytes]:
    """One small photo of class ``label`` (mixed sizes; PNG, every third one JPEG): ``(suffix, bytes)``."""
    height, width = (int(v) for v in rng.integers(12, 48, 2))
    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    pixels[..., label] = pixels[..., label] // 2 + 128  # a class tint
    suffix, fmt = (".jpg", "JPEG") if k % 3 == 0 else (".png", "PNG")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, fmt)
    return suffix, buffer.getvalue()


def make_photos(rng: np.random.Generator, per_class: int = 10) -> list[tuple[str, str, bytes]]:
    """``[(class, file name, bytes), ...]`` in folder order (classes sorted, names sorted)."""
    photos = []
    for label, cls in enumerate(CLASSES):
        for k in range(per_class):
            suffix, data = photo_bytes(rng, label, k)
            photos.append((cls, f"{cls}_{k:02d}{suffix}", data))
    return photos


def write_folder(root: Path, photos) -> Path:
    for cls, name, data in photos:
        (root / cls).mkdir(parents=True, exist_ok=True)
        (root / cls / name).write_bytes(data)
    return root


def write_tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def write_shards(folder: Path, photos, prefix: str = "train", shards: int = 2) -> str:
    """``photos`` as WebDataset shards ``{prefix}-00000{0..shards-1}.tar`` (``KEY.png`` + ``KEY.cls``)."""
    per = -(-len(photos) // shards)
    for s in range(shards):
        members = []
        for cls, name, data in photos[s * per : (s + 1) * per]:
            key, suffix = name.rsplit(".", 1)
            members += [(f"{key}.{suffix}", data), (f"{key}.cls", cls.encode())]
        write_tar(folder / f"{prefix}-{s:06d}.tar", members)
    return str(folder / f"{prefix}-{{000000..{shards - 1:06d}}}.tar")


def hf_dataset(photos, classes=CLASSES):
    import datasets

    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=classes)})
    rows = {
        "image": [{"bytes": data, "path": f"{cls}/{name}"} for cls, name, data in photos],
        "label": [classes.index(cls) for cls, _, _ in photos],
    }
    return datasets.Dataset.from_dict(rows, features=features)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path | str]:
    """The same 30 photos as a folder, a CSV and a JSON manifest, two wds shards, an HF folder and parquet."""
    root = tmp_path_factory.mktemp("photos")
    photos = make_photos(np.random.default_rng(0))
    write_folder(root / "folder", photos)
    with (root / "manifest.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["path", "label"])
        writer.writerows([(f"folder/{cls}/{name}", cls) for cls, name, _ in photos])
    (root / "list.json").write_text(json.dumps([{"path": f"folder/{c}/{n}", "label": c} for c, n, _ in photos]))
    out: dict[str, Path | str] = {
        "folder": root / "folder",
        "manifest-csv": root / "manifest.csv",
        "manifest-json": root / "list.json",
        "wds": write_shards(root / "shards", photos),
    }
    if importlib.util.find_spec("datasets") is not None:
        dataset = hf_dataset(photos)
        dataset.save_to_disk(str(root / "hf-disk"))
        (root / "parquet").mkdir()
        dataset.to_parquet(str(root / "parquet" / "train-00000-of-00001.parquet"))
        out |= {"hf-disk": root / "hf-disk", "hf-parquet": root / "parquet"}
    return out


@pytest.fixture(autouse=True)
def hf_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def stem(key: str) -> str:
    """A record's key without its folder, shard and suffix: ``ant_03``."""
    return Path(key.split(":")[-1]).name.split(".")[0]


def members(records) -> list[tuple[str, int]]:
    return [(stem(records.key(i)), int(records.labels[i])) for i in range(len(records))]


KINDS = ["manifest-csv", "manifest-json", "wds", "hf-disk", "hf-parquet"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_source_reads_the_same_classes_splits_and_batches(sources, kind):
    if kind not in sources:
        pytest.skip("datasets is not installed (pip install 'vitlab[hf]')")
    name = kind.split("-")[0]
    reference = read_records("folder", sources["folder"])
    found = read_records(name, sources[kind])
    assert found["train"].classes == reference["train"].classes == CLASSES
    assert members(found["train"]) == members(reference["train"])
    for ours, theirs in zip(split_records(found, seed=3, rows=12), split_records(reference, seed=3, rows=12)):
        if isinstance(ours, str):
            assert ours == theirs
        else:
            assert members(ours) == members(theirs)
    preprocess = Preprocess(image_size=(16, 16))
    streamed = load_dataset(name, sources[kind], preprocess=preprocess, loader="stream", workers=0, seed=3)
    folder = load_dataset("folder", sources["folder"], preprocess=preprocess, loader="stream", workers=0, seed=3)
    assert streamed.split_rule == folder.split_rule and streamed.mean == folder.mean
    for part in ("train", "val", "test"):
        ours, theirs = getattr(streamed, part), getattr(folder, part)
        index = np.arange(len(theirs))[::-1]
        for (x, y), (x_ref, y_ref) in zip(
            ours.batches(index, 8, seed=11, workers=0), theirs.batches(index, 8, seed=11, workers=0)
        ):
            assert x.dtype == torch.uint8 and torch.equal(x, x_ref) and torch.equal(y, y_ref)


def test_streamed_images_equal_the_in_memory_ones_and_todays_reader(sources):
    memory = load_dataset("folder", sources["folder"], loader="memory")
    stream = load_dataset("folder", sources["folder"], loader="stream", workers=0)
    assert (memory.loader, stream.loader) == ("memory", "stream")
    assert (
        memory.split_rule
        == stream.split_rule
        == "val and test: stratified random 15% and 15% of the 30 images (seed 0)"
    )
    for part in ("train", "val", "test"):
        images = getattr(memory, part).images
        plain = getattr(stream, part).augmented(False)  # the training split augments by default
        (x, y), *rest = plain.batches(torch.arange(len(images)), 64, workers=0)
        assert not rest and images.dtype == torch.uint8 and torch.equal(x, images)
        assert torch.equal(y, getattr(memory, part).labels)
    np.testing.assert_allclose(memory.mean, stream.mean, atol=1e-6)
    np.testing.assert_allclose(memory.std, stream.std, atol=1e-6)
    # the folder's default numbers do not move: the earlier reader (read_image at 32, then make_splits)
    files = sorted(p for p in Path(sources["folder"]).rglob("*") if p.is_file())
    data = ImageDataset(
        torch.stack([read_image(p, 3, 32) for p in files]),
        torch.tensor([CLASSES.index(p.parent.name) for p in files]),
        CLASSES,
    )
    before = make_splits("folder", Source(data, (0.15, 0.15)), seed=0)
    for part in ("train", "val", "test"):
        assert torch.equal(getattr(before, part).images, memory.in_memory(part, "a test").images)
    np.testing.assert_allclose(memory.mean, before.mean, rtol=0, atol=1e-6)  # exact sums over uint8 counts
    np.testing.assert_allclose(memory.std, before.std, rtol=0, atol=1e-6)


def test_split_records_is_make_splits_rule():
    labels = np.random.default_rng(4).integers(0, 4, 200)
    store = records_module.FileStore(Path("."), records_module.Names(str(i) for i in range(200)))
    records = records_module.Records(store, np.arange(200), labels, ["a", "b", "c", "d"])
    data = ImageDataset(torch.arange(200.0).view(200, 1, 1, 1), torch.from_numpy(labels), ["a", "b", "c", "d"])
    for rows, official_test in ((None, False), (37, False), (20, True)):
        held = (0.15,) if official_test else (0.15, 0.15)
        expected = make_splits(
            "x", Source(data, held, data.subset([0, 1]) if official_test else None), seed=7, rows=rows
        )
        given = {"train": records} | ({"test": records.subset([0, 1])} if official_test else {})
        train, val, test, _ = split_records(given, seed=7, rows=rows)
        for ours, theirs in ((train, expected.train), (val, expected.val), (test, expected.test)):
            assert ours is not None and theirs is not None
            assert ours.refs.tolist() == theirs.images.flatten().long().tolist()


def test_official_train_val_test_folders_are_the_splits(tmp_path):
    rng = np.random.default_rng(1)
    photos = make_photos(rng, per_class=4)
    write_folder(tmp_path / "train", photos)
    write_folder(tmp_path / "valid", photos[:2] + photos[4:5])  # bee and ant only: classes may be missing
    write_folder(tmp_path / "test", photos[8:10])
    splits = load_dataset("folder", tmp_path, image_size=8, rows=6)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (6, 3, 2)
    assert splits.train.classes == CLASSES and splits.train.labels.bincount().tolist() == [2, 2, 2]
    assert splits.split_rule.startswith("val: the official validation split (3 images); test: the official test")
    assert "train: the first 6" in splits.split_rule
    (tmp_path / "test" / "dog").mkdir()
    (tmp_path / "test" / "dog" / "x.png").write_bytes(photos[0][2])
    with pytest.raises(DataError, match=r"class folder\(s\) \['dog'\] appear in val/test but not in train"):
        load_dataset("folder", tmp_path)
    (tmp_path / "val").mkdir()
    with pytest.raises(DataError, match=r"has both val and valid"):
        load_dataset("folder", tmp_path)
    (tmp_path / "val").rmdir()
    (tmp_path / "extras").mkdir()
    with pytest.raises(DataError, match=r"has train/ of class folders beside \['extras'\]; keep only train/"):
        load_dataset("folder", tmp_path)


def test_a_class_named_train_beside_others_is_a_class(tmp_path):
    photos = make_photos(np.random.default_rng(2), per_class=3)
    write_folder(tmp_path, [("train" if c == "ant" else c, n, d) for c, n, d in photos])
    found = read_records("folder", tmp_path)
    assert list(found) == ["train"] and found["train"].classes == ["bee", "cat", "train"]


def test_indexing_reports_progress_without_decoding(tmp_path, monkeypatch):
    monkeypatch.setattr(records_module, "PROGRESS_EVERY", 7)
    for cls in CLASSES:
        (tmp_path / cls).mkdir()
        for k in range(10):
            (tmp_path / cls / f"{k}.jpg").write_bytes(b"not decoded while indexing")
    (tmp_path / "ant" / ".hidden.jpg").write_bytes(b"")
    (tmp_path / "ant" / "notes.txt").write_text("ignored")
    counts: list[int] = []
    found = read_records("folder", tmp_path, progress=counts.append)
    assert len(found["train"]) == 30 and counts == [10, 20, 30]
    assert found["train"].name(0) == str(tmp_path / "ant" / "0.jpg")
    with pytest.raises(DataError, match=r"ant/0.jpg: unreadable image"):
        found["train"].open(0)


def test_fingerprint_is_the_set_of_names_and_labels(sources, tmp_path):
    folder = read_records("folder", sources["folder"])["train"]
    moved = read_records("folder", write_folder(tmp_path / "elsewhere", make_photos(np.random.default_rng(0))))
    assert folder.fingerprint() == moved["train"].fingerprint()
    assert folder.subset(np.arange(len(folder))[::-1]).fingerprint() == folder.fingerprint()
    assert folder.subset(np.arange(1, len(folder))).fingerprint() != folder.fingerprint()


def test_manifest_integer_labels_splits_and_errors(tmp_path):
    photos = make_photos(np.random.default_rng(3), per_class=3)
    write_folder(tmp_path / "img", photos)
    rows = [
        {"path": f"img/{c}/{n}", "label": 10 * CLASSES.index(c), "split": "train" if i % 3 else "val"}
        for i, (c, n, _) in enumerate(photos)
    ]
    (tmp_path / "m.json").write_text(json.dumps(rows))
    found = read_records("manifest", tmp_path / "m.json")
    assert found["train"].classes == ["0", "10", "20"] and sorted(found) == ["train", "val"]
    assert len(found["train"]) == 6 and found["val"].labels.tolist() == [0, 1, 2]
    rows[0]["split"] = "holdout"
    (tmp_path / "m.json").write_text(json.dumps(rows))
    with pytest.raises(DataError, match=r"m.json item 0: split 'holdout' is unknown"):
        read_records("manifest", tmp_path / "m.json")
    (tmp_path / "m.csv").write_text("file,class\na.png,x\n")
    with pytest.raises(DataError, match=r"needs a header with path and label columns"):
        read_records("manifest", tmp_path / "m.csv")
    (tmp_path / "m.csv").write_text("path,label\nmissing.png,x\n")
    with pytest.raises(DataError, match=r"the first image .*missing.png does not exist; paths are relative to"):
        read_records("manifest", tmp_path / "m.csv")


def test_wds_finds_validation_shards_and_refuses_broken_ones(tmp_path):
    photos = make_photos(np.random.default_rng(5), per_class=3)
    pattern = write_shards(tmp_path, [p for i, p in enumerate(photos) if i % 3], "train", shards=2)
    write_shards(tmp_path, photos[::3], "val", shards=1)
    found = read_records("wds", pattern)
    assert sorted(found) == ["train", "val"] and (len(found["train"]), len(found["val"])) == (6, 3)
    assert found["val"].name(2).endswith("val-000000.tar:cat_00.jpg") and found["val"].labels.tolist() == [0, 1, 2]
    assert np.asarray(found["val"].open(0)).shape[2] == 3
    assert len(read_records("wds", tmp_path)["train"]) == 6  # a folder of shards: train*.tar
    write_tar(tmp_path / "bad-000000.tar", [("a.png", photos[0][2])])
    with pytest.raises(DataError, match=r"sample a has no a cls label"):
        read_records("wds", tmp_path / "bad-000000.tar")
    (tmp_path / "gz.tar").write_bytes(b"\x1f\x8b" + bytes(600))
    with pytest.raises(DataError, match=r"gz.tar: not a readable uncompressed tar shard"):
        read_records("wds", tmp_path / "gz.tar")
    with pytest.raises(DataError, match=r"8 of the 10 shards of .* do not exist, the first .*train-000002.tar"):
        read_records("wds", str(tmp_path / "train-{000000..000009}.tar"))


def test_expand_braces():
    assert expand_braces("s/train-{000..002}.tar") == [f"s/train-{i:03d}.tar" for i in range(3)]
    assert expand_braces("{a,b}-{1..2}") == ["a-1", "a-2", "b-1", "b-2"]
    assert expand_braces("plain.tar") == ["plain.tar"] and expand_braces("x{}.tar") == ["x{}.tar"]


def test_hf_splits_class_labels_and_unlabelled_test(tmp_path):
    datasets = pytest.importorskip("datasets")
    photos = make_photos(np.random.default_rng(6), per_class=3)
    train = hf_dataset(photos)
    unlabelled = hf_dataset(photos[:2]).cast_column("label", datasets.ClassLabel(names=CLASSES))
    unlabelled = unlabelled.map(lambda row: {"label": -1})
    datasets.DatasetDict({"train": train, "validation": hf_dataset(photos[3:6]), "test": unlabelled}).save_to_disk(
        str(tmp_path / "dd")
    )
    found = read_records("hf", tmp_path / "dd")
    assert sorted(found) == ["train", "val"] and found["val"].labels.tolist() == [1, 1, 1]
    assert found["train"].name(0).endswith(":train[0] (ant_00.jpg)")  # datasets keeps the base name
    with pytest.raises(DataError, match=r"no image column 'photo'"):
        read_records("hf", tmp_path / "dd", image_column="photo")


def pixels_of(image: Image.Image) -> np.ndarray:
    return Preprocess(image_size=(9, 9), channels=3).eval_image(image).float().numpy()


def test_sixteen_bit_and_palette_pngs_decode_like_eight_bit(tmp_path):
    rng = np.random.default_rng(7)
    grey = rng.integers(0, 256, (9, 9), dtype=np.uint8)
    Image.fromarray(grey).save(tmp_path / "8.png")
    Image.fromarray(grey.astype(np.uint16) * 257).save(tmp_path / "16.png")
    assert Image.open(tmp_path / "16.png").mode == "I;16"
    eight, sixteen = decode_image(tmp_path / "8.png"), decode_image(tmp_path / "16.png")
    assert abs(pixels_of(sixteen).mean() - pixels_of(eight).mean()) <= 1 and np.array_equal(np.asarray(sixteen), grey)
    assert float(read_image(tmp_path / "16.png").mean()) == pytest.approx(grey.mean() / 255, abs=1 / 255)
    colour = rng.integers(0, 256, (9, 9, 3), dtype=np.uint8)
    palette = Image.fromarray(colour).quantize(16)
    Image.fromarray(np.asarray(palette.convert("RGB"))).save(tmp_path / "rgb.png")
    palette.save(tmp_path / "p.png", transparency=3)
    decoded = decode_image(tmp_path / "p.png")
    assert decoded.mode == "RGBA"
    assert abs(pixels_of(decoded).mean() - pixels_of(decode_image(tmp_path / "rgb.png")).mean()) <= 1


def test_auto_loader_chooses_by_the_epochs_and_streams_what_would_not_fit(sources, monkeypatch):
    small = load_dataset("folder", sources["folder"], loader="auto", epochs=10)
    assert small.loader == "memory" and "30 images at 3x32x32 are 0.1 MiB as uint8" in small.loader_reason
    assert "within min(0.50 GiB" in small.loader_reason and "10 epochs read each image 10 times" in small.loader_reason
    once = load_dataset("folder", sources["folder"], loader="auto", epochs=1, workers=0)
    assert once.loader == "stream" and "1 epoch reads each image once" in once.loader_reason
    assert load_dataset("folder", sources["folder"], loader="memory", epochs=1).loader == "memory"  # as asked
    monkeypatch.setattr(load_module, "MEMORY_LIMIT", 1000)
    big = load_dataset("folder", sources["folder"], loader="auto", workers=0, epochs=10)
    assert big.loader == "stream" and isinstance(big.train, StreamDataset) and "over min(" in big.loader_reason
    assert big.train.train and not big.val.train and big.image_shape == (3, 32, 32)
    with pytest.raises(DataError, match=r"digits is a tensor dataset"):
        load_dataset("digits", loader="stream")


def test_cifar100_reads_fine_labels_and_names(tmp_path):
    import pickle

    rng = np.random.default_rng(8)
    root = tmp_path / "cifar-100-python"
    root.mkdir()
    names = [f"class{i:03d}" for i in range(100)]
    (root / "meta").write_bytes(pickle.dumps({"fine_label_names": names, "coarse_label_names": names[:20]}))
    for split, n in (("train", 200), ("test", 100)):
        images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
        batch = {"data": images.reshape(n, -1), "fine_labels": [i % 100 for i in range(n)], "coarse_labels": [0] * n}
        (root / split).write_bytes(pickle.dumps(batch))
    splits = load_dataset("cifar100", tmp_path)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (100, 100, 100)
    assert splits.num_classes == 100 and splits.train.classes[7] == "class007"
