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


def test_workers_die_with_a_parent_killed_by_sigkill():
    """A ``vitlab compare`` killed with SIGKILL (as the OOM killer or ``kill -9`` does) takes its worker
    processes with it: none is left training."""
    import signal
    import subprocess
    import time

    psutil = pytest.importorskip("psutil")
    script = (
        "import time\nfrom vitlab.experiments import LocalExecutor\n"
        "if __name__ == '__main__':\n    list(LocalExecutor(jobs=2, threads=1).map(time.sleep, [300, 300]))\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 120
        workers: list = []
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            tree = psutil.Process(parent.pid).children(recursive=True)
            workers = [p for p in tree if p.ppid() != parent.pid]  # forked by the forkserver
        assert len(workers) == 2, "the pool's workers never started"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        gone, alive = psutil.wait_procs(workers, timeout=20)
        assert not alive, f"workers still running after their parent was killed: {[p.pid for p in alive]}"
    finally:
        if parent.poll() is None:
            parent.kill()
