"""CLIP in the registry: ``clip`` runs and checkpoints; ``vitlab predict`` gives zero-shot classes and ranks
captions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ...checks import Int
from ...data import read_image
from ...models.clip import CLIPModel
from ...runs import Loaded
from ..classify.predict import image_files
from ..registry import TaskSpec, register
from ..requests import PredictRequest, option
from ..run import fit_summary
from .train import CLIPTrainConfig, build_task, run_line
from .zeroshot import classify, rank_captions


@dataclass
class CLIPPredict(PredictRequest):
    """A CLIP model's zero-shot ``top_k`` classes of each image and, with ``captions``, their ranking."""

    top_k: int = option(5, "classes to show per image", Int(1, 1000))
    captions: list[str] | None = option(
        None,
        "rank these captions for each image (best fit first), e.g. 'a red circle' 'a blue square'",
        metavar="TEXT",
        nargs="+",
    )


def predict(loaded: Loaded, request: CLIPPredict) -> str:
    """Each image's zero-shot class probabilities and, with ``captions``, which caption fits best."""
    model, size, classes = cast(CLIPModel, loaded.model), loaded.data.image_size[0], loaded.data.classes
    device = next(model.parameters()).device
    lines = []
    for path in image_files(request.images):
        image = read_image(path, channels=3, size=size).to(device)
        probs = classify(model, image[None], classes)[0].tolist()
        ranked = sorted(zip(classes, probs), key=lambda pair: -pair[1])[: request.top_k]
        lines.append(f"{path}  zero-shot: " + "  ".join(f"{c} {v:.3f}" for c, v in ranked))
        captions = rank_captions(model, image, request.captions) if request.captions else ()
        lines += [f"  {prob:.3f}  {caption}" for caption, prob in captions]
    return "\n".join(lines)


CLIP = register(
    TaskSpec(
        "clip",
        CLIPTrainConfig,
        build=build_task,
        kinds=("clip",),
        summary=fit_summary("the best epoch's weights (by val_i2t_r1)"),
        line=run_line,
        predict=predict,
        predict_request=CLIPPredict,
        options=("model", "dataset", "data_dir", "rows", "epochs", "batch_size", "lr", "seed", "compile"),
        help="a small CLIP on captioned shapes",
    )
)

__all__ = ["CLIP", "CLIPPredict"]
