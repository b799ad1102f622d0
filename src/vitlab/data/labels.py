"""Labels given as values (a manifest's, a shard's ``.cls``, a Hugging Face column): the class names, their
encoding, and the :class:`~vitlab.data.records.Records` of each split built from them.

Classes are the distinct labels, sorted numerically when every label is an integer and as text otherwise,
the union over the splits; a class that has no training image is refused. Within a split the records are
ordered by class, then in the source's own order, so the same images listed by two sources are split alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import DataError
from .records import SPLIT_NAMES, Records, Store

_INTEGER = re.compile(r"^[+-]?\d+$")


def _class_names(values: Iterable[Any]) -> list[str]:
    """The sorted distinct labels as names: numerically when all are integers (``7``, ``"10"``), as text
    otherwise."""
    distinct = {str(v).strip() for v in values}
    if distinct and all(_INTEGER.match(v) for v in distinct):
        return [str(v) for v in sorted({int(v) for v in distinct})]
    return sorted(distinct)


def _encode(values: Sequence[Any], classes: list[str]) -> np.ndarray:
    """Label values -> indices into ``classes`` (as made by :func:`_class_names`)."""
    numeric = all(_INTEGER.match(c) for c in classes)
    lookup = {c: i for i, c in enumerate(classes)}
    if numeric:
        return np.array([lookup[str(int(str(v).strip()))] for v in values], dtype=np.int64)
    return np.array([lookup[str(v).strip()] for v in values], dtype=np.int64)


def _by_class(labels: np.ndarray) -> np.ndarray:
    """The stable order that groups records by class, keeping the source's order within a class."""
    return np.argsort(labels, kind="stable")


def records_from_values(
    store: Store,
    refs_by_split: dict[str, list[int]],
    values_by_split: dict[str, list[Any]],
    origin: str,
    kind: str,
    classes: list[str] | None = None,
) -> dict[str, Records]:
    """Records per split, labels encoded against ``classes`` (default: :func:`_class_names` of all the
    values), each split ordered by class then as listed; a class with no training record is refused."""
    if not refs_by_split.get("train"):
        raise DataError(f"{kind}: {origin} has no training images")
    if classes is None:
        classes = _class_names(v for vals in values_by_split.values() for v in vals)
    out = {}
    for split, refs in refs_by_split.items():
        if not refs:
            continue
        labels = _encode(values_by_split[split], classes)
        order = _by_class(labels)
        out[split] = Records(store, np.asarray(refs)[order], labels[order], list(classes), origin)
    seen = set(out["train"].labels.tolist())
    held = {k for split, part in out.items() if split != "train" for k in part.labels.tolist()}
    unseen = [classes[k] for k in sorted(held - seen)]
    if unseen:
        raise DataError(
            f"{kind}: {origin}: class(es) {unseen[:5]} appear in val/test but have no training image; "
            "add training images or remove them"
        )
    return out


def split_of(value: Any, where: str, kind: str) -> str:
    split = SPLIT_NAMES.get(str(value).strip().lower()) if value not in (None, "") else "train"
    if split is None:
        raise DataError(f"{kind}: {where}: split {value!r} is unknown; use one of {sorted(SPLIT_NAMES)}")
    return split
