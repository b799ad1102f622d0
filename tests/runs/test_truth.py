"""A run folder that tells the truth: kill a training at any point, resume it, and the folder is the
one an uninterrupted run writes.

Each task (classification, segmentation, MAE pretraining) runs once uninterrupted, recording every
durable step (each ``os.fsync`` and ``os.replace``). Then copies of it are killed (``os._exit``, as
abrupt as SIGKILL: no handler, no cleanup) at chosen steps (just before an epoch's commit point, just
after it, among its renames, while the summary is written) and at random ones, or by a real SIGKILL
after a random delay; each is resumed (``--resume``) to the end and must hold exactly the configured
epochs once each, a summary whose chosen epoch is the one ``best/`` (or ``last/``) records, ``last/``
at the final epoch, one committed set, no stage or temporary file, and the same numbers and weights
as the uninterrupted run (the design resumes at an epoch boundary with every generator reseeded).
"""

import json
import multiprocessing
import multiprocessing.context
import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from vitlab.cli.main import main
from vitlab.errors import RunFolderError
from vitlab.runs import RunDir
from vitlab.runs.layout import EPOCH, MARKER, STAGE_PREFIX

EPOCHS = 3
TINY_MODEL = ["--set", "depth=1", "--set", "embed_dim=16", "--set", "num_heads=2"]
COMMON = ["--threads", "1", "--device", "cpu", "--quiet"]
TASKS = {
    "classify": (
        ["train", *TINY_MODEL, "--rows", "60", "--batch-size", "16", "--lr", "0.01", "--set", "warmup_epochs=0"],
        ["train"],
    ),
    "segment": (
        ["train", "--task", "segment", "--set", "count=24", "--batch-size", "8"],
        ["train", "--task", "segment"],
    ),
    "mae": (["pretrain", "mae", *TINY_MODEL, "--rows", "40", "--set", "warmup_epochs=0"], ["pretrain", "mae"]),
}
TIMING = ("seconds", "images_per_s", "data_wait")


class Trace:
    """Counts (and records) every durable step; with ``kill_at``, exits the process at that step."""

    def __init__(self, kill_at: int | None = None) -> None:
        self.kill_at, self.steps = kill_at, []
        self.fsync, self.replace = os.fsync, os.replace

    def tick(self, what: str) -> None:
        self.steps.append(what)
        if len(self.steps) == self.kill_at:
            os._exit(137)

    def install(self, monkeypatch) -> None:
        def fsync(fd):
            self.tick("fsync")
            return self.fsync(fd)

        def replace(src, dst, **kw):
            self.tick(f"replace {Path(src).name} -> {Path(dst).name}")
            return self.replace(src, dst, **kw)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)


def run_args(task: str, out: Path) -> list[str]:
    return [*TASKS[task][0], "--epochs", str(EPOCHS), *COMMON, "--out", str(out)]


def resume_args(task: str, out: Path) -> list[str]:
    return [*TASKS[task][1], "--resume", *COMMON, "--out", str(out)]


def _child(args: list[str], kill_at: int | None) -> None:
    """A killed copy's life: ``main(args)`` under a :class:`Trace`, exiting with its status."""
    code = 70
    try:
        Trace(kill_at).install(pytest.MonkeyPatch())
        code = main(args)
    finally:
        os._exit(code)


