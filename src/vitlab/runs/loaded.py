"""A model rebuilt from a checkpoint: :class:`Loaded` (the model, its data config, kind and provenance), and the
splits of the data it was trained on, checked against what it was trained with (class names, split fingerprints)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data import DataSplits, load_dataset
from ..data.config import DataConfig
from ..data.options import DataOptions
from ..data.paths import recorded_data_dir
from ..data.registry import photo_sources
from ..errors import CheckpointError


@dataclass
class Loaded:
    """A model rebuilt from a checkpoint: ``model`` (eval mode), its :class:`DataConfig`, the
    checkpoint ``kind``, the registered ``name``, the decoded metadata, the file read, and what
    had to be guessed (``{field: why}``; empty for a vitlab file)."""

    model: nn.Module
    data: DataConfig
    kind: str
    name: str | None
    metadata: dict[str, Any]
    path: Path
    guessed: dict[str, str] = field(default_factory=dict)

    @property
    def display_name(self) -> str:
        """The model's name for people: the registered name, else the hub id or source it was read from, else
        its run folder's name (a checkpoint in ``best/`` or ``last/`` is named by the run above it), else the file."""
        if self.name and self.name != "init":
            return self.name
        source = self.metadata.get("source_id")
        if isinstance(source, str) and source:
            return source
        cached = next((p.name for p in self.path.parents if p.name.startswith("models--")), None)
        if cached is not None:  # a file in the Hugging Face cache: models--ORG--NAME/snapshots/REV/...
            return cached.removeprefix("models--").replace("--", "/")
        provenance = self.metadata.get("provenance")
        run = provenance.get("run") if isinstance(provenance, dict) else None
        folder = Path(run) if isinstance(run, str) and run else self.path.parent
        if folder.name in ("best", "last"):
            folder = folder.parent
        return folder.name or self.path.stem

    def check_finite(self, purpose: str) -> None:
        """Refuse, in one line, a model whose weights hold NaN or infinity: ``purpose`` (e.g. "scoring")
        would give NaN figures or fail inside an optimizer."""
        bad = [
            name
            for name, tensor in self.model.state_dict().items()
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
        ]
        if bad:
            raise CheckpointError(
                f"{self.path} holds non-finite weights (NaN or infinity in {len(bad)} tensor(s), e.g. {bad[0]}): "
                f"{purpose} needs finite ones; use an earlier checkpoint or train again"
            )

    def splits(
        self,
        dataset: str | None = None,
        data_dir: str | Path | None = None,
        rows: int | None = None,
        options: DataOptions | None = None,
        epochs: int = 1,
    ) -> DataSplits:
        """The splits of the dataset the model was trained on (or of ``dataset``), normalised as in training.

        Image files (folder, manifest, wds, hf) are read with the model's own preprocessing (its size,
        resize, crop and mean/std: a timm or Hugging Face model's as its library feeds it), changed by the
        fields ``options`` sets, and streamed or held in memory as ``options.loader`` says (``auto`` weighing
        ``epochs``, how many times the caller reads each image: scoring, probing and explaining read it once);
        tensor datasets keep their own size and, when they are not the training dataset, their own statistics.
        """
        data = self.data
        name = dataset or data.dataset
        if name is None:
            raise CheckpointError(f"{self.path} does not record its dataset: pass one (--dataset NAME)")
        same = name == data.dataset
        options = options or DataOptions()
        common: dict[str, Any] = {
            "seed": data.seed,
            "rows": rows if rows is not None else data.rows if same else None,
            "normalization": data.normalization if same else "standardize",
        }
        where = recorded_data_dir(str(self.path), data.data_dir if same else None, data_dir or None)
        if name in photo_sources():
            preprocess = data.resolve(options).preprocess()
            common |= {"loader": options.loader, "workers": options.workers, "max_bad": options.max_bad_images}
            common |= {"decode": options.decode}
            splits = load_dataset(name, where, preprocess=preprocess, epochs=epochs, **common)
            if preprocess.mean is not None and preprocess.std is not None:
                splits = replace(splits, mean=tuple(preprocess.mean), std=tuple(preprocess.std))
            return self._identified(splits, same, common["rows"])
        if options.loader == "stream" or options.sets_size:
            raise CheckpointError(
                f"{name} is a tensor dataset read at its own size; --image-size and the loader are for image files "
                f"({', '.join(photo_sources())})"
            )
        splits = load_dataset(name, where, **common)
        if same and data.mean:
            splits = replace(splits, mean=tuple(data.mean), std=tuple(data.std))
        return self._identified(splits, same, common["rows"])

    def _identified(self, splits: DataSplits, same: bool, rows: int | None) -> DataSplits:
        """``splits`` checked against what the model was trained on. Class names: the data's must be the
        model's (a model that names its outputs only by index aside); the same names in another order, or some
        of them, are mapped by name (said in a warning); a class the model does not know is refused. Splits:
        a split of the training dataset whose fingerprint differs from the recorded one (files added, removed or
        relabelled since training) is said in a warning."""
        model, have = list(self.data.classes), list(splits.train.classes)
        if model and have != model and not placeholder_names(model):
            unknown = [c for c in have if c not in model]
            if unknown:
                raise CheckpointError(
                    f"{self.path} was trained on the classes {_few(model)}, but {splits.name} has {_few(have)}: "
                    f"{_few(unknown)} {'is' if len(unknown) == 1 else 'are'} not among the model's; use data of "
                    f"the model's own classes"
                )
            how = (
                "the model's in another order"
                if len(have) == len(model)
                else f"{len(have)} of the model's {len(model)}"
            )
            warnings.warn(
                f"{splits.name}'s classes {_few(have)} are {how}: matched by name, each label read as the model's "
                f"output of the same name",
                stacklevel=3,
            )
            splits = splits.relabeled(model)
        recorded = self.data.splits if same else {}
        changed = [
            part
            for part, fingerprint in splits.fingerprints.items()
            if (part != "train" or rows == self.data.rows)
            and isinstance(recorded.get(part), dict)
            and recorded[part].get("fingerprint") not in (None, fingerprint)
        ]
        if changed:
            warnings.warn(
                f"{splits.name}: the {' and '.join(changed)} split{'s' * (len(changed) > 1)} differ from what "
                f"{self.path} was trained with (images added, removed or relabelled since): a held-out split may now "
                f"hold training images, so its figures are not the run's",
                stacklevel=3,
            )
        return splits


def placeholder_names(names: Sequence[str]) -> bool:
    """Whether class ``names`` only number the outputs (``0, 1, ...``; Hugging Face's ``LABEL_0, ...``): a
    model named so does not say which class is which, so its outputs are taken by index."""
    return any(
        list(names) == [pattern.format(i) for i in range(len(names))] for pattern in ("{}", "LABEL_{}", "class_{}")
    )


def _few(names: Sequence[str], limit: int = 6) -> str:
    """``(a, b, c)``, or the first ``limit`` names and how many more."""
    shown = ", ".join(map(str, names[:limit]))
    return f"({shown}{f', ... {len(names) - limit} more' if len(names) > limit else ''})"
