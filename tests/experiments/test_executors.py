"""Executors: settings are checked, a missing Ray says how to install it, and a local Ray cluster
gives the numbers of a run in this process."""

import importlib.util
import math
import sys

import pytest
import torch

from vitlab.cli.main import main
from vitlab.errors import ConfigError, MissingExtraError
from vitlab.experiments import CompareConfig, LocalExecutor, RayExecutor, make_executor, run_compare

TIMING = ("seconds", "images_per_s", "peak_mb")


def test_one_job_runs_in_this_process_with_its_threads_and_restores_them():
    before = torch.get_num_threads()
    seen = []
    results = list(
        LocalExecutor(jobs=1, threads=1).map(lambda x: seen.append(torch.get_num_threads()) or x * x, [1, 2, 3])
    )
    assert results == [(0, 1), (1, 4), (2, 9)] and seen == [1, 1, 1]
    assert torch.get_num_threads() == before


def test_two_jobs_give_every_task_once_whoever_runs_it():
    tasks = list(range(3, 11))
    results = list(LocalExecutor(jobs=2, threads=1).map(math.factorial, tasks))
    assert sorted(index for index, _ in results) == list(range(len(tasks)))
    assert all(value == math.factorial(tasks[index]) for index, value in results)


def test_a_failing_task_fails_the_map_in_this_process_or_a_worker():
    with pytest.raises(ValueError, match="not defined for negative values"):
        list(LocalExecutor(jobs=2, threads=1).map(math.factorial, [-1, -2, -3, -4]))


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: LocalExecutor(jobs=0), "jobs=0"),
        (lambda: LocalExecutor(jobs=2, threads=-3), "threads=-3"),
        (lambda: make_executor("dask"), "unknown executor 'dask'"),
        (lambda: make_executor("local", address="ray://head:10001"), "is for the ray executor"),
    ],
)
def test_bad_settings_are_refused(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_a_missing_ray_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # importlib finds no ray
    with pytest.raises(MissingExtraError, match=r"pip install 'vitlab\[cluster\]'"):
        RayExecutor()
    assert main(["compare", "--executor", "ray", "--epochs", "1", "--out", str(tmp_path / "study")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'vitlab[cluster]'" in err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install 'vitlab[cluster]')"
)
def test_a_local_ray_gives_the_numbers_of_this_process():
    config = CompareConfig(rows=[40], patches=[4], augment=["none"], epochs=1, device="cpu")
    local = run_compare(config, executor=LocalExecutor(jobs=1, threads=1))
    on_ray = run_compare(config, executor=RayExecutor(jobs=2, threads=1))
    assert on_ray.execution == {"executor": "ray", "address": "local", "threads_per_run": 1}
    assert len(local.records) == 2 and list(on_ray.records) == list(local.records)

    def numbers(record) -> dict:
        kept = {k: v for k, v in record.to_dict().items() if k not in TIMING}
        if isinstance(kept.get("cost"), dict):  # the step time is a timing; the parameter counts are not
            kept["cost"] = {k: v for k, v in kept["cost"].items() if k != "step_seconds"}
        return kept

    for key, record in local.records.items():
        assert numbers(on_ray.records[key]) == numbers(record)


POOL_SCRIPT = """
import os, sys, time
from vitlab.experiments.executors import LocalExecutor

def report(seconds):
    print(os.getpid(), os.getppid(), flush=True)  # this worker and its parent (the forkserver)
    time.sleep(seconds)
    return seconds

if __name__ == "__main__":
    print("starter", os.getpid(), flush=True)
    list(LocalExecutor(jobs=JOBS, threads=1).map(report, [300] * JOBS))
"""


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an ended process its new parent has not reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("jobs", [2, 3])
def test_a_pool_killed_with_sigkill_leaves_no_process_running(jobs, tmp_path):
    """A ``vitlab compare`` killed with SIGKILL (as the OOM killer or ``kill -9`` does) takes its pool with it:
    every worker and the forkserver they were forked from end within seconds, none is left training."""
    import signal
    import subprocess
    import time

    script = tmp_path / "pool.py"
    script.write_text(POOL_SCRIPT.replace("JOBS", str(jobs)))
    starter = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        assert starter.stdout.readline().split() == ["starter", str(starter.pid)]
        pairs = [tuple(int(v) for v in starter.stdout.readline().split()) for _ in range(jobs)]
        workers, servers = {w for w, _ in pairs}, {p for _, p in pairs}
        assert len(workers) == jobs and all(running(pid) for pid in workers | servers), pairs
        assert starter.pid not in servers  # forked by the forkserver, not by the pool's process
        starter.send_signal(signal.SIGKILL)
        starter.wait()
        deadline = time.monotonic() + 10  # the forkserver exits (torch preloaded), then the kernel kills each worker
        while any(running(pid) for pid in workers | servers) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = sorted(pid for pid in workers | servers if running(pid))
        assert not left, f"still running after the pool's process was killed: {left} (workers {sorted(workers)})"
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()


def test_die_with_parent_ends_a_process_whose_parent_already_ended_and_arms_the_kernel():
    """``die_with_parent(expected)`` ends the process at once when its parent is not ``expected`` (the parent ended
    before it asked), and otherwise returns with the kernel armed: the process's parent death signal is SIGKILL."""
    import subprocess

    code = """
import ctypes, os, signal
from vitlab.experiments.executors import die_with_parent
me = os.getpid()
for expected in (1, me + 1, 2**22 + 7, me, me):  # three wrong parents, then the right one (twice)
    child = os.fork()
    if child == 0:
        die_with_parent(expected)
        sig = ctypes.c_int()
        ctypes.CDLL(None).prctl(2, ctypes.byref(sig))  # PR_GET_PDEATHSIG
        os._exit(7 if sig.value == signal.SIGKILL else 3)
    print(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["1", "1", "1", "7", "7"], done