def _clean_forks() -> multiprocessing.context.BaseContext:
    """Copies forked from a clean server process that has imported torch and vitlab once: a fork of this
    pytest process would inherit what earlier tests started (autograd refuses to run in a fork of a
    process whose autograd threads have started)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "vitlab.cli.main", __name__])
    return context


def forked(args: list[str], kill_at: int | None = None, kill_after: float | None = None) -> int:
    """Run ``main(args)`` in a forked copy, killed at durable step ``kill_at`` or by SIGKILL ``kill_after``
    seconds after its run folder is marked; returns its exit status (137 for a SIGKILL, as a shell says)."""
    process = _clean_forks().Process(target=_child, args=(args, kill_at))
    process.start()
    if kill_after is not None:
        marker = Path(args[args.index("--out") + 1]) / MARKER
        while not marker.exists() and process.is_alive():
            time.sleep(0.005)
        time.sleep(kill_after)
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.join()
    code = process.exitcode
    assert code is not None
    return code if code >= 0 else 128 - code


def records(folder: Path) -> list[dict]:
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def summary(folder: Path) -> dict:
    kept = {k: v for k, v in json.loads((folder / "summary.json").read_text()).items() if k not in TIMING}
    if isinstance(kept.get("cost"), dict):  # the step time is a timing; the parameter counts are not
        kept["cost"] = {k: v for k, v in kept["cost"].items() if k != "step_seconds"}
    return kept


def assert_truthful(folder: Path, task: str) -> None:
    """The folder holds one consistent set of the finished run."""
    run = RunDir(folder)
    assert [r["epoch"] for r in records(folder)] == list(range(1, EPOCHS + 1))
    assert run.load_state()["epoch"] == EPOCHS and run.checkpoint_epoch("last") == EPOCHS
    assert run.check_committed(EPOCHS) == []
    found = summary(folder)
    if task == "classify":
        history = records(folder)
        best = max(history, key=lambda r: r["val_acc"])["epoch"]  # the first of equal scores
        assert found["best_epoch"] == best == run.checkpoint_epoch("best")
    elif task == "segment":
        assert found["best_epoch"] == EPOCHS and not run.checkpoint("best").exists()
    else:
        assert found["epochs"] == EPOCHS and Path(found["checkpoint"]).is_file()
    leftovers = [p.name for p in folder.rglob("*") if p.name.startswith(STAGE_PREFIX) or p.name.endswith(".tmp")]
    assert leftovers == []


def assert_same_run(folder: Path, whole: Path) -> None:
    assert records(folder) == records(whole)
    mine, theirs = summary(folder), summary(whole)
    mine.pop("checkpoint", None), theirs.pop("checkpoint", None)
    assert mine == theirs
    for which in ("last", "best"):
        if (whole / which / "model.safetensors").exists():
            a, b = load_file(folder / which / "model.safetensors"), load_file(whole / which / "model.safetensors")
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), which


def kill_points(steps: list[str], rng: random.Random) -> dict[str, int]:
    """Named steps (1-based, the step the process dies before) of an uninterrupted run's trace."""
    commits = [i + 1 for i, s in enumerate(steps) if s.startswith("replace commit.json.part")]
    marked = next(i + 1 for i, s in enumerate(steps) if s.endswith(f"-> {MARKER}"))
    summary_write = max(i + 1 for i, s in enumerate(steps) if s.endswith("-> summary.json"))
    second = commits[1]
    return {
        "before epoch 2's commit point": second,
        "just after epoch 2's commit point": second + 1,
        "among epoch 2's renames": second + 3,
        "while the summary is written": summary_write,
        "at a random step": rng.randrange(marked + 1, len(steps) + 1),
    }


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> dict[str, tuple[Path, list[str]]]:
    """Each task's uninterrupted run and the trace of its durable steps."""
    done = {}
    for task in TASKS:
        out = tmp_path_factory.mktemp("whole") / task
        mp = pytest.MonkeyPatch()
        trace = Trace()
        trace.install(mp)
        try:
            assert main(run_args(task, out)) == 0
        finally:
            mp.undo()
        done[task] = (out, trace.steps)
    return done


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_run_killed_at_any_step_resumes_to_the_uninterrupted_run(tmp_path, whole, task, capsys):
    reference, steps = whole[task]
    assert_truthful(reference, task)
    seed = random.randrange(2**32)
    for i, (name, step) in enumerate(kill_points(steps, random.Random(seed)).items()):
        out = tmp_path / f"{i}-killed-at-{step}"
        assert forked(run_args(task, out), kill_at=step) == 137, name
        capsys.readouterr()
        assert main(resume_args(task, out)) == 0, f"{name} (step {step}, seed {seed}): {capsys.readouterr().err}"
        err = capsys.readouterr().err
        if name == "before epoch 2's commit point":
            assert "discarded the files of an epoch a stopped process had not finished" in err
            assert "the run stands at epoch 1" in err
        if name.startswith(("just after", "among")):
            assert "finished writing epoch 2, which a stopped process had committed" in err
        assert_truthful(out, task)
        assert_same_run(out, reference)


