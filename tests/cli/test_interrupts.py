"""Ctrl-C is never lost and always ends a command in one line, exit 130: one that a finaliser swallows is noted
and raised again at the next check, one during the start-up imports is caught too."""

import gc
import os
import signal
import subprocess
import sys
import time

import pytest
from tests.processes import interruptible, reaped

from vitlab.interrupts import interrupts_deferred, noted_interrupts, raise_if_interrupted


class SignalsInItsFinaliser:
    """An object whose ``__del__`` gets SIGINT while it runs (as a DataLoader iterator's queues and pipes do when
    Ctrl-C lands while they are freed)."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # bytecode after the signal: its handler runs here, inside the finaliser
            pass


@pytest.fixture
def python_handler():
    """SIGINT under Python's own handler, as in a command (a test runner may have set another)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("freed_by", ["refcount", "collector", "deferred exit"])
def test_an_interrupt_a_finaliser_swallows_is_raised_at_the_next_check(python_handler, freed_by):
    with noted_interrupts():
        if freed_by == "refcount":
            SignalsInItsFinaliser()  # freed at once: its KeyboardInterrupt is "ignored"
        elif freed_by == "collector":
            cycle = SignalsInItsFinaliser()
            cycle.me = cycle  # type: ignore[attr-defined]
            del cycle
            gc.collect()
        else:
            try:
                with interrupts_deferred():
                    os.kill(os.getpid(), signal.SIGINT)
            except KeyboardInterrupt:
                pass  # as a generator closed by the collector drops the exit's KeyboardInterrupt
        with pytest.raises(KeyboardInterrupt):
            raise_if_interrupted()
    raise_if_interrupted()  # the record is the command's: nothing noted outside it


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("argv", [["models"], ["train", "--dataset", "digits", "--epochs", "1"]])
def test_a_ctrl_c_swallowed_before_the_command_runs_ends_it(python_handler, monkeypatch, capsys, tmp_path, argv):
    """The ``vitlab`` script notes SIGINT from its first line (``noted_interrupts`` around ``main``, as
    :func:`vitlab.__main__.entry` runs it): one that a finaliser swallowed while the command line's modules were
    imported (here, while its parser is built) ends the command before it starts: exit 130, one line, nothing run."""
    import vitlab.cli.main as cli

    build = cli.build_parser

    def build_while_a_finaliser_is_interrupted(*args, **kwargs):
        SignalsInItsFinaliser()
        return build(*args, **kwargs)

    monkeypatch.setattr(cli, "build_parser", build_while_a_finaliser_is_interrupted)
    capsys.readouterr()
    with noted_interrupts():
        assert cli.main([*argv, *(["--out", str(tmp_path / "run")] if "train" in argv else [])]) == 130
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [f"vitlab {argv[0]}: interrupted"], err
    assert out == "" and not (tmp_path / "run").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _failing(error: BaseException, interrupted_first: bool):
    """A stand-in for the work of a command (or the imports before it) that fails with ``error``, after a Ctrl-C
    a finaliser swallowed when ``interrupted_first`` (as a C extension's import that drops the KeyboardInterrupt
    leaves its module half made, and the next import of it fails)."""

    def fail(*args, **kwargs):
        if interrupted_first:
            SignalsInItsFinaliser()
        raise error

    return fail


ERRORS = [
    ImportError("cannot load module more than once per process"),
    RecursionError("maximum recursion depth exceeded"),
    RuntimeError("DataLoader worker (pid 7) exited unexpectedly"),
    ValueError("a bug"),
    OSError(5, "Input/output error"),
]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("stage", ["build_parser", "command"])
@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_after_a_ctrl_c_ends_the_command_as_the_ctrl_c(python_handler, monkeypatch, capsys, stage, error):
    """Whatever error ends a command after a Ctrl-C, while its modules are imported or while it runs, is the
    Ctrl-C's doing: one line, exit 130."""
    import vitlab.cli.main as cli
    import vitlab.cli.models as models

    if stage == "build_parser":
        monkeypatch.setattr(cli, "build_parser", _failing(error, interrupted_first=True))
    else:
        monkeypatch.setattr(models, "run", _failing(error, interrupted_first=True))
    capsys.readouterr()
    assert cli.main(["models"]) == 130
    out, err = capsys.readouterr()
    said = err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("vitlab models: interrupted"), err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_the_same_error_without_a_ctrl_c_keeps_its_own_ending(python_handler, monkeypatch, capsys, error):
    """Without a Ctrl-C, an error is what it is: a bug keeps its traceback, the machine's fault is one line."""
    import vitlab.cli.main as cli
    import vitlab.cli.models as models

    monkeypatch.setattr(models, "run", _failing(error, interrupted_first=False))
    if isinstance(error, OSError):
        assert cli.main(["models"]) == 1
        assert capsys.readouterr().err.strip() == "vitlab models: error: [Errno 5] Input/output error"
    else:
        with pytest.raises(type(error)):
            cli.main(["models"])


@pytest.mark.parametrize("outer", ["noted", "python"])
@pytest.mark.parametrize(("depth", "signal_at"), [(d, s) for d in range(2, 5) for s in range(1, d + 1)])
def test_a_ctrl_c_inside_nested_deferrals_is_raised_when_the_outermost_ends(python_handler, outer, depth, signal_at):
    finished: list[int] = []

    def level(n: int) -> None:
        with interrupts_deferred():
            if n == signal_at:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(10_000):  # bytecode after the signal: its handler runs here
                    pass
            if n < depth:
                level(n + 1)
            finished.append(n)  # every level's body runs to its end: nothing is raised inside a deferral

    if outer == "noted":
        with noted_interrupts():
            with pytest.raises(KeyboardInterrupt):
                level(1)
            with pytest.raises(KeyboardInterrupt):
                raise_if_interrupted()  # in the command's record too
    else:
        with pytest.raises(KeyboardInterrupt):
            level(1)
    assert finished == list(range(depth, 0, -1))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nested_deferrals_without_a_ctrl_c_raise_nothing_and_restore_the_handler(python_handler):
    with interrupts_deferred():
        with interrupts_deferred():
            pass
        with interrupts_deferred():
            pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_program_with_its_own_sigint_handler_keeps_it():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with noted_interrupts():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            raise_if_interrupted()
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("delay", [0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.4])
def test_ctrl_c_during_the_start_up_imports_ends_in_one_line(delay, tmp_path):
    """SIGINT a few moments after vitlab's entry began importing the command line (Python's own start-up and
    runpy's before it are any program's): while the command's modules and torch are imported, or the command
    begins: one line, exit 130."""
    process = interruptible(
        [sys.executable, "-X", "importtime", "-m", "vitlab", "train", "--dataset", "digits", "--out", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    with reaped(process):
        for line in process.stderr:
            if line.split("|")[-1].strip() == "vitlab.errors":  # vitlab's entry is importing the command line
                break
        else:
            pytest.fail("vitlab.errors was never imported: the Ctrl-C would come after the run")
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=120)
    said = [line for line in err.splitlines() if not line.startswith("import time:")]
    said_whole = "\n".join(said)  # whole, where a list would be cut short in the report
    assert process.returncode == 130, f"exit {process.returncode}:\n{said_whole}"
    assert len(said) == 1 and said[0].startswith("vitlab") and said[0].endswith("interrupted"), said_whole
