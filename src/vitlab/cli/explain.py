"""``vitlab explain CKPT [IMAGE...]``: explanation maps for one image of the checkpoint's dataset or for image
files, ``--audit`` of what the maps are worth, or
``--probe`` measurements (shuffled, shifted, occluded and resized images; attention by depth)."""

from __future__ import annotations

import argparse

from . import add_data_options, add_source_options, load_source, source_data_options
from .outputs import Output, add_output

METHODS = ("attention", "rollout", "gradient", "gradxinput", "occlusion")  # vitlab.explain.maps.METHODS
PROBES = ("permute", "shift", "occlude", "resolution", "attention")  # vitlab.explain.input_probes.PROBES
SPLITS = ("val", "test", "train")


def parse_probes(text: str) -> list[str]:
    """``permute,attention`` or ``all`` -> the probe names (checked by
    :meth:`vitlab.explain.request.ExplainRequest.check`)."""
    return list(PROBES) if text == "all" else list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))


def parse_query(text: str) -> str | int:
    """``cls``, ``mean`` or a patch index."""
    if text in ("cls", "mean"):
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"query must be cls, mean or a patch index, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..explain.request import ExplainRequest, explain_request
    from ..tasks.classify import image_files, retrainer

    picked = [flag for flag, value in (("--split", args.split), ("--index", args.index)) if value is not None]
    if args.images and picked:
        raise ConfigError(
            f"{' and '.join(picked)} pick an image of the dataset, but IMAGE files were given: drop "
            f"{' and '.join(picked)}, or the IMAGE files"
        )
    request = ExplainRequest(
        out=args.out,
        images=image_files(args.images),
        dataset=args.dataset,
        data_dir=args.data_dir,
        split=args.split or "val",
        method=None if args.method == "all" else args.method,
        index=args.index or 0,
        query=args.query,
        patch_size=args.patch_size,
        textbook=args.textbook,
        audit=args.audit,
        probes=args.probe,
        samples=args.samples,
        steps=args.steps,
        sanity_epochs=args.sanity_epochs,
        threshold=args.threshold,
        seed=args.seed,
        device=args.device,
        overwrite=args.overwrite,
        options=source_data_options(args),
    )
    explained = explain_request(request, lambda: load_source(args, "explain"), retrainer)
    print(explained.text, end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="explanation maps for an image, or an audit of what they are worth",
        description="Draw attention, rollout, gradient, gradient x input and occlusion maps for "
        "one image of a checkpoint's dataset (--split, --index) or for image files (IMAGE: each read through the "
        "checkpoint's own preprocessing, as `vitlab predict` reads it, and titled with its name and the "
        "prediction; several go each into its own folder in --out), or (--audit) measure them: deletion / insertion "
        "curves against random and occlusion orders, and sanity checks after randomising the "
        "weights and training on permuted labels. --probe measures the model itself on --samples images: "
        "permute (patches shuffled: agreement with and without the model's positions), shift, occlude, "
        "resolution (positions resampled) and attention (per layer and head: mean attention distance, "
        "entropy and exp(H), weight on the class token, max and max - min, rollout distance; a CNN's "
        "receptive field). Classifiers get every map and probe, pretrained MAE / DINO encoders the "
        "attention ones.",
    )
    p.add_argument(
        "checkpoint",
        help="run folder (uses best/), checkpoint folder or file, timm / Hugging Face weights or folder, .keras",
    )
    p.add_argument(
        "images",
        nargs="*",
        metavar="IMAGE",
        help="image files or folders of images to explain (default: --index of the dataset's --split)",
    )
    p.add_argument("--dataset", help="dataset name (default: the one it was trained on)")
    p.add_argument("--data-dir", help="folder holding the dataset's files (default: the training run's)")
    p.add_argument("--split", choices=SPLITS, help="split of the dataset to take the image from (default: val)")
    p.add_argument("--index", type=int, help="image to explain: its position in the split (default: 0)")
    p.add_argument(
        "--method",
        default="all",
        choices=(*METHODS, "all"),
        help="map to draw (default: all that apply; attention and rollout need a ViT)",
    )
    p.add_argument(
        "--query",
        type=parse_query,
        help="attention query: cls, mean (of the patch queries) or a "
        "patch index (default: cls for class-token models, else mean)",
    )
    p.add_argument(
        "--patch-size", type=int, help="grid of the maps (default: the model's patch size; needed for a CNN)"
    )
    p.add_argument(
        "--textbook",
        action="store_true",
        help="also write the position-similarity, token-attention and temperature figures",
    )
    p.add_argument("--audit", action="store_true", help="audit the maps on --samples images instead")
    p.add_argument(
        "--probe",
        type=parse_probes,
        metavar="NAMES",
        help=f"instead of maps, run probes on --samples images: {','.join(PROBES)} or all; writes probes.json, "
        "probes.md and attention_depth.png",
    )
    p.add_argument(
        "--samples", type=int, help="images the audit (default 100) or the probes (default 1000) average over"
    )
    p.add_argument("--steps", type=int, help="points on the deletion / insertion curves (default: every patch)")
    p.add_argument("--sanity-epochs", type=int, default=5, help="epochs of permuted-label training (0 skips it)")
    p.add_argument(
        "--threshold", type=float, default=0.5, help="rank correlation flagging a map as not explaining the model"
    )
    p.add_argument("--seed", type=int, default=0)
    add_output(
        p, "--out", rule=Output("explanation folder"), default="explain", help="output folder (default: ./explain)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace the explanation already in --out")
    p.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda, cuda:N, mps")
    add_data_options(p)
    add_source_options(p)
    p.set_defaults(func=run)
