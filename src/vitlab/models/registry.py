"""Named model configurations and ``build_registered``, which builds one by name.

Each entry maps a name to a config dataclass instance (``ViTConfig`` or ``CNNConfig``); the
config's class decides which model is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

from torch import nn

from ..checks import suggest
from ..errors import ConfigError

_REGISTRY: dict[str, tuple[Any, str]] = {}
_BUILDERS: dict[type, Callable[[Any], nn.Module]] = {}


def register_builder(config_cls: type, builder: Callable[[Any], nn.Module]) -> None:
    """Tell the registry how to build a model from a config of ``config_cls``."""
    _BUILDERS[config_cls] = builder


def register_model(name: str, config: Any, description: str = "") -> None:
    """Register ``config`` under ``name`` (the config's class must have a builder)."""
    _REGISTRY[name] = (config, description)


def list_models(pattern: str = "") -> list[str]:
    """Registered model names containing ``pattern``, sorted."""
    return sorted(n for n in _REGISTRY if pattern in n)


def describe_model(name: str) -> str:
    """The one-line description registered with ``name``."""
    get_config(name)
    return _REGISTRY[name][1]


def describe_models(pattern: str = "") -> list[str]:
    """One line per registered name containing ``pattern``, sorted: the name, then its description."""
    return [f"{name:28s} {describe_model(name)}" for name in list_models(pattern)]


def get_config(name: str, **overrides: Any) -> Any:
    """The config registered under ``name`` with ``overrides`` applied (a fresh copy)."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"model must be a registered model name (a string), got {name!r:.40}: see `vitlab models`")
    name = registered_name(name)
    config = _REGISTRY[name][0]
    known = {f.name for f in fields(config)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(
            f"{name} has no option {', '.join(map(repr, unknown))}; its options are: {', '.join(sorted(known))}"
        )
    return replace(config, **overrides)


def registered_name(name: str) -> str:
    """``name`` as registered: itself, or timm's spelling of it (``vit_tiny_patch16_224``, a ``.tag`` ignored, is
    ``vit-tiny-patch16-224``); an unknown name is refused naming the nearest registered one."""
    if name in _REGISTRY:
        return name
    timm = name.split(".")[0].replace("_", "-")
    if timm in _REGISTRY:
        return timm
    close = list_models(name.split("-")[0]) or list_models()
    raise ConfigError(
        f"unknown model {name!r}{suggest(timm, _REGISTRY)}; registered models include: {', '.join(close)} "
        f"(a hub id or a checkpoint loads with vitlab.load_checkpoint)"
    )


def build_registered(name: str, **overrides: Any) -> nn.Module:
    """Build the model registered as ``name``, with config fields replaced by ``overrides``.

    >>> model = build_registered("vit-seed", num_classes=5)
    """
    config = get_config(name, **overrides)
    model: Any = _BUILDERS[type(config)](config)
    model.registered_name = registered_name(name)  # a plain attribute, which the checkpoint reads back with getattr
    return model


def build_from_config(config_type: str, config: dict[str, Any]) -> nn.Module:
    """Build a model from its config class's name (e.g. ``"ViTConfig"``) and fields, as a checkpoint
    records them; the fields are validated by the config class."""
    by_name: dict[str, tuple[Any, Callable[[Any], nn.Module]]] = {
        cls.__name__: (cls, builder) for cls, builder in _BUILDERS.items()
    }
    if config_type not in by_name:
        raise ConfigError(f"unknown model config type {config_type!r}: vitlab builds {', '.join(sorted(by_name))}")
    cls, builder = by_name[config_type]
    return builder(cls.from_dict(config))
