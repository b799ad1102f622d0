"""download() and `vitlab data` against local HTTP servers: honest, absent, trickling and over-sending."""

import hashlib
import http.server
import socket
import tarfile
import threading
import time
from functools import partial

import numpy as np
import pytest

from vitlab import errors
from vitlab.cli.main import main
from vitlab.data import download, fetch, load_dataset
from vitlab.data.fetch import DownloadError, RemoteFile, RemoteFiles
from vitlab.errors import DataError


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve(handler) -> tuple[http.server.ThreadingHTTPServer, str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/"


@pytest.fixture
def server(tmp_path):
    """(directory served, base URL) of an HTTP server on 127.0.0.1."""
    root = tmp_path / "served"
    root.mkdir()
    httpd, url = serve(partial(QuietHandler, directory=str(root)))
    yield root, url
    httpd.shutdown()
    httpd.server_close()


def md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def mnist_files(server, rng, write_mnist_split, monkeypatch):
    """Generated MNIST files on the server, with the registry's checksums and sizes replaced by theirs."""
    root, url = server
    write_mnist_split(
        root, "train", rng.integers(0, 256, (40, 28, 28), dtype=np.uint8), np.repeat(np.arange(10, dtype=np.uint8), 4)
    )
    write_mnist_split(
        root, "t10k", rng.integers(0, 256, (10, 28, 28), dtype=np.uint8), rng.integers(0, 10, 10, dtype=np.uint8)
    )
    files = {p.name: RemoteFile(md5(p), p.stat().st_size) for p in sorted(root.iterdir())}
    monkeypatch.setitem(fetch.SOURCES, "mnist", RemoteFiles("http://official.invalid/", files))
    return root, url


def test_download_verifies_and_skips_present_files(tmp_path, mnist_files):
    served, url = mnist_files
    paths = download("mnist", tmp_path / "mnist", mirror=url)
    assert sorted(p.name for p in paths) == sorted(p.name for p in served.iterdir())
    assert all(md5(p) == md5(served / p.name) for p in paths)
    assert len(load_dataset("mnist", tmp_path / "mnist").val) == 10  # a stratified tenth of 40
    for p in served.iterdir():  # files already present are checked, not fetched again
        p.unlink()
    assert download("mnist", tmp_path / "mnist", mirror=url) == paths


def test_default_target_is_where_load_dataset_looks(mnist_files, empty_data_home):
    paths = download("mnist", mirror=mnist_files[1])
    assert {p.parent for p in paths} == {empty_data_home / "mnist"}
    assert load_dataset("mnist").source == str(empty_data_home / "mnist")


def test_mirror_from_environment(tmp_path, mnist_files, monkeypatch):
    monkeypatch.setenv("VITLAB_DATA_MIRROR", mnist_files[1])
    assert len(download("mnist", tmp_path)) == 4


def test_bad_checksum_names_the_file_and_leaves_nothing(tmp_path, mnist_files):
    served, url = mnist_files
    (served / "t10k-labels-idx1-ubyte.gz").write_bytes(b"tampered")
    with pytest.raises(DownloadError, match=r"t10k-labels-idx1-ubyte.gz from .*: checksum mismatch"):
        download("mnist", tmp_path, mirror=url)
    assert not (tmp_path / "t10k-labels-idx1-ubyte.gz").exists()
    assert not list(tmp_path.glob("*.part"))


def test_stale_part_files_of_a_killed_run_are_removed(tmp_path, mnist_files):
    stale = tmp_path / "train-images-idx3-ubyte.gz.part"
    stale.write_bytes(b"half a file")
    (tmp_path / "notes.part").write_bytes(b"not ours")
    download("mnist", tmp_path, mirror=mnist_files[1])
    assert not stale.exists() and (tmp_path / "notes.part").exists()


def test_no_server_says_where_to_put_files_by_hand(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once we leave the block: nothing listens there
    with pytest.raises(
        DownloadError, match=r"by hand from https://www.cs.toronto.edu/~kriz/.*put them in " + str(tmp_path / "c")
    ):
        download("cifar10", tmp_path / "c", mirror=f"http://127.0.0.1:{port}")
    assert not list((tmp_path / "c").iterdir())
    with pytest.raises(DataError, match="no download for dataset 'digits'"):
        download("digits", tmp_path)
    assert issubclass(DownloadError, errors.DownloadError) and issubclass(DownloadError, OSError)


def sender(size: int, chunk: bytes, pause: float, announce: int | None):
    """A handler that announces ``announce`` bytes (None: no Content-Length) and sends ``chunk`` every
    ``pause`` seconds, at most ``size`` bytes in all, stopping when the client hangs up."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            self.send_response(200)
            if announce is not None:
                self.send_header("Content-Length", str(announce))
            self.end_headers()
            for _ in range(size // len(chunk)):
                try:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(pause)

        def log_message(self, *args) -> None:
            pass

    return Handler


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """Run a download of one 1,000-byte file from a server built by :func:`sender`; yields the runner."""
    servers = []
    one_file = RemoteFiles("http://x.invalid/", {"f.gz": RemoteFile("0" * 32, 1000)})
    monkeypatch.setitem(fetch.SOURCES, "mnist", one_file)

    def run(handler, **kwargs):
        httpd, url = serve(handler)
        servers.append(httpd)
        return download("mnist", tmp_path / "out", mirror=url, **kwargs)

    yield run
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()
    assert not list((tmp_path / "out").glob("*.part"))


@pytest.mark.slow
def test_a_trickling_mirror_is_cut_off_at_the_deadline(hostile):
    with pytest.raises(DownloadError, match=r"only \d+ of 1,000 bytes arrived within the deadline of 0.5 s"):
        hostile(sender(1000, b"x", 0.05, 1000), deadline=0.5, timeout=5)


@pytest.mark.slow
def test_a_stalled_mirror_times_out(hostile):
    with pytest.raises(DownloadError, match=r"could not download .*timed out"):
        hostile(sender(1000, b"x", 3.0, 1000), deadline=0.5, timeout=5)


def test_an_oversized_response_is_refused_early(hostile):
    with pytest.raises(DownloadError, match=r"announces 300,000 bytes, more than the 1,000 of the official file"):
        hostile(sender(300_000, b"x" * 1000, 0.0, 300_000))
    with pytest.raises(DownloadError, match=r"sent more than the 1,000 bytes of the official file"):
        hostile(sender(300_000, b"x" * 100, 0.001, None))


def test_cifar_archive_is_unpacked(tmp_path, server, rng, write_cifar_batch, monkeypatch):
    served, url = server
    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        write_cifar_batch(batches / name, rng.integers(0, 256, (4, 3, 32, 32), dtype=np.uint8), np.arange(4) % 2)
    archive = served / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(batches, arcname="cifar-10-batches-py")
    files = {archive.name: RemoteFile(md5(archive), archive.stat().st_size)}
    monkeypatch.setitem(fetch.SOURCES, "cifar10", RemoteFiles("http://x.invalid/", files, extract=True))
    download("cifar10", tmp_path / "data", mirror=url)
    assert len(load_dataset("cifar10", tmp_path / "data").test) == 4


def test_cli_download_and_info(tmp_path, mnist_files, capsys, no_system_data):
    assert main(["data", "download", "mnist", "--data-dir", str(tmp_path), "--mirror", mnist_files[1]]) == 0
    assert capsys.readouterr().out.count("ok  ") == 4
    assert main(["data", "download", "mnist", "--to", str(tmp_path), "--mirror", mnist_files[1]]) == 0
    assert capsys.readouterr().out.count("ok  ") == 4  # --to: the old name of --data-dir
    assert main(["data", "info", "mnist", "--data-dir", str(tmp_path), "--rows", "20"]) == 0
    out = capsys.readouterr().out
    assert "train 20  val 10  test 10" in out and "(1, 28, 28)" in out and f"source   {tmp_path}" in out
    assert main(["data", "download", "mnist", "--data-dir", str(tmp_path / "x"), "--mirror", "http://127.0.0.1:9"]) == 1
    assert "vitlab data: error: could not download" in capsys.readouterr().err
    assert main(["data", "info", "mnist"]) == 2
    assert "get them with `vitlab data download mnist`" in capsys.readouterr().err
    (tmp_path / "some.png").write_bytes(b"")
    assert main(["data", "download", "mnist", "--data-dir", str(tmp_path / "some.png" / "x")]) == 2
    err = capsys.readouterr().err
    blocked = f"cannot create the folder {tmp_path}/some.png/x: {tmp_path}/some.png is a file; choose another"
    assert err.count("\n") == 1 and blocked in err
