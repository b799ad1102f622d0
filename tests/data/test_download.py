"""download() and `vitlab data` against a local HTTP server serving generated files."""
import hashlib
import http.server
import socket
import tarfile
import threading
from functools import partial

import numpy as np
import pytest

from vitlab.cli.main import main
from vitlab.data import download, load_dataset
from vitlab.data import fetch
from vitlab.data.fetch import DownloadError, RemoteFiles


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server(tmp_path):
    """(directory served, base URL) of an HTTP server on 127.0.0.1."""
    root = tmp_path / "served"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def mnist_files(server, rng, write_mnist_split, monkeypatch):
    """Generated MNIST files on the server, with the registry's checksums replaced by theirs."""
    root, url = server
    write_mnist_split(root, "train", rng.integers(0, 256, (40, 28, 28), dtype=np.uint8),
                      rng.integers(0, 10, 40, dtype=np.uint8))
    write_mnist_split(root, "t10k", rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
                      rng.integers(0, 10, 10, dtype=np.uint8))
    checksums = {p.name: md5(p) for p in sorted(root.iterdir())}
    monkeypatch.setitem(fetch.SOURCES, "mnist", RemoteFiles("http://official.invalid/", checksums))
    return root, url


def test_download_verifies_and_skips_present_files(tmp_path, mnist_files):
    served, url = mnist_files
    paths = download("mnist", tmp_path / "mnist", mirror=url)
    assert sorted(p.name for p in paths) == sorted(p.name for p in served.iterdir())
    assert all(md5(p) == md5(served / p.name) for p in paths)
    assert len(load_dataset("mnist", tmp_path / "mnist").train) == 36  # 40 minus the last 10%
    for p in served.iterdir():          # files already present are checked, not fetched again
        p.unlink()
    assert download("mnist", tmp_path / "mnist", mirror=url) == paths


def test_mirror_from_environment(tmp_path, mnist_files, monkeypatch):
    monkeypatch.setenv("VITLAB_DATA_MIRROR", mnist_files[1])
    assert len(download("mnist", tmp_path)) == 4


def test_bad_checksum_names_the_file_and_leaves_nothing(tmp_path, mnist_files):
    served, url = mnist_files
    (served / "t10k-labels-idx1-ubyte.gz").write_bytes(b"tampered")
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte.gz from .*: checksum mismatch"):
        download("mnist", tmp_path, mirror=url)
    assert not (tmp_path / "t10k-labels-idx1-ubyte.gz").exists()
    assert not list(tmp_path.glob("*.part"))


def test_no_server_says_where_to_put_files_by_hand(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # closed once we leave the block: nothing listens there
    with pytest.raises(DownloadError, match=r"by hand from https://www.cs.toronto.edu/~kriz/.*put them in "
                                            + str(tmp_path / "c")):
        download("cifar10", tmp_path / "c", mirror=f"http://127.0.0.1:{port}")
    with pytest.raises(ValueError, match="no download for dataset 'digits'"):
        download("digits", tmp_path)


def test_cifar_archive_is_unpacked(tmp_path, server, rng, write_cifar_batch, monkeypatch):
    served, url = server
    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        write_cifar_batch(batches / name, rng.integers(0, 256, (4, 3, 32, 32), dtype=np.uint8),
                          rng.integers(0, 10, 4))
    with tarfile.open(served / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(batches, arcname="cifar-10-batches-py")
    archive = {"cifar-10-python.tar.gz": md5(served / "cifar-10-python.tar.gz")}
    monkeypatch.setitem(fetch.SOURCES, "cifar10", RemoteFiles("http://x.invalid/", archive, extract=True))
    download("cifar10", tmp_path / "data", mirror=url)
    assert len(load_dataset("cifar10", tmp_path / "data").test) == 4


def test_cli_download_and_info(tmp_path, mnist_files, capsys):
    assert main(["data", "download", "mnist", "--to", str(tmp_path), "--mirror", mnist_files[1]]) == 0
    assert capsys.readouterr().out.count("ok  ") == 4
    assert main(["data", "info", "mnist", "--data-dir", str(tmp_path), "--rows", "20"]) == 0
    out = capsys.readouterr().out
    assert "train 20  val 4  test 10" in out and "(1, 28, 28)" in out
    assert main(["data", "download", "mnist", "--to", str(tmp_path / "x"), "--mirror", "http://127.0.0.1:9"]) == 2
    assert "vitlab data: error: could not download" in capsys.readouterr().err
    assert main(["data", "info", "mnist"]) == 2
    assert "pass data_dir" in capsys.readouterr().err
