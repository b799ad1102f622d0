"""WebDataset shards over HTTP and S3 read as the same epoch as local files; the limits that keep a hostile
or broken shard from hanging or exhausting memory, each refused in one line."""

import http.server
import io
import os
import socket
import sys
import tarfile
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from test_records import make_photos, write_shards, write_tar

from vitlab.cli.main import main
from vitlab.data import read_records
from vitlab.data import wds_records as wds
from vitlab.data.preprocess import Preprocess
from vitlab.data.stream import StreamDataset
from vitlab.errors import DataError


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """``http.server`` with the ``Range: bytes=a-b`` requests that random access by offset sends."""

    def log_message(self, *args) -> None:
        pass

    def send_head(self):
        spec = self.headers.get("Range")
        path = Path(self.translate_path(self.path))
        if not spec or not path.is_file():
            return super().send_head()
        data = path.read_bytes()
        lo, _, hi = spec.removeprefix("bytes=").partition("-")
        start, end = int(lo), min(int(hi) if hi else len(data) - 1, len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return io.BytesIO(data[start : end + 1])


@pytest.fixture
def shards(tmp_path):
    photos = make_photos(np.random.default_rng(11), per_class=3)
    pattern = write_shards(tmp_path, photos, "train", shards=3)
    return tmp_path, Path(pattern).name


@pytest.fixture
def http_root(shards):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    root, name = shards
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(RangeHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}", name
    server.shutdown()


def epoch(pattern: str) -> tuple[torch.Tensor, torch.Tensor]:
    records = read_records("wds", pattern)["train"]
    data = StreamDataset(records, Preprocess(image_size=(8, 8)), train=True)
    images, labels = zip(*data.batches(np.arange(len(records)), 4, seed=3, workers=0), strict=True)
    return torch.cat(images), torch.cat(labels)


def test_http_shards_stream_the_local_epoch_and_name_a_missing_or_truncated_shard(http_root, capsys):
    root, url, name = http_root
    local, remote = epoch(str(root / name)), epoch(f"{url}/{name}")
    assert torch.equal(local[0], remote[0]) and torch.equal(local[1], remote[1])
    assert main(["data", "info", "--dataset", "wds", "--data-dir", f"{url}/{name}", "--image-size", "8"]) == 0
    assert "9 images" in capsys.readouterr().out.replace(",", "")
    with pytest.raises(DataError, match=r"1 of the 4 shards .* the first http://127.0.0.1:\d+/train-000003.tar"):
        read_records("wds", f"{url}/train-{{000000..000003}}.tar")
    data = (root / "train-000001.tar").read_bytes()
    (root / "train-000001.tar").write_bytes(data[:1500])
    with pytest.raises(DataError, match=r"^wds: http://127.0.0.1:\d+/train-000001.tar: truncated: .* ends at byte"):
        read_records("wds", f"{url}/{name}")


def test_a_url_s_credentials_are_never_shown_and_a_pipe_is_refused():
    pipe = r"^wds: pipe:curl \.\.\. is a pipe; .* never runs a shell command .* or gs:// URL pattern the command"
    with pytest.raises(DataError, match=pipe) as refused:
        read_records("wds", "pipe:curl -s -H 'Authorization: Bearer SECRET' https://host/t.tar")
    assert "SECRET" not in str(refused.value)
    assert wds.shown("https://user:secret@host.example/a/t.tar?X-Amz-Signature=k") == "https://host.example/a/t.tar"
    assert wds.shown("s3://bucket/p/train-{0..3}.tar") == "s3://bucket/p/train-{0..3}.tar"


def test_shards_on_another_fsspec_filesystem_stream_the_local_epoch_and_gs_without_gcsfs_is_one_line(
    shards, monkeypatch
):
    """fsspec's in-memory filesystem stands in for gs:// (gcsfs is another filesystem behind the same calls)."""
    fsspec = pytest.importorskip("fsspec")
    root, name = shards
    memory = fsspec.filesystem("memory")
    for tar in root.glob("*.tar"):
        memory.pipe_file(f"/vitlab-test/{tar.name}", tar.read_bytes())
    try:
        local, remote = epoch(str(root / name)), epoch(f"memory://vitlab-test/{name}")
    finally:
        memory.rm("/vitlab-test", recursive=True)
    assert torch.equal(local[0], remote[0]) and torch.equal(local[1], remote[1])
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # not installed
    with pytest.raises(DataError, match=r"^wds: cannot read gs://bucket/train-0.tar \(.*\); pip install gcsfs$"):
        read_records("wds", "gs://bucket/train-{0..1}.tar")
    with pytest.raises(DataError, match=r"foo://b/t.tar \(.*\); vitlab reads paths and https://, s3:// or gs://"):
        read_records("wds", "foo://b/t.tar")


@pytest.fixture
def s3_endpoint(monkeypatch):
    pytest.importorskip("s3fs", reason="s3:// shards need s3fs")
    server_module = pytest.importorskip("moto.server", reason="the local S3 server needs moto[server]")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }.items():
        monkeypatch.setenv(key, value)
    yield endpoint
    server.stop()


