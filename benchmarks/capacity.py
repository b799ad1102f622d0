"""The capacity plan on paper: ImageNet-1k and -21k with ViT-B/16, ViT-L/16 and ViT-H/14 at 224 px on 1, 8 and 64 GPUs.

    python benchmarks/capacity.py                                  # 40% of the H100/H200 bf16 dense peak
    python benchmarks/capacity.py --peak-tflops 745.9 --mfu 0.389  # the H200's measured matmul peak and ViT-B's MFU

For each model: forward FLOPs per image from vitlab's cost model (``vitlab.analysis.cost.flops``, what ``vitlab
cost --pairs 224/16 --class-token --json --attention full --dim 768 --depth 12 --heads 12`` prints as ``flops``:
the matrix products, two FLOPs per multiply-add), training FLOPs per image as 3x forward (the backward pass is
twice the forward), and the images/s one GPU consumes at ``--mfu`` of ``--peak-tflops``. For each dataset
(images x epochs): the training FLOPs, the days on each GPU count (perfect scaling: days / N), the JPEG bytes/s
one GPU must read, the shards' size on disk, and the CPU cores one GPU needs to be fed, for the CPU loader and for
``data.decode=gpu`` (its workers only), from CPU milliseconds per image measured by ``bench_data.py`` (see
benchmarks/RESULTS.md).

Every input is an option with the figure it assumes; prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

from vitlab.analysis.cost import Workload, flops

IMAGE = 224
MODELS = {  # ViT-B/L/H as the ViT paper sizes them (mlp_ratio 4, a class token)
    "ViT-B/16": {"patch": 16, "dim": 768, "depth": 12, "heads": 12},
    "ViT-L/16": {"patch": 16, "dim": 1024, "depth": 24, "heads": 16},
    "ViT-H/14": {"patch": 14, "dim": 1280, "depth": 32, "heads": 16},
}
DATASETS = {  # training images, epochs of a typical recipe
    "ImageNet-1k": {"images": 1_281_167, "epochs": 300},
    "ImageNet-21k": {"images": 14_197_122, "epochs": 90},
}
SECONDS_PER_DAY = 86_400
TAR_BYTES_PER_IMAGE = 1792
"""A WebDataset sample's tar overhead: the image member's 512-byte header and ~256 bytes of padding, and a
``.cls`` member (header + one padded block)."""


def forward_flops(model: str) -> int:
    """Forward FLOPs of one 224-px image through ``model`` (vitlab's cost model, full attention)."""
    return flops(Workload(image=IMAGE, class_token=True, **MODELS[model]))["total"]


def plan(
    peak_tflops: float,
    mfu: float,
    gpus: list[int],
    jpeg_kib: float,
    reencoded_kib: float,
    cpu_ms: float,
    decode_gpu_cpu_ms: float,
) -> dict:
    """The plan's numbers (see the module docstring) for every model and dataset."""
    sustained = peak_tflops * 1e12 * mfu  # FLOP/s one GPU does
    rows = []
    for model in MODELS:
        forward = forward_flops(model)
        per_image = 3 * forward
        rate = sustained / per_image  # images/s one GPU consumes
        for dataset, d in DATASETS.items():
            total = per_image * d["images"] * d["epochs"]
            days_one = total / sustained / SECONDS_PER_DAY
            rows.append(
                {
                    "model": model,
                    "dataset": dataset,
                    "epochs": d["epochs"],
                    "forward_gflops_per_image": round(forward / 1e9, 2),
                    "train_flops": float(f"{total:.3e}"),
                    "images_per_s_per_gpu": round(rate),
                    "days": {str(n): round(days_one / n, 2) for n in gpus},
                    "epoch_hours": {str(n): round(d["images"] / (rate * n) / 3600, 3) for n in gpus},
                    "jpeg_mib_per_s_per_gpu": round(rate * jpeg_kib / 1024, 1),
                    "cpu_cores_per_gpu": round(rate * cpu_ms / 1000, 2),
                    "cpu_cores_per_gpu_decode_gpu": round(rate * decode_gpu_cpu_ms / 1000, 2),
                }
            )
    storage = {
        dataset: {
            "original_gib": round(d["images"] * (jpeg_kib * 1024 + TAR_BYTES_PER_IMAGE) / 2**30, 1),
            "reencoded_gib": round(d["images"] * (reencoded_kib * 1024 + TAR_BYTES_PER_IMAGE) / 2**30, 1),
        }
        for dataset, d in DATASETS.items()
    }
    return {
        "assumed": {
            "peak_tflops_bf16_dense": peak_tflops,
            "mfu": mfu,
            "sustained_tflops": round(sustained / 1e12, 1),
            "jpeg_kib": jpeg_kib,
            "reencoded_kib": reencoded_kib,
            "cpu_ms_per_image": cpu_ms,
            "decode_gpu_cpu_ms_per_image": decode_gpu_cpu_ms,
            "train_flops": "3 x forward x images x epochs",
        },
        "rows": rows,
        "storage": storage,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=989.0,
        help="bf16 dense peak per GPU (default 989: the H100/H200 SXM datasheet, without sparsity)",
    )
    p.add_argument("--mfu", type=float, default=0.40, help="fraction of the peak a training step sustains")
    p.add_argument("--gpus", type=int, nargs="+", default=[1, 8, 64])
    p.add_argument(
        "--jpeg-kib", type=float, default=110.0, help="mean JPEG of the originals (ILSVRC-2012 train: ~110 KiB)"
    )
    p.add_argument(
        "--reencoded-kib",
        type=float,
        default=22.3,
        help="mean JPEG re-encoded at a longest side of 320 px, quality 90 (bench_data's photos: 22.3 KiB)",
    )
    p.add_argument(
        "--cpu-ms", type=float, default=2.44, help="CPU ms per training image, the CPU loader (bench_data: 2.44)"
    )
    p.add_argument(
        "--decode-gpu-cpu-ms",
        type=float,
        default=0.31,
        help="CPU ms per training image in the workers with data.decode=gpu (bench_data stages: 0.31; the main "
        "process's share on a GPU is not measured yet)",
    )
    print(json.dumps(plan(**vars(p.parse_args()))))


if __name__ == "__main__":
    main()
