"""``vitlab export``: a classifier checkpoint for another runtime (ONNX, timm, Hugging Face), and what to tell
its user: the input it expects, how to preprocess an image, and the line that loads it there.

A tuned run's checkpoint already holds plain weights (LoRA merged, see
:meth:`~vitlab.tasks.classify.task.ClassificationTask.deliverable`), so every target takes it as it is; a
prompt-tuned model's prompt tokens have no place in timm's or Hugging Face's ViT and go to ONNX only.
:func:`export_adapters` writes a tuned run's trained tensors alone (``--adapters-only``)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...interop import export_hf, export_onnx, export_timm
from ...models.registry import build_from_config
from ...models.tuning import apply_tuning, save_adapters
from ...runs import RunDir, load_checkpoint
from .spec import CLASSIFY
from .task import TrainConfig

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
    prompts = getattr(getattr(loaded.model, "config", None), "prompt_tokens", 0)
    if prompts and target != "onnx":
        raise ConfigError(
            f"{loaded.path} was prompt-tuned: its {prompts} learned prompt tokens cannot merge into the weights "
            f"and {target}'s ViT has no place for them; export it with --to onnx, which keeps them"
        )
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


def export_adapters(source: str | Path, out: str, *, overwrite: bool = False) -> str:
    """Write the tensors a tuned run trained (LoRA's A and B, biases, prompts, the head: the best epoch's) to
    ``out`` (safetensors), with its mode, the base model's identity and the SHA-256 of the frozen base weights
    (:func:`~vitlab.models.tuning.save_adapters`); returns what ``vitlab export --adapters-only`` prints."""
    run = RunDir(source)
    if not run.has_state():
        raise ConfigError(f"{source} is not a training run folder with its state: --adapters-only reads a tuned run")
    state = run.load_state()
    with warnings.catch_warnings():  # the run's settings were warned about when it trained
        warnings.simplefilter("ignore")
        config = TrainConfig.from_dict({**state["config"], "resume": False, "out_dir": None, "overwrite": False})
    if config.tune == "full":
        raise ConfigError(f"{source} fine-tuned every weight (--tune full): it has no adapters; export the model")
    if Path(out).exists() and not overwrite:
        raise ConfigError(f"{out} exists: pass --overwrite to replace it")
    loaded = load_checkpoint(source)
    architecture: Any = loaded.model.config
    model = build_from_config(type(architecture).__name__, architecture.to_dict())
    tuning = config.tuning
    apply_tuning(model, tuning)
    model.load_state_dict(state.get("best_state") or state["model"])
    base = config.init or config.model
    save_adapters(model, tuning, out, base)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return (
        f"read   {loaded.path}  ({tuning.label} run of {base})\n"
        f"wrote  {out}  ({trained:,} trained parameters; vitlab.models.tuning.load_adapters(model, path) "
        f"puts them on the base, refusing another)"
    )


__all__ = ["LOADERS", "TARGETS", "export_adapters", "export_checkpoint"]
