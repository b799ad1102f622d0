"""What every model config dataclass shares: a JSON-ready dict and back."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, fields
from typing import Any, TypeVar

C = TypeVar("C", bound="ModelConfig")


class ModelConfig:
    """Mixin for config dataclasses: tuples become lists in :meth:`to_dict` (JSON has no tuples) and
    lists become tuples again in :meth:`from_dict`, which ignores keys the config does not have."""

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls: type[C], d: dict[str, Any]) -> C:
        known = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in known})


def reject_unknown(given: Iterable[str], known: Iterable[str], what: str) -> None:
    """Raise ``ValueError`` naming the keys in ``given`` that ``what`` (e.g. ``"TrainConfig"``) does not
    know, and listing those it does; nothing when all are known."""
    known = sorted(known)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"unknown {what} option(s) {unknown}; known: {known}")
