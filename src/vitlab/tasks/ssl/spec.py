"""Self-supervised pretraining in the registry: ``vitlab pretrain mae|dino`` writes ``encoder`` checkpoints,
which ``vitlab evaluate --linear-probe / --knn`` scores and ``vitlab train --init`` fine-tunes."""

from __future__ import annotations

from ...errors import CheckpointError
from ...runs import Loaded
from ..registry import TaskSpec, register
from .pretrain import PretrainConfig, build_task, run_handoff, run_line, run_summary
from .probe import ProbeRequest, probe_lines


def evaluate(loaded: Loaded, request: ProbeRequest) -> str:
    """Probes of the frozen features (an encoder has no classifier head to score)."""
    if not (request.linear_probe or request.knn):
        raise CheckpointError(
            f"{loaded.path} is an encoder checkpoint, not a classifier: score its features with --linear-probe "
            f"or --knn, or fine-tune it first (vitlab train --init)"
        )
    return probe_lines(request)


PRETRAIN = register(
    TaskSpec(
        "pretrain",
        PretrainConfig,
        build=build_task,
        kinds=("encoder",),
        summary=run_summary,
        line=run_line,
        evaluate=evaluate,
        evaluate_request=ProbeRequest,
        handoff=run_handoff,
        command="pretrain",
        run_kinds=("mae", "dino"),
        options=(
            "model",
            "dataset",
            "data_dir",
            "rows",
            "images",
            "epochs",
            "batch_size",
            "lr",
            "seed",
            "local_crops",
        ),
        help="self-supervised pretraining (masked autoencoder or DINO)",
    )
)

__all__ = ["PRETRAIN"]
