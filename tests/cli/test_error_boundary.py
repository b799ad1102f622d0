"""The command line's one error boundary: vitlab's own errors (and the environment's OSErrors) print one
line and exit 2 or 1; anything else is a bug and keeps its traceback.

Each test plants its error at the start of the training loop (``Engine.run``), so the command parses,
loads the tiny digits data and builds its model for real, and no training step runs.
"""

import errno
import io
import subprocess
import sys

import pytest

from vitlab.cli.main import main
from vitlab.engine.loop import Engine
from vitlab.errors import CheckpointError, ConfigError, DataError, DivergenceError, DownloadError, RunFolderError

TRAIN = ["train", "--epochs", "1", "--rows", "64", "--set", "warmup_epochs=0", "--quiet"]


def plant(monkeypatch, error: BaseException) -> None:
    """Make the training loop raise ``error`` before its first step."""

    def run(self):
        raise error

    monkeypatch.setattr(Engine, "run", run)


def one_line_error(capsys) -> str:
    """The one error line on stderr (warnings aside), with no traceback."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if ": warning: " not in line]
    assert len(lines) == 1 and lines[0].startswith("vitlab train: error: "), err
    return lines[0]


@pytest.mark.parametrize("bug", [ValueError("planted bug"), TypeError("planted bug"), KeyError("planted bug")])
def test_a_bug_keeps_its_traceback(bug, monkeypatch, capsys):
    plant(monkeypatch, bug)
    with pytest.raises(type(bug), match="planted bug"):
        main(TRAIN)
    assert ": error: " not in capsys.readouterr().err


def test_a_stream_used_the_wrong_way_is_a_bug_though_it_is_an_oserror(monkeypatch):
    plant(monkeypatch, io.UnsupportedOperation("planted bug: not writable"))
    with pytest.raises(io.UnsupportedOperation, match="planted bug"):
        main(TRAIN)


def test_the_command_prints_the_traceback_of_a_bug():
    script = (
        "import sys\n"
        "from vitlab.engine.loop import Engine\n"
        "from vitlab.cli.main import main\n"
        "def run(self):\n"
        "    raise ValueError('planted bug')\n"
        "Engine.run = run\n"
        f"sys.exit(main({TRAIN!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.rstrip().endswith("ValueError: planted bug")
    assert "vitlab train: error:" not in done.stderr


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("planted: lr must be > 0"),
        DataError("planted: no images"),
        CheckpointError("planted: corrupt"),
        RunFolderError("planted: in use"),
        DivergenceError("planted: loss is nan"),
        DownloadError("planted: offline"),
    ],
)
def test_a_vitlab_error_gives_one_line_and_its_exit_code(error, monkeypatch, capsys):
    plant(monkeypatch, error)
    assert main(TRAIN) == error.exit_code
    assert one_line_error(capsys) == f"vitlab train: error: {error}"


def test_debug_shows_the_traceback_of_a_vitlab_error(monkeypatch):
    plant(monkeypatch, ConfigError("planted: lr must be > 0"))
    with pytest.raises(ConfigError, match="planted"):
        main(["--debug", *TRAIN])


def test_a_missing_input_file_gives_one_line_and_exit_2(tmp_path, capsys):
    missing = tmp_path / "missing.yaml"
    assert main([*TRAIN, "--config", str(missing)]) == 2
    assert str(missing) in one_line_error(capsys)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (FileNotFoundError(errno.ENOENT, "No such file or directory", "/data/images/7.png"), 2),
        (PermissionError(errno.EACCES, "Permission denied", "/data/images/7.png"), 2),
        (IsADirectoryError(errno.EISDIR, "Is a directory", "/data/images"), 2),
        (OSError(errno.ENOSPC, "No space left on device", "/runs/a/last.safetensors"), 1),
    ],
)
def test_the_environment_gives_one_line_naming_the_file(error, code, monkeypatch, capsys):
    plant(monkeypatch, error)
    assert main(TRAIN) == code
    line = one_line_error(capsys)
    assert error.strerror in line and error.filename in line
