"""Foreign JSON files checked before use: a Hugging Face ``config.json`` and ``preprocessor_config.json``, timm's
``config.json`` (its ``pretrained_cfg`` and ``model_args``).

Each record's :meth:`~JsonRecord.from_json` checks the type and range of every field vitlab reads (a field that is
absent or ``null`` takes the reader's default); a bad one is a :class:`~vitlab.errors.CheckpointError` of one line
naming the file, the field and what it must be. The fields then hold only what the readers expect, so no
``TypeError`` or ``ZeroDivisionError`` can come from them later.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..errors import CheckpointError

R = TypeVar("R", bound="JsonRecord")


@dataclass(frozen=True)
class Rule:
    """What one field must be: ``expected`` said to the user, ``ok`` its test, ``inner`` an object's field rules."""

    expected: str
    ok: Callable[[Any], bool]
    inner: Mapping[str, Rule] | None = None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _side(v: Any) -> bool:
    """A positive int, or a pair of them."""
    return _count(v) or (isinstance(v, (list, tuple)) and len(v) == 2 and all(_count(s) for s in v))


def _size(v: Any) -> bool:
    """A Hugging Face size: a positive int, or an object of positive ints (height/width, shortest_edge, ...)."""
    return _count(v) or (isinstance(v, dict) and bool(v) and all(_count(s) or s is None for s in v.values()))


def _numbers(v: Any) -> bool:
    return _number(v) or (isinstance(v, (list, tuple)) and len(v) > 0 and all(_number(x) for x in v))


def _positives(v: Any) -> bool:
    return _numbers(v) and all(x > 0 for x in (v if isinstance(v, (list, tuple)) else [v]))


COUNT = Rule("a whole number > 0", _count)
POSITIVE = Rule("a number > 0", lambda v: _number(v) and v > 0)
FRACTION = Rule("a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1)
CROP_PCT = Rule("a number in (0, 2]", lambda v: _number(v) and 0 < v <= 2)  # as Preprocess takes it
SIDE = Rule("a whole number > 0 or a pair of them", _side)
SIZE = Rule("a whole number > 0 or an object of them ({'height': H, 'width': W} or {'shortest_edge': N})", _size)
BOOL = Rule("true or false", lambda v: isinstance(v, bool))
TEXT = Rule("a string", lambda v: isinstance(v, str))
MEANS = Rule("a number or a list of numbers", _numbers)
STDS = Rule("a number > 0 or a list of them", _positives)
LABELS = Rule("a list of names or an object {index: name}", lambda v: isinstance(v, (list, dict)))
INPUT_SIZE = Rule(
    "[channels, height, width] of whole numbers > 0",
    lambda v: isinstance(v, list) and len(v) == 3 and all(_count(s) for s in v),
)
RESAMPLE = Rule("a whole number 0-5 (PIL's resampling filters)", lambda v: isinstance(v, int) and 0 <= v <= 5)


def _object(inner: Mapping[str, Rule]) -> Rule:
    return Rule("a JSON object", lambda v: isinstance(v, dict), inner)


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (bytes, bytearray)) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check(where: str, obj: Any, rules: Mapping[str, Rule], required: tuple[str, ...] = (), prefix: str = "") -> None:
    """Raise :class:`CheckpointError` naming ``where`` and the first field of ``obj`` that breaks its rule."""
    if not isinstance(obj, dict):
        field = f" field {prefix.rstrip('.')!r}" if prefix else ""
        raise CheckpointError(f"{where}:{field} {_shown(obj)} is not a JSON object: not the file vitlab reads")
    for name in required:
        if obj.get(name) is None:
            raise CheckpointError(f"{where}: field {prefix + name!r} is missing: it must be {rules[name].expected}")
    for name, rule in rules.items():
        value = obj.get(name)
        if value is None:
            continue
        if not rule.ok(value):
            raise CheckpointError(f"{where}: field {prefix + name!r} is {_shown(value)}: it must be {rule.expected}")
        if rule.inner is not None:
            check(where, value, rule.inner, prefix=f"{prefix}{name}.")


