"""Where a comparison's independent tasks run: this machine's cores or a Ray cluster.

An executor has one method, ``map(fn, tasks)``: call the picklable ``fn`` on every task and yield
``(index, result)`` as each finishes, in completion order. ``fn`` must derive everything from its
task (seeds included), so where and in which order tasks run cannot change a result.

- :class:`LocalExecutor`: ``jobs`` processes forked from a preloaded ``forkserver`` (torch and plain
  ``fork`` do not mix), or this process itself when ``jobs == 1``; each task runs with ``threads`` torch threads,
  and every worker dies with the process that started it, even one killed with SIGKILL (:func:`die_with_parent`:
  the kernel kills a worker when the forkserver ends, and the forkserver ends when the pool's process does).
- :class:`RayExecutor`: one Ray task per task, on the cluster at ``address`` or on a local Ray
  started for the call; a GPU per task where the cluster has GPUs.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import torch

from ..errors import ConfigError, require

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")


class Executor(Protocol):
    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[tuple[int, R]]: ...

    def describe(self) -> dict[str, Any]: ...


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _check_counts(jobs: int, threads: int | None) -> None:
    if int(jobs) != jobs or jobs < 1:
        raise ConfigError(
            f"jobs={jobs}: the number of runs at once must be a positive integer, e.g. "
            f"{usable_cores()} (this machine's usable cores)"
        )
    if threads is not None and (int(threads) != threads or threads < 0):
        raise ConfigError(
            f"threads={threads}: torch threads per run must be a positive integer, or 0 for torch's own default"
        )


def set_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)``; ``None`` or 0 leave torch's setting as it is."""
    if threads:
        torch.set_num_threads(threads)


def exit_with(pid: int) -> None:
    """End this process (``os._exit``) as soon as process ``pid`` ends, from a daemon thread that waits on it:
    how a pool worker ends with the process that started the pool where the kernel cannot be asked to
    (no ``PR_SET_PDEATHSIG``: not Linux; see :func:`die_with_parent`)."""

    def watch() -> None:
        if hasattr(os, "pidfd_open"):
            try:
                with open(os.pidfd_open(pid), "rb", buffering=0) as handle:
                    select.select([handle], [], [])  # readable once the process has ended
            except ProcessLookupError:
                pass
        else:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid`` (from ``/proc``), None where it cannot be read (gone, or no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rpartition(b")")[2].split()[1])  # the name, in parentheses, may hold spaces
    except (OSError, ValueError, IndexError):
        return None


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent ends (Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)``,
    which no Python code has to run for: a worker stuck in a C call dies too), then end it now (``os._exit``) if
    its parent is no longer ``parent`` (it ended before the request was made). Elsewhere only the check."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def release_forkserver() -> None:
    """In a process the forkserver forked: close its copy of the pipe end by which the forkserver knows it is
    still wanted (multiprocessing hands one to every child, so a forkserver outlives the process that started it
    for as long as any worker lives). Then the forkserver ends as soon as that process does, and the workers with
    it (:func:`die_with_parent`). A later forkserver use in this process starts its own server."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        os.close(fd)
        server._forkserver_alive_fd = None  # type: ignore[union-attr]


def _start_worker(starter: int, threads: int | None) -> None:
    """A pool worker's first act. On Linux: die with its parent (:func:`die_with_parent`): the forkserver, which
    ends when ``starter`` (the process that made the pool) does once no worker holds it (:func:`release_forkserver`),
    or under ``spawn`` ``starter`` itself; end now if that chain is already broken. Elsewhere a thread ends it
    with ``starter`` (:func:`exit_with`)."""
    if not sys.platform.startswith("linux"):
        exit_with(starter)
    else:
        parent = os.getppid()
        die_with_parent(parent)
        if parent != starter:
            release_forkserver()
            if parent_of(parent) != starter:
                os._exit(1)  # the forkserver ended (or is not the starter's) before this worker asked
    set_threads(threads)


@contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    before = torch.get_num_threads()
    set_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def worker_context() -> multiprocessing.context.BaseContext:
    """``forkserver`` workers forked from a server that has imported torch and vitlab's training code
    once (no import per worker, no fork of a process whose thread pools are running); ``spawn`` where
    forkserver does not exist."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "vitlab.experiments.training"])
    return context


