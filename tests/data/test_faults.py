"""Faults inside a streamed run and budgets before allocation: batches emptied by unreadable images, a
killed DataLoader worker, an image too elongated to resize, a memory loader too large for the machine.
Each is a class of cases, generated, and each ends in one line, never a traceback."""

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image
from tests.conftest import _write_hue_photos
from tests.processes import interruptible, reaped

from vitlab.cli.main import main
from vitlab.data import read_image, read_records
from vitlab.data.image import MAX_ASPECT
from vitlab.data.preprocess import Preprocess
from vitlab.data.records import Records
from vitlab.data.stream import StreamDataset, _worker_start
from vitlab.errors import DataError, WorkerError

TINY = ["--set", "depth=1", "--set", "embed_dim=32", "--set", "num_heads=2", "--set", "patch_size=8"]


def train_argv(photos, out, loader: str, batch_size: int, *extra: str) -> list[str]:
    argv = ["train", "--dataset", "folder", "--data-dir", str(photos), "--image-size", "16", "--loader", loader]
    argv += ["--epochs", "1", "--batch-size", str(batch_size), "--device", "cpu", "--out", str(out), *TINY]
    return [*argv, "--set", "data.workers=0", "--set", "warmup_epochs=0", *extra]


@pytest.mark.parametrize(("batch_size", "bad", "seed"), [(1, 3, 0), (2, 4, 1), (3, 6, 2)])
def test_batches_emptied_by_unreadable_images_are_skipped_and_counted_by_both_loaders(
    tmp_path, capsys, batch_size, bad, seed
):
    """``bad`` unreadable files among 12 photos, batches of ``batch_size``: some batches hold nothing readable
    (an epoch then has fewer batches than the sampler planned); both loaders train and count every one."""
    photos = tmp_path / "photos"
    _write_hue_photos(photos, 4, seed, sides=(16, 30))
    files = sorted(photos.rglob("*.jpg"))
    for path in np.random.default_rng(seed).choice(files, size=bad, replace=False):
        path.write_bytes(b"not a jpeg")
    counts = {}
    for loader in ("stream", "memory"):
        out = tmp_path / loader
        assert main(train_argv(photos, out, loader, batch_size, "--set", f"data.max_bad_images={bad}")) == 0
        err = capsys.readouterr().err
        assert f"skipped {bad} unreadable image(s)" in err and "Traceback" not in err, loader
        counts[loader] = json.loads((out / "summary.json").read_text())["skipped_images"]["count"]
    assert counts == {"stream": bad, "memory": bad}


def killing_open(kill_at: int | None, parent: int, seen=None):
    """``Records.open`` that SIGKILLs the worker process opening item ``kill_at`` (with ``seen``, a folder: any
    file opened a second time, i.e. in the second epoch), as the out-of-memory killer does."""
    opened = Records.open

    def open_(self, i):
        again = False
        if seen is not None:
            marker = seen / self.name(i).replace(os.sep, "_")
            again, _ = marker.exists(), marker.touch()
        if os.getpid() != parent and (i == kill_at or again):
            os.kill(os.getpid(), signal.SIGKILL)
        return opened(self, i)

    return open_


@pytest.mark.parametrize(("kill_at", "batch_size"), [(0, 3), (5, 2), (11, 4)])
def test_a_killed_worker_is_one_error_naming_it_and_the_cure(tmp_path, monkeypatch, kill_at, batch_size):
    _write_hue_photos(tmp_path, 4, kill_at, sides=(12, 20))
    data = StreamDataset(read_records("folder", tmp_path)["train"], Preprocess(image_size=(8, 8)))
    monkeypatch.setattr(Records, "open", killing_open(kill_at, os.getpid()))
    with pytest.raises(WorkerError, match=r"worker \(pid \d+\) (was killed|exited).*out of memory.*--workers"):
        list(data.batches(range(len(data)), batch_size, workers=1))
    assert WorkerError.exit_code == 1


def kill_cases(seed: int = 3) -> list[tuple[str, int, int, int]]:
    """``(moment, item killed at, batch size, workers)``, drawn: at start-up (an item of the first batch), mid-epoch
    (while the consumer is busy outside the loader) and at the end (the last item)."""
    rng = np.random.default_rng(seed)
    cases = []
    for moment in ("start-up", "mid-epoch", "end"):
        for _ in range(2):
            batch_size, workers = int(rng.integers(1, 5)), int(rng.integers(1, 3))
            at = {"start-up": int(rng.integers(0, batch_size)), "mid-epoch": int(rng.integers(4, 8)), "end": 11}
            cases.append((moment, at[moment], batch_size, workers))
    return cases