@pytest.mark.slow
def test_a_classification_killed_at_every_step_resumes_to_the_uninterrupted_run(tmp_path, whole, capsys):
    """Every durable step of a whole run, one kill each. Killed before its config was in place, the
    folder holds no run to resume (``--resume`` says so in one line) and a plain start replaces what
    the killed one left (no ``--overwrite`` needed: it had written nothing but its marker, run.json
    and a temporary file); killed later, ``--resume`` finishes the run."""
    reference, steps = whole["classify"]
    configured = next(i + 1 for i, s in enumerate(steps) if s.endswith("-> config.json"))
    for step in range(1, len(steps) + 1):
        out = tmp_path / f"killed-at-{step}"
        assert forked(run_args("classify", out), kill_at=step) == 137, step
        capsys.readouterr()
        if step <= configured:
            assert main(resume_args("classify", out)) == 2, step
            assert len(capsys.readouterr().err.strip().splitlines()) == 1
            assert main(run_args("classify", out)) == 0, f"step {step}: {capsys.readouterr().err}"
        else:
            assert main(resume_args("classify", out)) == 0, f"step {step}: {capsys.readouterr().err}"
        capsys.readouterr()
        assert_truthful(out, "classify")
        assert_same_run(out, reference)


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_run_killed_by_sigkill_after_a_random_delay_resumes_to_the_uninterrupted_run(tmp_path, whole, task, capsys):
    reference, _ = whole[task]
    delay = random.uniform(0.0, 1.5)
    out = tmp_path / "killed"
    code = forked(run_args(task, out), kill_after=delay)
    assert code in (0, -signal.SIGKILL), code
    capsys.readouterr()
    assert main(resume_args(task, out)) == 0, f"killed after {delay:.3f}s: {capsys.readouterr().err}"
    assert_truthful(out, task)
    assert_same_run(out, reference)


@pytest.mark.slow
def test_a_failing_disk_mid_epoch_leaves_the_previous_set_and_resume_finishes(tmp_path, whole, monkeypatch, capsys):
    """ENOSPC while an epoch's files are staged: the run fails, the set of the epoch before stays
    whole (nothing in summary.json or best/ names what is not there), and --resume finishes."""
    import vitlab.runs.commit as commit

    reference, _ = whole["classify"]
    out = tmp_path / "full"
    written = []
    real = commit.write_synced

    def full_disk(path, data):
        written.append(path)
        if len(written) == 7:  # the second epoch's stage
            raise OSError(28, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(commit, "write_synced", full_disk)
    assert main(run_args("classify", out)) in (1, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0], err
    monkeypatch.undo()
    run = RunDir(out)
    assert run.load_state()["epoch"] == 1 and run.check_committed(1) == []
    assert run.checkpoint_epoch("best") == 1 and not (out / "summary.json").exists()
    assert not list(out.glob(f"{STAGE_PREFIX}*"))
    assert main(resume_args("classify", out)) == 0
    assert_truthful(out, "classify")
    assert_same_run(out, reference)


@pytest.mark.slow
def test_resume_refuses_a_state_of_another_kind_and_edited_settings_in_one_line(tmp_path, whole, capsys):
    reference, _ = whole["classify"]
    mae, _ = whole["mae"]
    out = tmp_path / "run"
    assert main(run_args("classify", out)) == 0
    capsys.readouterr()
    state = (out / "last" / "state.pt").read_bytes()
    (out / "last" / "state.pt").write_bytes((mae / "last" / "state.pt").read_bytes())
    assert main(resume_args("classify", out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds the state of a mae run, not of a classify run" in err[0]
    (out / "last" / "state.pt").write_bytes(state)
    config = json.loads((out / "config.json").read_text())
    for field, value in (("lr", 0.5), ("optimizer", "sgd"), ("model_overrides", {"depth": 2})):
        edited = {**config, field: value if field != "model_overrides" else {**config[field], **value}}
        (out / "config.json").write_text(json.dumps(edited))
        assert main(resume_args("classify", out)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        name = "model_overrides.depth" if field == "model_overrides" else field
        assert len(err) == 1 and f"{name} (run has" in err[0] and "was config.json edited?" in err[0], err
    (out / "config.json").write_text(json.dumps(config))
    assert main(resume_args("classify", out)) == 0
    assert_same_run(out, reference)


def test_write_summary_never_names_weights_the_folder_does_not_hold(tmp_path):
    from vitlab.models import build_registered
    from vitlab.runs import DataConfig

    data = DataConfig((8, 8), 1, (0.0,), (1.0,), [str(i) for i in range(10)], dataset="digits")
    with RunDir(tmp_path).open("classify", {}) as run:
        model = build_registered("vit-digits", depth=1, embed_dim=16, num_heads=2)
        blob = run.checkpoint_file(model, "classifier", data, provenance={"epoch": 2})
        run.commit(2, {"best/model.safetensors": blob, "last/model.safetensors": blob})
        run.write_summary({"best_epoch": 2})
        with pytest.raises(
            RunFolderError, match="would name epoch 3 as chosen, but best/model.safetensors holds epoch 2"
        ):
            run.write_summary({"best_epoch": 3})
    assert json.loads((tmp_path / "summary.json").read_text()) == {"best_epoch": 2}
    assert json.loads((tmp_path / EPOCH).read_text())["epoch"] == 2
