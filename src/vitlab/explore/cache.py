"""A cache of costly loads for the explorer's request threads: one load per key at a time, a byte cap.

:class:`LoadOnce` keeps values (sample splits) by key, the least recently used dropped first once
their bytes pass the cap. Requests for a key being loaded wait for that one load rather than start
their own, so twelve requests for the same cold key cost one load; at most ``slots`` loads of
different keys run at once, and a request that waits longer than ``wait`` seconds (for a slot or for
another's load) is refused with :class:`~vitlab.explore.images.RequestError` 503.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import ConfigError

V = TypeVar("V")


class LoadTimeoutError(RuntimeError):
    """A load waited too long, for a slot or for another request's load of the same key."""


class _Loading(Generic[V]):
    """One load in progress: the requests for its key wait on ``done``."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: V | None = None
        self.error: BaseException | None = None


class LoadOnce(Generic[V]):
    """Values by key, loaded once however many threads ask at once, kept under ``cap`` bytes (LRU).

    ``size(value)`` is a value's bytes. A value larger than ``cap`` alone is returned but not kept.
    Thread-safe."""

    def __init__(self, cap: int, size: Callable[[V], int], slots: int = 2, wait: float = 60.0) -> None:
        if cap < 1 or slots < 1 or wait <= 0:
            raise ConfigError(f"cap, slots and wait must be positive, got {cap}, {slots}, {wait}")
        self.cap, self.size, self.wait = cap, size, wait
        self.loads = 0  # loads run (a measure for tests and benchmarks)
        self._kept: OrderedDict[str, tuple[V, int]] = OrderedDict()
        self._loading: dict[str, _Loading[V]] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(slots)

    @property
    def nbytes(self) -> int:
        """Bytes of the values kept now (never over ``cap``)."""
        with self._lock:
            return sum(n for _, n in self._kept.values())

    def keys(self) -> list[str]:
        """The keys kept, least recently used first."""
        with self._lock:
            return list(self._kept)

    def get(self, key: str, load: Callable[[], V]) -> V:
        """The value of ``key``: kept, or being loaded by another thread (waited for), or ``load()`` now.

        An error of ``load`` reaches every request that waited for it; nothing is kept, and the next
        request loads again. Raises :class:`LoadTimeoutError` past ``wait`` seconds."""
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key][0]
            loading = self._loading.get(key)
            mine = loading is None
            if loading is None:
                loading = self._loading[key] = _Loading()
        if not mine:
            if not loading.done.wait(self.wait):
                raise LoadTimeoutError(f"{key} is still loading after {self.wait:g} s")
            if loading.error is not None:
                raise loading.error
            return loading.value  # type: ignore[return-value]
        try:
            if not self._slots.acquire(timeout=self.wait):
                raise LoadTimeoutError(f"other loads kept {key} waiting over {self.wait:g} s")
            try:
                with self._lock:
                    self.loads += 1
                value = load()
            finally:
                self._slots.release()
            self._keep(key, value)
            loading.value = value
            return value
        except BaseException as err:
            loading.error = err
            raise
        finally:
            with self._lock:
                del self._loading[key]
            loading.done.set()

    def _keep(self, key: str, value: V) -> None:
        nbytes = self.size(value)
        if nbytes > self.cap:
            return
        with self._lock:
            self._kept[key] = (value, nbytes)
            total = sum(n for _, n in self._kept.values())
            while total > self.cap:
                _, (_, dropped) = self._kept.popitem(last=False)
                total -= dropped