def read_json(path: Path) -> Any:
    """The JSON value of the file at ``path``; one that is not JSON (or nests past Python's limit) is refused."""
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        detail = "nested too deep" if isinstance(err, RecursionError) else " ".join(str(err).split()[:12])
        raise CheckpointError(f"{path} is not JSON vitlab can read ({detail})") from None


@dataclass(frozen=True)
class JsonRecord:
    """A foreign JSON file whose fields have been checked: ``fields`` the object, ``path`` where it came from."""

    path: str
    fields: dict[str, Any]
    RULES: ClassVar[Mapping[str, Rule]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_json(cls: type[R], path: str | Path, obj: Any) -> R:
        """The record of ``obj`` (the JSON value read from ``path``), every field checked."""
        check(str(path), obj, cls.RULES, cls.REQUIRED)
        return cls(str(path), obj)

    @classmethod
    def read(cls: type[R], path: Path) -> R:
        """The record of the JSON file at ``path``."""
        return cls.from_json(path, read_json(path))


class HFModelConfig(JsonRecord):
    """A Hugging Face ViT ``config.json``."""

    RULES = {
        "model_type": TEXT,
        "hidden_act": TEXT,
        "hidden_size": COUNT,
        "num_attention_heads": COUNT,
        "num_hidden_layers": COUNT,
        "intermediate_size": COUNT,
        "head_dim": COUNT,
        "image_size": SIDE,
        "patch_size": SIDE,
        "num_channels": COUNT,
        "qkv_bias": BOOL,
        "layer_norm_eps": POSITIVE,
        "id2label": Rule("an object {index: name}", lambda v: isinstance(v, dict)),
    }
    REQUIRED = tuple(
        "hidden_size num_attention_heads num_hidden_layers intermediate_size image_size patch_size num_channels".split()
    )


_PRETRAINED_CFG = {
    "architecture": TEXT,
    "input_size": INPUT_SIZE,
    "interpolation": TEXT,
    "crop_pct": CROP_PCT,
    "crop_mode": TEXT,
    "mean": MEANS,
    "std": STDS,
    "num_classes": Rule("a whole number >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
}
_MODEL_ARGS = {
    "num_heads": COUNT,
    "embed_dim": COUNT,
    "depth": COUNT,
    "patch_size": SIDE,
    "img_size": SIDE,
    "global_pool": TEXT,
    "act_layer": TEXT,
}


class HFProcessorConfig(JsonRecord):
    """A Hugging Face ``preprocessor_config.json`` (an image processor's settings; a ``TimmWrapperImageProcessor``
    holds timm's ``pretrained_cfg``)."""

    RULES = {
        "image_processor_type": TEXT,
        "feature_extractor_type": TEXT,
        **dict.fromkeys(("do_resize", "do_center_crop", "do_rescale", "do_normalize"), BOOL),
        "size": SIZE,
        "crop_size": SIZE,
        "resample": RESAMPLE,
        "crop_pct": FRACTION,
        "rescale_factor": POSITIVE,
        "image_mean": MEANS,
        "image_std": STDS,
        "pretrained_cfg": _object(_PRETRAINED_CFG),  # a TimmWrapperImageProcessor's: timm's own pipeline
    }


class TimmConfig(JsonRecord):
    """timm's ``config.json``: ``architecture``, ``pretrained_cfg``, ``model_args``, ``label_names``."""

    RULES = {
        "architecture": TEXT,
        "pretrained_cfg": _object(_PRETRAINED_CFG),
        "model_args": _object(_MODEL_ARGS),
        "label_names": LABELS,
        "global_pool": TEXT,
    }


class TimmPretrainedCfg(JsonRecord):
    """timm's ``pretrained_cfg`` alone (as a weights file's metadata may hold it)."""

    RULES = _PRETRAINED_CFG


__all__ = [
    "HFModelConfig",
    "HFProcessorConfig",
    "JsonRecord",
    "Rule",
    "TimmConfig",
    "TimmPretrainedCfg",
    "check",
    "read_json",
]