def test_s3_shards_stream_the_local_epoch(shards, s3_endpoint):
    import boto3

    root, name = shards
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket="photos")
    for path in sorted(root.glob("*.tar")):
        client.upload_file(str(path), "photos", f"p/{path.name}")
    local, remote = epoch(str(root / name)), epoch(f"s3://photos/p/{name}")
    assert torch.equal(local[0], remote[0]) and torch.equal(local[1], remote[1])
    assert len(read_records("wds", "s3://photos/p/train-*.tar")["train"]) == 9  # a remote glob
    with pytest.raises(DataError, match=r"5 of the 8 shards .* the first s3://photos/p/train-000003.tar"):
        read_records("wds", "s3://photos/p/train-{000000..000007}.tar")


def test_transient_errors_are_retried_and_a_missing_file_is_not(monkeypatch):
    monkeypatch.setattr(wds.time, "sleep", lambda seconds: None)
    calls: list[type] = []

    def fails(error: type, times: int):
        def read():
            calls.append(error)
            if len(calls) <= times:
                raise error("t.tar")
            return b"ok"

        return read

    assert wds._retried(fails(ConnectionError, wds.RETRIES - 1)) == b"ok" and len(calls) == wds.RETRIES
    calls.clear()
    with pytest.raises(OSError, match=f"ConnectionError after {wds.RETRIES} tries"):
        wds._retried(fails(ConnectionError, wds.RETRIES))
    calls.clear()
    with pytest.raises(FileNotFoundError):
        wds._retried(fails(FileNotFoundError, 1))
    assert len(calls) == 1


def test_brace_patterns_are_counted_before_they_are_expanded():
    assert wds.count_braces("t-{000..002}-{a,b}.tar") == len(wds.expand_braces("t-{000..002}-{a,b}.tar")) == 6
    assert wds.count_braces("{a,{1..3}}") == len(wds.expand_braces("{a,{1..3}}"))
    for pattern, count in (("train-{0..99999999999}.tar", "100,000,000,000"), ("{a,b}" * 30, "1,073,741,824")):
        with pytest.raises(DataError, match=rf"^wds: .* names {count} shards, more than 1,000,000"):
            wds.shard_paths(pattern)


def test_oversized_members_repeated_keys_and_fifos_are_refused(tmp_path):
    photo = make_photos(np.random.default_rng(2), per_class=1)[0][2]
    write_tar(tmp_path / "ok.tar", [("a.png", photo), ("a.cls", b"ant")])
    big = tmp_path / "big.tar"
    write_tar(big, [("a.png", photo), ("a.cls", b"x" * (wds.MAX_LABEL_BYTES + 1))])
    with pytest.raises(DataError, match=r"big.tar: a.cls holds 65,537 bytes, more than the 65,536 a cls member"):
        read_records("wds", big)
    header = tarfile.TarInfo("b.cls")
    header.size = 12 << 30  # a 20 KB shard whose header claims a 12 GiB label
    (tmp_path / "huge.tar").write_bytes(header.tobuf(tarfile.GNU_FORMAT) + bytes(20_000))
    with pytest.raises(DataError, match=r"huge.tar: b.cls holds 12,884,901,888 bytes, more than the 65,536"):
        read_records("wds", tmp_path / "huge.tar")
    dup = tmp_path / "dup.tar"
    write_tar(dup, [("a.png", photo), ("a.cls", b"ant"), ("b.png", photo), ("b.cls", b"bee"), ("a.png", photo)])
    with pytest.raises(DataError, match=r"dup.tar: 1 members repeat a key, the first a.png"):
        read_records("wds", dup)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.tar")
        names = ("big.tar", "dup.tar", "huge.tar", "ok.tar")  # not the FIFO, which would block the reader
        assert wds.shard_paths(str(tmp_path / "*.tar")) == [str(tmp_path / n) for n in names]