@pytest.mark.parametrize(("moment", "kill_at", "batch_size", "workers"), kill_cases())
def test_a_worker_killed_at_any_moment_is_one_worker_error_after_a_true_prefix(
    tmp_path, monkeypatch, moment, kill_at, batch_size, workers
):
    _write_hue_photos(tmp_path, 4, kill_at, sides=(12, 20))
    data = StreamDataset(read_records("folder", tmp_path)["train"], Preprocess(image_size=(8, 8)))
    whole = [labels.tolist() for _, labels in data.batches(range(len(data)), batch_size, workers=0)]
    monkeypatch.setattr(Records, "open", killing_open(kill_at, os.getpid()))
    seen = []
    with pytest.raises(WorkerError) as raised:
        for _, labels in data.batches(range(len(data)), batch_size, workers=workers):
            seen.append(labels.tolist())
            if moment == "mid-epoch":
                time.sleep(0.2)  # the worker dies while this process is here, outside the loader
    message = str(raised.value)
    assert re.search(r"worker \(pid \d+\) was killed by SIGKILL, most likely out of memory", message), message
    assert f"--workers (now {workers})" in message and f"--batch-size (now {batch_size})" in message
    assert "\n" not in message
    assert seen == whole[: len(seen)] and len(seen) <= kill_at // batch_size  # what came before it is true


@pytest.mark.parametrize("raised", [EOFError, ConnectionResetError, BrokenPipeError, RuntimeError])
@pytest.mark.parametrize("dead", [False, True])
def test_a_pipe_error_is_a_worker_error_only_when_a_worker_really_died(tmp_path, monkeypatch, raised, dead):
    _write_hue_photos(tmp_path, 4, 0, sides=(12, 20))
    data = StreamDataset(read_records("folder", tmp_path)["train"], Preprocess(image_size=(8, 8)))
    monkeypatch.setattr("vitlab.data.stream.WORKER_DEATH_WAIT", 0.3)
    decoded = StreamDataset._decoded

    def failing(self, batch):
        if dead:
            for child in multiprocessing.active_children():
                os.kill(child.pid, signal.SIGKILL)
        raise raised("the pipe broke")

    monkeypatch.setattr(StreamDataset, "_decoded", failing)
    expected = WorkerError if dead else raised
    with pytest.raises(expected) as caught:
        list(data.batches(range(len(data)), 2, workers=1))
    assert (type(caught.value) is raised and str(caught.value) == "the pipe broke") != dead
    monkeypatch.setattr(StreamDataset, "_decoded", decoded)
    assert len(list(data.batches(range(len(data)), 2, workers=1))) == 6  # the next epoch starts afresh


