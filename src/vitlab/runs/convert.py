"""``convert(src, dst)``: any model source to a vitlab checkpoint or a timm state dict, exact or refused.

A vitlab source keeps everything it records (kind, name, config, data config); a foreign one is
loaded with what :func:`~vitlab.runs.load_checkpoint` inferred, and every guess is recorded in the
written file's provenance, so the next reader never has to guess again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from ..errors import ConfigError, RunFolderError
from ..interop import timm_kwargs, to_timm_state_dict, write_state_dict
from ..interop.export import timm_config_beside, timm_config_json, write_timm_config
from ..interop.keras.graph import import_keras
from ..models.vit import VisionTransformer
from .checkpoint import save_checkpoint
from .load import load_checkpoint

TARGETS = ("vitlab", "timm")
# The config fields a conversion report shows.
SHOWN = (
    "img_size",
    "in_chans",
    "patch_size",
    "embed_dim",
    "depth",
    "num_heads",
    "mlp_ratio",
    "pos_embed",
    "class_token",
    "reg_tokens",
    "pool",
    "num_classes",
    "norm_eps",
)


@dataclass
class Conversion:
    """What :func:`convert` read and wrote."""

    source: Path
    origin: str  # "vitlab", "timm", "hf" or "keras"
    model: nn.Module
    target: str
    guessed: dict[str, str] = field(default_factory=dict)

    def report(self, dst: str | Path) -> str:
        """What ``vitlab convert`` prints: what it read and wrote, the model's main fields, its parameters,
        each guess (and how to correct it), and for a timm target the timm constructor that takes the file."""
        cfg: Any = self.model.config
        fields = cfg.to_dict()
        written = (
            "vitlab checkpoint (config, data config, checksum)"
            if self.target == "vitlab"
            else "timm state dict"
            if Path(dst).suffix == ".safetensors"
            else f"timm state dict, and its preprocessing in {Path(dst).with_name('config.json')}"
        )
        lines = [
            f"read   {self.source}  ({self.origin} weights)",
            f"wrote  {dst}  ({written})",
            f"model  {type(self.model).__name__}: " + ", ".join(f"{k} {v}" for k, v in fields.items() if k in SHOWN),
            f"params {sum(p.numel() for p in self.model.parameters()):,}",
        ]
        for name, why in self.guessed.items():
            hint = f"; set it with --set {name}=... if the source differs" if name in fields else ""
            lines.append(f"guessed {name} = {why}{hint}")
        if self.target == "timm":
            lines.append(f"timm   VisionTransformer(**{timm_kwargs(cfg)})")
        return "\n".join(lines)


def convert(
    src: str | Path,
    dst: str | Path,
    target: str = "vitlab",
    *,
    model: str | None = None,
    img_size: int | tuple[int, int] | None = None,
    overwrite: bool = False,
    **config: Any,
) -> Conversion:
    """Write the model at ``src`` to ``dst``: ``target="vitlab"`` a vitlab checkpoint, ``"timm"`` a timm
    ``VisionTransformer`` state dict (safetensors or torch file by suffix; a torch file with timm's ``config.json``
    beside it, carrying the model's own input size, mean, std, resize and crop, refused where one not this model's
    is there, unless ``overwrite``). ``model``, ``img_size`` and
    ``config`` are as in :func:`load_checkpoint`."""
    if target not in TARGETS:
        raise ConfigError(f"target must be one of {TARGETS}, got {target!r}")
    dst = Path(dst)
    if dst.exists() and not overwrite:
        raise RunFolderError(f"{dst} exists: choose another path or pass --overwrite")
    if Path(src).suffix == ".keras":
        import_keras()  # Keras on torch unless KERAS_BACKEND says otherwise, before anything imports it
    loaded = load_checkpoint(src, model=model, img_size=img_size, **config)
    origin = loaded.metadata.get("source", "vitlab")
    if target == "vitlab":
        provenance = {"source": str(loaded.path), "source_format": origin, "guessed": loaded.guessed}
        save_checkpoint(loaded.model, dst, loaded.kind, loaded.data, name=loaded.name, provenance=provenance)
    else:
        if not isinstance(loaded.model, VisionTransformer):
            raise ConfigError(f"--to timm converts ViTs; {loaded.path} holds a {type(loaded.model).__name__}")
        # timm ignores safetensors metadata; vitlab reads it back, so the round trip needs no guess. A torch file
        # has no metadata: timm's config.json beside it carries the model's own preprocessing (timm's hub layout)
        beside: tuple[Path, dict[str, Any]] | None = None
        if dst.suffix != ".safetensors":
            timm_config = timm_config_json(loaded.model, loaded.data)  # refused before anything is written
            beside = (timm_config_beside(dst, timm_config, overwrite), timm_config)
        recorded = (
            {
                "vitlab_model_config": json.dumps(loaded.model.config.to_dict()),
                "vitlab_data": json.dumps(loaded.data.to_dict()),
                "vitlab_kind": json.dumps(loaded.kind),
            }
            if dst.suffix == ".safetensors"
            else None
        )
        write_state_dict(to_timm_state_dict(loaded.model), dst, recorded)
        if beside is not None:
            write_timm_config(*beside)
    return Conversion(loaded.path, origin, loaded.model, target, loaded.guessed)
