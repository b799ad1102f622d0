"""``vitlab data shard`` writes a folder as shards that ``--dataset wds`` and ``webdataset`` read back exactly;
re-runs complete missing shards and never overwrite finished ones silently."""

import io
import json

import numpy as np
import pytest
from PIL import Image
from test_records import make_photos, write_folder

from vitlab.cli.main import main
from vitlab.data import read_records
from vitlab.data.shard_writer import write_dataset_shards
from vitlab.errors import DataError


@pytest.fixture
def folder(tmp_path):
    photos = make_photos(np.random.default_rng(4), per_class=3)
    return write_folder(tmp_path / "photos", photos), photos


def test_shard_round_trips_labels_and_bytes_and_webdataset_reads_it(folder, tmp_path, capsys):
    root, photos = folder
    out = tmp_path / "shards"
    assert main(["data", "shard", "--data-dir", str(root), "--out", str(out), "--max-count", "4", "--json"]) == 0
    manifest = json.loads((out / "shards.json").read_text())
    assert [s["count"] for s in manifest["splits"]["train"]] == [4, 4, 1]
    assert "--data-dir '" + str(out) + "/train-{000000..000002}.tar'" in capsys.readouterr().out
    source, shards = read_records("folder", root)["train"], read_records("wds", out / "train-{000000..000002}.tar")
    back = shards["train"]
    assert back.classes == source.classes and back.labels.tolist() == source.labels.tolist()
    assert [back.store.source(int(j)) for j in back.refs] == [data for _, _, data in photos]
    webdataset = pytest.importorskip("webdataset")
    samples = list(webdataset.WebDataset(sorted(str(p) for p in out.glob("train-*.tar")), shardshuffle=False))
    assert [s["cls"].decode() for s in samples] == [cls for cls, _, _ in photos]
    assert json.loads(samples[0]["json"])["source"] == "ant/ant_00.jpg"
    assert [s.get("jpg", s.get("png")) for s in samples] == [data for _, _, data in photos]


def test_shard_re_encodes_at_max_side_within_tolerance(folder, tmp_path):
    root, photos = folder
    write_dataset_shards(read_records("folder", root), tmp_path / "s", max_size=4000, max_side=10, report=str)
    back = read_records("wds", tmp_path / "s")["train"]
    assert back.labels.tolist() == read_records("folder", root)["train"].labels.tolist()
    for i, (_, name, data) in enumerate(photos):
        expected = Image.open(io.BytesIO(data)).convert("RGB")
        expected.thumbnail((10, 10), Image.Resampling.LANCZOS)
        got = np.asarray(back.open(i).convert("RGB"), dtype=np.int16)
        assert got.shape == np.asarray(expected).shape and max(got.shape[:2]) <= 10
        tolerance = 12 if name.endswith(".jpg") else 0  # JPEG quality 95 re-encoding; PNG is exact
        assert np.abs(got - np.asarray(expected, dtype=np.int16)).mean() <= tolerance, name


def test_shard_resumes_and_never_overwrites_silently(folder, tmp_path):
    root, _ = folder
    splits, out = read_records("folder", root), tmp_path / "s"
    first = write_dataset_shards(splits, out, max_count=4, report=str)
    (out / "shards.json").unlink()
    (out / "train-000001.tar").unlink()
    (out / "train-000002.tar").unlink()
    kept = (out / "train-000000.tar").stat().st_mtime_ns
    lines: list[str] = []
    assert write_dataset_shards(splits, out, max_count=4, workers=2, report=lines.append) == first
    assert (out / "train-000000.tar").stat().st_mtime_ns == kept and lines[0].startswith("kept")
    assert [line.split()[0] for line in lines] == ["kept", "wrote", "wrote"]  # two missing: written by workers
    with pytest.raises(DataError, match=r"shards.json exists: the shards are complete; pass --overwrite"):
        write_dataset_shards(splits, out, max_count=4, report=str)
    (out / "shards.json").unlink()
    with pytest.raises(DataError, match=r"train-000000.tar exists with 4 samples where this plan has 2"):
        write_dataset_shards(splits, out, max_count=2, report=str)
    again = write_dataset_shards(splits, out, max_count=2, overwrite=True, report=str)
    assert [s["count"] for s in again["splits"]["train"]] == [2, 2, 2, 2, 1]