def test_a_killed_worker_in_training_exits_1_in_one_line_and_the_run_resumes(tmp_path, monkeypatch, capsys):
    photos = tmp_path / "photos"
    _write_hue_photos(photos, 4, 0, sides=(16, 30))
    out = tmp_path / "run"
    argv = [*train_argv(photos, out, "stream", 2), "--set", "data.workers=1", "--set", "normalization=unit"]
    argv[argv.index("--epochs") + 1] = "2"
    (tmp_path / "seen").mkdir()
    with monkeypatch.context() as patch:  # killed in the second epoch
        patch.setattr(Records, "open", killing_open(None, os.getpid(), tmp_path / "seen"))
        assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "out of memory" in err and "Traceback" not in err and len(err.splitlines()) >= 1
    assert err.splitlines()[-1].startswith("vitlab train: error: data-loading worker")
    assert main([*argv, "--resume"]) == 0
    epochs = [json.loads(line)["epoch"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [1, 2]


@pytest.mark.parametrize("size", [(60_000_000, 1), (1, 5000), (MAX_ASPECT * 3 + 1, 3)])
def test_an_image_too_elongated_is_refused_from_its_header(tmp_path, size):
    path = tmp_path / "line.png"
    Image.new("1", size).save(path)  # a few kilobytes, under the pixel limit
    with pytest.raises(DataError, match=rf"line.png: {size[0]}x{size[1]} pixels is over the aspect-ratio limit"):
        read_image(path)
    Image.new("L", (MAX_ASPECT * 2, 2)).save(path)  # the limit itself is read
    assert read_image(path).shape == (3, 2, MAX_ASPECT * 2)


def test_training_and_predict_refuse_an_elongated_image_in_one_line(tmp_path, capsys):
    photos = tmp_path / "photos"
    _write_hue_photos(photos, 4, 0, sides=(16, 30))
    line = tmp_path / "line.png"
    Image.new("1", (60_000_000, 1)).save(line)
    assert main(train_argv(photos, tmp_path / "run", "memory", 4)) == 0
    (photos / "ant" / "line.png").write_bytes(line.read_bytes())
    for argv in (
        *(train_argv(photos, tmp_path / k, k, 4) for k in ("stream", "memory")),
        ["predict", str(tmp_path / "run"), str(line)],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert "line.png: 60000000x1 pixels is over the aspect-ratio limit of 256:1" in err, argv
        assert "Traceback" not in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(("image_size", "available"), [(64, 512 << 10), (8192, 12 << 30), (256, 4 << 20)])
def test_the_memory_loader_is_refused_over_its_budget_before_decoding(
    tmp_path, monkeypatch, capsys, image_size, available
):
    photos = tmp_path / "photos"
    _write_hue_photos(photos, 14, 0, sides=(8, 12))  # 42 images, as in the report
    monkeypatch.setattr("vitlab.data.load.available_memory", lambda: available)
    monkeypatch.setattr(Records, "open", lambda *_: pytest.fail("decoded before the budget was checked"))
    argv = train_argv(photos, tmp_path / "run", "memory", 4)
    argv[argv.index("--image-size") + 1] = str(image_size)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"42 images at 3x{image_size}x{image_size}" in err, err
    assert "--loader stream" in err


def interrupted(argv: list[str], moment: str, rng: np.random.Generator) -> tuple[int, str]:
    """Run ``vitlab`` with ``argv`` in a process of its own and send Ctrl-C (SIGINT to its process group, as a
    terminal does: the DataLoader workers get it too) a seeded few milliseconds after a line of ``moment``:
    ``start-up`` the data's line (the loader starts its workers next), ``mid-epoch`` a first step's line,
    ``checkpoint`` the second epoch's last step's line (while it is validated and committed; the first epoch is
    committed by then). ``(exit code, stderr)``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = interruptible(
        [sys.executable, "-m", "vitlab", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    seen = ""
    wanted, times = {"start-up": (r"^folder: stream", 1), "mid-epoch": (r"step 1/", 1)}.get(
        moment, (r"step (\d+)/\1\b", 2)
    )
    with reaped(process):
        for line in process.stderr:
            seen += line
            times -= bool(re.search(wanted, line))
            if not times:
                break
        assert not times, f"no {moment} line ({wanted}) before the run ended: the Ctrl-C would come too late\n{seen}"
        time.sleep(rng.uniform(0.0, 0.05))
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=60)
    return process.returncode, seen + err


@pytest.mark.slow
def test_ctrl_c_anywhere_in_a_streamed_run_exits_130_in_one_line_and_resume_finishes(tmp_path):
    photos = tmp_path / "photos"
    _write_hue_photos(photos, 4, 0, sides=(16, 30))
    out = tmp_path / "run"
    argv = [*train_argv(photos, out, "stream", 2), "--set", "data.workers=1"]
    argv[argv.index("--epochs") + 1] = "20"
    rng = np.random.default_rng(0)
    for moment in ("mid-epoch", "checkpoint", "start-up"):
        again = ["--resume"] if (out / "config.json").is_file() else []
        code, err = interrupted([*argv, *again], moment, rng)
        assert code == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, (moment, err)
        assert err.strip().splitlines()[-1].startswith("vitlab train: interrupted"), (moment, err)
    assert main([*argv, "--resume"]) == 0
    epochs = [json.loads(line)["epoch"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert epochs == list(range(1, 21))


def test_a_worker_keeps_the_hang_up_of_an_interrupted_main_process_to_itself(monkeypatch, capsys):
    """A main process that Ctrl-C stops while it takes a batch's shared memory resets the worker's connection;
    the worker's ``resource_sharer`` thread reports that through ``sys.excepthook``: no traceback, the main
    process says what happened. A worker's other faults still print."""
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    previous = signal.getsignal(signal.SIGINT)
    try:
        _worker_start(0)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    hang_ups = [ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe"), EOFError()]
    for error in hang_ups:
        try:
            raise error
        except Exception:
            sys.excepthook(*sys.exc_info())  # as multiprocessing.resource_sharer's serving thread reports
    assert capsys.readouterr().err == ""
    try:
        raise ValueError("a fault of the worker's own")
    except ValueError:
        sys.excepthook(*sys.exc_info())
    assert "ValueError: a fault of the worker's own" in capsys.readouterr().err


def test_resume_of_a_folder_without_a_run_says_to_start_again(tmp_path, capsys):
    assert main(train_argv(tmp_path, tmp_path / "never", "stream", 2, "--resume")) == 2
    err = capsys.readouterr().err.strip()
    assert "holds no run to resume" in err and "without --resume" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("images_per_batch", [1, 3])
def test_channel_statistics_in_bounded_batches_are_the_same(tmp_path, monkeypatch, images_per_batch):
    _write_hue_photos(tmp_path, 4, images_per_batch, sides=(12, 20))
    data = StreamDataset(read_records("folder", tmp_path)["train"], Preprocess(image_size=(8, 8)))
    whole = data.statistics(workers=0)
    monkeypatch.setattr("vitlab.data.stream.STATISTICS_BYTES", images_per_batch * 8 * 3 * 8 * 8)
    calls = []
    batches = StreamDataset.batches
    monkeypatch.setattr(
        StreamDataset, "batches", lambda self, index, size, **kw: calls.append(size) or batches(self, index, size, **kw)
    )
    bounded = data.statistics(workers=0)
    assert calls == [images_per_batch]
    np.testing.assert_allclose(bounded, whole, rtol=1e-12)
