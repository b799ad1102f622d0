"""A split streamed from its records: decoded on demand in DataLoader workers, uint8 batches out.

:class:`StreamDataset` wraps a :class:`~vitlab.data.records.Records` and a
:class:`~vitlab.data.preprocess.Preprocess`. :meth:`StreamDataset.batches` runs a
``torch.utils.data.DataLoader`` over batches of ``(index, sample seed)`` pairs: a training split
(``train=True``) augments item ``i`` with RandomResizedCrop and flip drawn from a generator seeded by
``SeedSequence([seed, i])``, so the batches depend on ``(seed, index)`` only, never on the number of
workers or on which worker decoded what; an evaluation split decodes with ``eval_image``. Nothing is
cached: peak memory is the prefetched batches, whatever the number of images.

Workers are forked on Linux: they start afresh at every :meth:`~StreamDataset.batches` call
(``persistent_workers=False``), and two forked workers gave their first batch in about 1 s where
``spawn`` and ``forkserver`` took 15-25 s (importing torch again) on a 2-core machine.

With ``decode="gpu"`` (``--set data.decode=gpu``) the workers send JPEG bytes and each training image's crop
instead, and the main process decodes and crops the batch on :attr:`StreamDataset.device`
(:mod:`~vitlab.data.device_decode`).

An unreadable image is dropped from its batch and its name kept in :attr:`StreamDataset.bad` (collected
in the main process); more distinct unreadable images than ``max_bad`` raise one
:class:`~vitlab.errors.DataError` naming them.
"""

from __future__ import annotations

import math
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from ..errors import ConfigError, DataError, VitlabError, WorkerError
from ..interrupts import interrupts_deferred, raise_if_interrupted
from .device_decode import Encoded, decode_batch
from .preprocess import TENSOR_INTERPOLATIONS
from .records import Records

if TYPE_CHECKING:
    from .preprocess import Preprocess

STATISTICS_SAMPLE = 512
"""Channel statistics of a streamed split are estimated from at most this many training images."""
STATISTICS_BYTES = 256 << 20
"""Channel statistics are summed in float64 over batches of 64 images, fewer where that passes these bytes."""
PREFETCH = 4
"""Batches each worker decodes ahead."""
WORKER_DEATH_WAIT = 2.0
"""Seconds a loader error waits for a worker's death to become visible (its exit code) before it is taken for
anything else."""
MAX_BAD_HINT = "--set data.max_bad_images=N skips up to N unreadable images"
DECODES = ("cpu", "gpu")
"""Where a streamed split's JPEGs are decoded: ``cpu`` in the loader workers (PIL), ``gpu`` on the run's device
in batches (:mod:`~vitlab.data.device_decode`; CPU kernels when the device is the CPU)."""


def sample_seeds(seed: int, index: Sequence[int] | np.ndarray) -> list[int]:
    """The generator seed of each item: ``SeedSequence([seed, i])``'s first 64-bit word, ``(len(index),)``."""
    base = int(seed) % (1 << 64)
    return [int(np.random.SeedSequence([base, int(i)]).generate_state(1, np.uint64)[0]) for i in index]


class _Batches:
    """A batch sampler: ``index`` cut into batches of ``[(i, sample seed or None), ...]``, made lazily."""

    def __init__(self, index: np.ndarray, batch_size: int, seed: int | None, drop_last: bool) -> None:
        self.index = index
        self.batch_size = batch_size
        self.seed = seed
        self.drop_last = drop_last

    def __len__(self) -> int:
        n, b = len(self.index), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def __iter__(self) -> Iterator[list[tuple[int, int | None]]]:
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            part = self.index[start : start + self.batch_size]
            seeds: list[int | None] = [None] * len(part)
            if self.seed is not None:
                seeds = list(sample_seeds(self.seed, part))
            yield list(zip(part.tolist(), seeds, strict=True))


def bad_report(bad: dict[str, str], max_bad: int | None = None) -> str:
    """One line on the unreadable images ``bad`` (``{name: why}``): the first one's reason, the next few names
    and, with ``max_bad``, the option that tolerates more; the same for a streamed and an in-memory split."""
    if not bad:
        return "no unreadable images"
    names = list(bad)
    also = f"; also unreadable: {', '.join(names[1:4])}" if len(names) > 1 else ""
    also += f" and {len(names) - 4} more" if len(names) > 4 else ""
    if max_bad is None:
        return f"skipped {len(names)} unreadable image(s): {bad[names[0]]}{also}"
    return f"{len(names)} unreadable image(s), more than the {max_bad} tolerated: {bad[names[0]]}{also}; {MAX_BAD_HINT}"


