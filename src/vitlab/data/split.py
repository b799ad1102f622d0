"""The one split rule, on labels alone: each class shuffled with a seed and cut (:func:`stratified_split`), and a
seeded order whose every prefix keeps the class proportions (:func:`stratified_order`). :func:`split_indices`
applies it (the held-out parts, then ``rows`` of the training pool) and :func:`split_rule` says it in one line;
in-memory datasets (:func:`~vitlab.data.dataset.make_splits`) and image-file records
(:func:`~vitlab.data.records.split_records`) both split through them, so a source read either way gives the
same members."""

from __future__ import annotations

import numpy as np

from ..errors import DataError


def _class_permutations(labels: np.ndarray, seed: int) -> list[np.ndarray]:
    """Each class's indices shuffled by one generator seeded with ``seed``, classes in sorted order."""
    rng = np.random.default_rng(seed)
    return [rng.permutation(np.flatnonzero(labels == cls)) for cls in np.unique(labels)]


def stratified_split(labels: np.ndarray, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
    """Split indices ``0..N-1`` into ``len(fractions)`` sorted parts keeping class proportions; seeded.

    Each class is shuffled and cut at the rounded cumulative fractions. A later part that gets no
    image of a class then takes one from the first part while the first keeps at least one, so every
    part holds every class that has at least ``len(fractions)`` images.
    """
    parts: list[list[int]] = [[] for _ in fractions]
    bounds = np.cumsum(fractions) / np.sum(fractions)
    for idx in _class_permutations(labels, seed):
        sizes = np.diff(np.r_[0, np.round(bounds * len(idx)).astype(int)])
        for i in range(1, len(sizes)):
            if sizes[i] == 0 and fractions[i] > 0 and sizes[0] > 1:
                sizes[0], sizes[i] = sizes[0] - 1, 1
        cuts = np.cumsum(sizes)
        for i, (lo, hi) in enumerate(zip(np.r_[0, cuts[:-1]], cuts, strict=True)):
            parts[i].extend(idx[lo:hi].tolist())
    return [np.sort(np.array(p, dtype=np.int64)) for p in parts]


def stratified_order(labels: np.ndarray, seed: int) -> np.ndarray:
    """A seeded order of all indices whose every prefix keeps the class proportions.

    Each class is shuffled (the same shuffle as :func:`stratified_split` with the same seed), its
    ``k``-th member gets the key ``(k + 0.5) / class_size``, and indices are sorted by key, so
    ``stratified_order(labels, seed)[:n]`` is a stratified subset of size ``n`` and smaller subsets
    are nested in larger ones.
    """
    keys = np.empty(len(labels))
    for idx in _class_permutations(labels, seed):
        keys[idx] = (np.arange(len(idx)) + 0.5) / len(idx)
    return np.argsort(keys, kind="stable")


def held_out_parts(
    labels: np.ndarray, held_out: tuple[float, ...], seed: int, name: str, num_classes: int
) -> list[np.ndarray]:
    """:func:`stratified_split` into the training pool and the ``held_out`` fractions; a part left empty is
    refused, saying how many images each class needs."""
    parts = stratified_split(labels, (1 - sum(held_out), *held_out), seed)
    names = ["training", "validation", "test"][: len(parts)]
    empty = [n for n, p in zip(names, parts, strict=True) if not len(p)]
    if empty:
        counts = np.bincount(labels, minlength=num_classes)
        raise DataError(
            f"{name}: {len(labels)} images ({counts.min()} in the smallest class) leave the "
            f"{' and '.join(empty)} split empty; give every class at least {len(parts)} images "
            f"(one each for {', '.join(names)})"
        )
    return parts


def split_indices(
    labels: np.ndarray, held_out: tuple[float, ...], seed: int, rows: int | None, name: str, num_classes: int
) -> list[np.ndarray]:
    """``[training pool, *held-out parts]`` of indices into ``labels``: stratified and seeded
    (:func:`held_out_parts`; no ``held_out`` fractions: the pool is every index), then the pool cut to its first
    ``rows`` in the seeded stratified order of *all* the labels (:func:`stratified_order`), so a smaller ``rows``
    is nested in a larger one and does not depend on the held-out sizes.

    Raises :class:`DataError` when a part would be empty or ``rows`` is not in ``1..len(pool)``.
    """
    parts = held_out_parts(labels, held_out, seed, name, num_classes) if held_out else [np.arange(len(labels))]
    if rows is not None:
        pool = parts[0]
        if not 1 <= rows <= len(pool):
            raise DataError(
                f"rows={rows} but the {name} training pool has {len(pool)} images; choose 1 <= rows <= {len(pool)}"
            )
        rank = np.empty(len(labels), dtype=np.int64)
        rank[stratified_order(labels, seed)] = np.arange(len(labels))
        parts[0] = np.sort(pool[np.argsort(rank[pool], kind="stable")[:rows]])
    return parts


def split_rule(
    held_out: tuple[float, ...],
    what: str,
    seed: int,
    rows: int | None,
    *,
    val: str | None = None,
    test: str | None = None,
) -> str:
    """One line saying how :func:`split_indices` split ``what`` (e.g. "the 1797 images"); ``val`` / ``test``
    describe an official split the source brought (then no held-out fraction makes it)."""
    if val is not None:
        rule = f"val: {val}"
    else:
        percent = " and ".join(f"{round(100 * f)}%" for f in held_out)
        parts = "val" if len(held_out) == 1 else "val and test"
        rule = f"{parts}: stratified random {percent} of {what} (seed {seed})"
    if test is not None:
        rule += f"; test: {test}"
    if rows is not None:
        rule += f"; train: the first {rows} of the rest in a stratified order (seed {seed})"
    return rule