class LocalExecutor:
    """``jobs`` worker processes on this machine (default: every usable core); with ``jobs == 1`` the
    tasks run one after the other in this process. ``threads``: torch threads per task (``None``/0:
    torch's default, which in a worker is every core). Workers start from a fresh server process, so a script that uses
    ``jobs > 1`` keeps its top-level code under ``if __name__ == "__main__":``."""

    def __init__(self, jobs: int | None = None, threads: int | None = 1) -> None:
        self.jobs = usable_cores() if jobs is None else jobs
        self.threads = threads
        _check_counts(self.jobs, threads)

    def describe(self) -> dict[str, Any]:
        return {"executor": "local", "jobs": self.jobs, "threads_per_run": self.threads or "torch default"}

    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[tuple[int, R]]:
        if self.jobs == 1 or len(tasks) <= 1:
            with _threads(self.threads):
                for index, task in enumerate(tasks):
                    yield index, fn(task)
            return
        pool = ProcessPoolExecutor(
            min(self.jobs, len(tasks)),
            mp_context=worker_context(),
            initializer=_start_worker,
            initargs=(os.getpid(), self.threads),
        )
        try:
            pending = {pool.submit(fn, task): index for index, task in enumerate(tasks)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: pending[f]):
                    yield pending.pop(future), future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor:
    """One Ray task per task on the cluster at ``address`` (``None``: a local Ray started for the call
    with ``jobs`` CPUs, default every usable core, and stopped after it). Each task reserves
    ``threads`` CPUs and runs with that many torch threads, and reserves a GPU when the cluster has
    any. Every node needs vitlab installed and the dataset where ``data_dir`` says."""

    def __init__(self, address: str | None = None, jobs: int | None = None, threads: int | None = 1) -> None:
        require("ray", "cluster", "--executor ray")
        self.address, self.jobs, self.threads = address, jobs, threads
        _check_counts(usable_cores() if jobs is None else jobs, threads)

    def describe(self) -> dict[str, Any]:
        return {"executor": "ray", "address": self.address or "local", "threads_per_run": self.threads or 1}

    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[tuple[int, R]]:
        import ray

        started = not ray.is_initialized()
        if started and self.address is None:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a local Ray stays off the network
            ray.init(
                num_cpus=self.jobs or usable_cores(),
                include_dashboard=False,
                log_to_driver=False,
                _node_ip_address="127.0.0.1",
            )
        elif started:
            ray.init(address=self.address, log_to_driver=False)
        try:
            gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
            remote: Any = ray.remote(num_cpus=self.threads or 1, num_gpus=gpus, max_retries=0)(_with_threads)
            pending = {remote.remote(fn, task, self.threads): index for index, task in enumerate(tasks)}
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                yield pending.pop(done[0]), ray.get(done[0])
        finally:
            if started:
                ray.shutdown()


def _with_threads(fn: Callable[[T], R], task: T, threads: int | None) -> R:
    set_threads(threads)
    return fn(task)


def make_executor(
    kind: str = "local", jobs: int | None = None, threads: int | None = 1, address: str | None = None
) -> Executor:
    """The executor named ``kind`` (:data:`EXECUTORS`); ``address`` is for ``ray`` only."""
    if kind not in EXECUTORS:
        raise ConfigError(f"unknown executor {kind!r}: choose one of {EXECUTORS}")
    if kind == "local":
        if address is not None:
            raise ConfigError(f"address={address!r} is for the ray executor: add --executor ray or drop --address")
        return LocalExecutor(jobs, threads)
    return RayExecutor(address, jobs, threads)