def _worker_start(worker: int) -> None:
    """A worker leaves a Ctrl-C to the main process, which stops it and says so: no worker prints a
    KeyboardInterrupt, nor the hang-up of a main process interrupted while it took a batch's shared memory."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.excepthook = _quiet_hang_ups(sys.excepthook)


def _quiet_hang_ups(hook: Callable[..., Any]) -> Callable[..., Any]:
    """``hook`` (a worker's ``sys.excepthook``) without the traceback of a consumer that hung up. A worker hands
    each batch's shared memory over a connection its ``resource_sharer`` thread serves; a main process that
    Ctrl-C stops in the middle of one resets it, and that thread reports a ``ConnectionResetError`` through
    ``sys.excepthook`` as the worker is stopped. The main process reports what stopped it."""

    def excepthook(kind: type[BaseException], value: BaseException, traceback: TracebackType | None) -> None:
        if not issubclass(kind, (ConnectionError, EOFError)):
            hook(kind, value, traceback)

    return excepthook


def worker_death(
    processes: Sequence[Any], workers: int, batch_size: int, wait: float | None = None
) -> WorkerError | None:
    """One line for the loader worker ``processes`` that exited (killed by a signal, as the out-of-memory killer
    does, or with an exit code), waiting up to ``wait`` seconds for a death to become visible; None when every
    worker is still running or exited cleanly (an error of the loader's pipes that is not a death). ``wait``
    None: :data:`WORKER_DEATH_WAIT`."""
    deadline = time.monotonic() + (WORKER_DEATH_WAIT if wait is None else wait)
    while True:
        dead = [(p.pid, p.exitcode) for p in processes if p.exitcode not in (None, 0)]
        if dead or time.monotonic() >= deadline or not processes:
            break
        time.sleep(0.05)
    if not dead:
        return None
    how = []
    for pid, code in dead:
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how.append(f"worker (pid {pid}) was killed by {name}")
        else:
            how.append(f"worker (pid {pid}) exited with code {code}")
    return WorkerError(
        f"data-loading {' and '.join(how)}, most likely out of memory; use fewer --workers (now {workers}) "
        f"or a smaller --batch-size (now {batch_size}) or --image-size, or give the machine more memory; a "
        f"training run continues with --resume"
    )


@contextmanager
def _worker_faults(processes: list[Any], workers: int, batch_size: int) -> Iterator[None]:
    """A loader's pipe or worker error (``RuntimeError``, ``EOFError``, ``ConnectionError``) raised in the block as
    :func:`worker_death`'s one line when one of ``processes`` (filled in by the block) really exited; any other
    error unchanged."""
    try:
        yield
    except VitlabError:
        raise
    except (RuntimeError, EOFError, ConnectionError) as err:
        died = worker_death(processes, workers, batch_size)
        if died is None:
            raise
        raise died from err


def _no_asynchronous_worker_check(batches: Any) -> None:
    """Take loader iterator ``batches``'s workers out of torch's SIGCHLD check, which raises its ``RuntimeError``
    wherever the main thread is when a worker dies (in a training step, a checkpoint's write, a finaliser that
    drops it), outside :func:`_worker_faults`; the iterator's own check (each time it waits for a batch, every few
    seconds) and :func:`worker_death` still see the death, inside it."""
    if getattr(batches, "_worker_pids_set", False):
        from torch.utils.data._utils import signal_handling

        signal_handling._remove_worker_pids(id(batches))
        batches._worker_pids_set = False


def _collate(samples: list[tuple[Any, ...]]) -> tuple[torch.Tensor, torch.Tensor, list[tuple[str, str]]]:
    """``(images uint8 (B', C, H, W), labels int64 (B',), [(name, reason) of the unreadable ones])``."""
    good = [s for s in samples if s[0] is not None]
    bad = [(s[2], s[3]) for s in samples if s[0] is None]
    # default_collate stacks straight into shared memory in a worker: the batch crosses to the main process once
    images = default_collate([s[0] for s in good]) if good else torch.empty(0, dtype=torch.uint8)
    labels = torch.tensor([s[1] for s in good], dtype=torch.int64)
    return images, labels, bad


def _collate_encoded(
    samples: list[tuple[Any, ...]],
) -> tuple[list[torch.Tensor | Encoded], torch.Tensor, list[tuple[str, str]], list[str]]:
    """``decode="gpu"``: ``([Encoded JPEG or uint8 pixels (C, H, W)], labels int64 (B',), [(name, reason) of the
    unreadable ones], [names of the images decoded on the CPU])``."""
    good = [s for s in samples if s[0] is not None]
    bad = [(s[2], s[3]) for s in samples if s[0] is None]
    on_cpu = [s[2] for s in good if not isinstance(s[0], Encoded)]
    return [s[0] for s in good], torch.tensor([s[1] for s in good], dtype=torch.int64), bad, on_cpu


class RecordsSplit:
    """A split read from ``records`` through ``preprocess``, streamed or decoded into memory: ``classes`` come
    from the records, ``bad`` maps each unreadable image met to why (one record shared by a dataset's splits),
    ``workers`` and ``max_bad`` are what decoding uses when not told."""

    def __init__(
        self, records: Records, preprocess: Preprocess, workers: int, max_bad: int, bad: dict[str, str] | None
    ) -> None:
        self.records = records
        self.preprocess = preprocess
        self.workers = workers
        self.max_bad = max_bad
        self.bad: dict[str, str] = {} if bad is None else bad
        self.classes = records.classes

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of every image decoded, from the preprocessing."""
        height, width = self.preprocess.image_size
        return self.preprocess.channels, height, width


class StreamDataset(RecordsSplit, Dataset):
    """One split streamed from ``records`` through ``preprocess``; ``train``: RandomResizedCrop (``scale``,
    ``ratio``) and, with ``hflip``, a horizontal flip, else ``preprocess.eval_image``. ``decode`` is one of
    :data:`DECODES`; with ``"gpu"`` the batches are decoded on ``device`` (:meth:`on`).

    ``labels`` ``(N,)`` int64, ``classes`` the class names, ``image_shape`` ``(C, H, W)``; ``bad`` maps the
    name of each unreadable image met so far to why. ``workers`` and ``max_bad`` are what :meth:`batches`
    uses when not told (``load_dataset`` sets them from its own arguments).
    """

    def __init__(
        self,
        records: Records,
        preprocess: Preprocess,
        train: bool = False,
        *,
        hflip: bool = True,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        workers: int = 2,
        max_bad: int = 0,
        decode: str = "cpu",
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__(records, preprocess, workers, max_bad, None)
        if decode not in DECODES:
            raise ConfigError(f"data.decode={decode!r} is unknown: one of {', '.join(DECODES)}")
        if decode == "gpu" and preprocess.interpolation not in TENSOR_INTERPOLATIONS:
            raise ConfigError(
                f"data.decode=gpu resizes with torchvision's kernels, which have no {preprocess.interpolation!r} "
                f"filter: set data.interpolation to one of {', '.join(TENSOR_INTERPOLATIONS)}, or data.decode=cpu"
            )
        self.decode = decode
        self.device = torch.device(device)
        self.said: set[str] = set()  # the notes already given (shared with copies, like bad)
        self.train = train
        self.hflip = hflip
        self.scale = scale
        self.ratio = ratio
        self.labels = torch.from_numpy(records.labels)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, item: tuple[int, int | None]) -> tuple[torch.Tensor | Encoded | None, int, str, str]:
        """``(image uint8 (C, H, W), label, name, "")``, or ``(None, label, name, reason)`` when unreadable; with
        ``decode="gpu"`` a JPEG is an :class:`Encoded` and ``name`` is always given."""
        i, sample_seed = item
        label = int(self.records.labels[i])
        try:
            jpeg = self.records.jpeg(i) if self.decode == "gpu" else None
            crop = (self.scale, self.ratio, self.hflip)
            pixels: torch.Tensor | Encoded
            if jpeg is not None:  # the bytes, and the crop drawn as train_image draws it
                data, height, width = jpeg
                box = self.preprocess.train_box(height, width, self._generator(item), *crop) if self.train else None
                pixels = Encoded(torch.frombuffer(bytearray(data), dtype=torch.uint8), box, self.records.name(i))
            elif self.train:
                pixels = self.preprocess.train_image(self.records.open(i), self._generator(item), *crop)
            else:
                pixels = self.preprocess.eval_image(self.records.open(i))
        except DataError as err:
            return None, label, self.records.name(i), str(err)
        except VitlabError:
            raise
        except (OSError, ValueError) as err:  # a mode or size PIL cannot convert or resize
            name = self.records.name(i)
            return None, label, name, f"{name}: cannot be preprocessed ({type(err).__name__}: {err})"
        return pixels, label, self.records.name(i) if self.decode == "gpu" else "", ""

    @staticmethod
    def _generator(item: tuple[int, int | None]) -> torch.Generator:
        """Item ``(i, sample seed)``'s augmentation draws: seeded by its sample seed, or by ``i`` without one."""
        i, sample_seed = item
        return torch.Generator().manual_seed(sample_seed if sample_seed is not None else i)

    def subset(self, index: np.ndarray | Sequence[int] | torch.Tensor) -> StreamDataset:
        """The same stream over ``records.subset(index)``."""
        return self._replace(records=self.records.subset(np.asarray(index)))

    def relabeled(self, index_map: np.ndarray, classes: Sequence[str]) -> StreamDataset:
        """The same stream, label ``i`` becoming ``index_map[i]`` of ``classes``."""
        records = replace(self.records, labels=np.asarray(index_map)[self.records.labels], classes=list(classes))
        return self._replace(records=records)

    def augmented(self, train: bool = True, **fields: Any) -> StreamDataset:
        """A copy that augments (``train=True``) or not, with ``hflip``/``scale``/``ratio`` overridden."""
        return self._replace(train=train, **fields)

    def on(self, device: torch.device | str) -> StreamDataset:
        """The same stream, decoding on ``device`` when ``decode="gpu"`` (its batches stay uint8 either way)."""
        return self._replace(device=device)

    def _replace(self, **changes: Any) -> StreamDataset:
        fields: dict[str, Any] = {"records": self.records, "preprocess": self.preprocess, "train": self.train}
        fields |= {"hflip": self.hflip, "scale": self.scale, "ratio": self.ratio, "decode": self.decode}
        fields |= {"workers": self.workers, "max_bad": self.max_bad, "device": self.device} | changes
        copy = StreamDataset(**fields)
        copy.bad = self.bad  # one record of the unreadable images, shared with subsets and copies
        copy.said = self.said
        return copy

    def batches(
        self,
        index: torch.Tensor | np.ndarray | Sequence[int],
        batch_size: int,
        *,
        seed: int | None = None,
        workers: int | None = None,
        max_bad: int | None = None,
        pin_memory: bool | None = None,
        drop_last: bool = False,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(images uint8 (B, C, H, W), labels int64 (B,))`` of the items ``index``, in that order.

        ``seed`` seeds the training augmentation (item ``i`` by ``(seed, i)``; None: drawn from torch's
        global generator). ``workers`` DataLoader processes (0: decode here; None: :attr:`workers`).
        Unreadable images are dropped from their batch (a batch left empty is skipped) and recorded in
        :attr:`bad`; once more than ``max_bad`` (None: :attr:`max_bad`) distinct ones are met,
        :class:`DataError` names them. ``pin_memory`` (None: when CUDA is available) pins the batches for a
        fast copy to the GPU. With ``decode="gpu"`` the images come decoded on :attr:`device`.
        """
        workers = self.workers if workers is None else workers
        max_bad = self.max_bad if max_bad is None else max_bad
        if batch_size < 1 or workers < 0 or max_bad < 0:
            raise ConfigError(
                f"need batch_size >= 1, workers >= 0, max_bad >= 0; got {batch_size}, {workers}, {max_bad}"
            )
        order = np.asarray(index.numpy() if isinstance(index, torch.Tensor) else index, dtype=np.int64).reshape(-1)
        if not len(order):
            return
        if self.train and seed is None:
            seed = int(torch.randint(0, 1 << 62, ()).item())
        sampler = _Batches(order, batch_size, seed if self.train else None, drop_last)
        loader = DataLoader(
            self,
            batch_sampler=sampler,
            num_workers=workers,
            collate_fn=_collate_encoded if self.decode == "gpu" else _collate,
            pin_memory=torch.cuda.is_available() if pin_memory is None else pin_memory,
            prefetch_factor=PREFETCH if workers else None,
            persistent_workers=False,
            multiprocessing_context=("fork" if sys.platform == "linux" else None) if workers else None,
            generator=torch.Generator().manual_seed(0),  # the workers' base seed, unused: keep the global RNG
            worker_init_fn=_worker_start if workers else None,
        )
        processes: list[Any] = []  # the workers, once forked
        batches: Any = None
        with _worker_faults(processes, workers, batch_size):  # start-up and shutdown included
            try:
                with interrupts_deferred():  # forks the workers
                    batches = iter(loader)
                    processes.extend(getattr(batches, "_workers", ()))
                    _no_asynchronous_worker_check(batches)
                while True:
                    try:  # not a for loop: its hidden reference would join the workers outside the deferral below
                        images, labels, bad = self._decoded(next(batches))
                    except StopIteration:
                        break
                    raise_if_interrupted()
                    if bad:
                        self.bad.update(bad)
                        if len(self.bad) > max_bad:
                            raise DataError(self.bad_report(max_bad))
                    if len(labels):
                        yield images, labels
            finally:
                with interrupts_deferred():  # join the workers and free the loader's queues and pipes now: their
                    getattr(batches, "_shutdown_workers", lambda: None)()  # finalisers would run where no deferral
                    del batches  # covers them, and a Ctrl-C landing in one would be dropped

    def _decoded(self, batch: tuple[Any, ...]) -> tuple[torch.Tensor, torch.Tensor, list[tuple[str, str]]]:
        """A collated batch as ``(images uint8 (B', C, H, W), labels (B',), unreadable)``: with ``decode="gpu"``
        its JPEGs decoded on :attr:`device` (the first image decoded on the CPU instead said once)."""
        if self.decode != "gpu":
            return batch
        items, labels, bad, on_cpu = batch
        if on_cpu and "cpu-decode" not in self.said:
            self.said.add("cpu-decode")
            warnings.warn(
                f"data.decode=gpu: {on_cpu[0]} is not an RGB or greyscale JPEG: it and any other such image are "
                f"decoded on the CPU, in the loader's workers",
                stacklevel=2,
            )
        images, keep, failed = decode_batch(items, self.preprocess, self.device)
        return images, labels[keep], bad + failed

    def bad_report(self, max_bad: int | None = None) -> str:
        """:func:`bad_report` of the unreadable images met so far."""
        return bad_report(self.bad, max_bad)

    def statistics(
        self, normalization: str = "standardize", *, limit: int = STATISTICS_SAMPLE, workers: int = 0, max_bad: int = 0
    ) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Per-channel ``(mean, std)`` in [0, 1] units of at most ``limit`` images drawn with seed 0,
        decoded for evaluation (the same rule as :func:`~vitlab.data.dataset.channel_statistics`,
        unbiased std, at least 1e-6), in batches of at most :data:`STATISTICS_BYTES` as float64; ``"unit"``:
        zeros and ones."""
        channels = self.image_shape[0]
        if normalization == "unit":
            return (0.0,) * channels, (1.0,) * channels
        n = len(self)
        index = np.sort(np.random.default_rng(0).choice(n, size=min(n, limit), replace=False))
        total = torch.zeros(channels, dtype=torch.float64)
        squares = torch.zeros(channels, dtype=torch.float64)
        count = 0
        plain = self.augmented(False, decode="cpu")
        rows = max(1, min(64, STATISTICS_BYTES // (8 * math.prod(self.image_shape))))  # float64 bytes of a batch
        for images, _ in plain.batches(index, rows, workers=workers, max_bad=max_bad, pin_memory=False):
            pixels = images.to(torch.float64).div_(255).transpose(0, 1).reshape(channels, -1)
            total += pixels.sum(1)
            squares += pixels.square().sum(1)
            count += pixels.shape[1]
        if count == 0:
            raise DataError(f"no readable image among the {len(index)} sampled for channel statistics")
        mean = total / count
        var = (squares - count * mean.square()).clamp_min(0) / max(count - 1, 1)
        return tuple(mean.tolist()), tuple(var.sqrt().clamp_min(1e-6).tolist())
