"""``vitlab export``: a classifier checkpoint for another runtime (ONNX, timm, Hugging Face), and what to tell
its user: the input it expects, how to preprocess an image, and the line that loads it there."""

from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...interop import export_hf, export_onnx, export_timm
from ...runs import load_checkpoint
from .spec import CLASSIFY

TARGETS = ("onnx", "timm", "hf")
LOADERS = {
    "onnx": 'onnxruntime.InferenceSession("{out}")  (input "images", output "logits")',
    "timm": 'timm.create_model("local-dir:{out}", pretrained=True)',
    "hf": 'transformers.pipeline("image-classification", model="{out}")  (its image processor feeds the model '
    "as vitlab does; a timm-style pipeline's needs timm installed)",
}


def export_checkpoint(source: str | Path, target: str, out: str, *, opset: int = 18, overwrite: bool = False) -> str:
    """Write the classifier at ``source`` to ``out`` for ``target`` (:data:`TARGETS`); returns what
    ``vitlab export`` prints (what was read and written, the input and its preprocessing, how to load it)."""
    if target not in TARGETS:
        raise ConfigError(f"export target must be one of {TARGETS}, got {target!r}")
    loaded = load_checkpoint(source)
    if loaded.kind not in CLASSIFY.kinds:
        raise ConfigError(
            f"{loaded.path} holds a {loaded.kind}: vitlab export writes classifiers ({', '.join(CLASSIFY.kinds)})"
        )
    data = loaded.data
    if target == "onnx":
        export_onnx(loaded.model, out, data, opset=opset, overwrite=overwrite)
    elif target == "hf":
        export_hf(loaded.model, out, data.classes, data, overwrite=overwrite)
    else:
        export_timm(loaded.model, out, data, overwrite=overwrite)
    height, width = data.image_size
    return "\n".join(
        [
            f"read   {loaded.path}  ({loaded.kind}{f', {loaded.name}' if loaded.name else ''})",
            f"wrote  {out}  ({target}: images (B, {data.in_chans}, {height}, {width}) -> "
            f"{len(data.classes) or 'the'} class logits)",
            f"input  each image: {data.preprocess().describe()}, pixels in [0, 1], then (x - mean) / std with mean "
            f"{tuple(data.mean)} std {tuple(data.std)}, exactly as written there; in vitlab: "
            f"data = vitlab.load_checkpoint(CKPT).data; data.eval_transform()(data.load_image(PATH))",
            f"load   {LOADERS[target].format(out=out)}",
        ]
    )


__all__ = ["LOADERS", "TARGETS", "export_checkpoint"]
