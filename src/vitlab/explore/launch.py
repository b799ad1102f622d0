"""What ``vitlab explore`` serves: the :class:`~vitlab.explore.app.ExploreConfig` of its options (the runs folder
by default, the classifier runs found there), the address to open, and the lines it prints on starting."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError
from ..runs.layout import BEST, LAST, MODELS, WEIGHTS
from ..runs.rundir import RunDir
from .app import DEFAULT_RUNS, ExploreConfig
from .guards import bracketed
from .images import MAX_PIXELS, MAX_SIDE, UPLOAD_LIMIT


def found_checkpoints(roots: Sequence[str | Path]) -> list[Path]:
    """The classifiers among ``roots`` and their sub-folders, in name order: the runs of ``vitlab train`` that
    hold a checkpoint (``best/`` or ``last/``), and every model a study of ``vitlab compare`` kept (its
    ``models/*.safetensors``)."""
    folders = [f for root in map(Path, roots) for f in (root, *sorted(p for p in root.iterdir() if p.is_dir()))]
    found: list[Path] = []
    for folder in folders:
        kind = RunDir(folder).existing_kind()
        if kind in ("classify", "an older vitlab run") and any((folder / k / WEIGHTS).is_file() for k in (BEST, LAST)):
            found.append(folder)
        elif kind == "compare" and (folder / MODELS).is_dir():
            found.extend(sorted(p for p in (folder / MODELS).glob("*.safetensors") if p.is_file()))
    return found


def launch_config(
    checkpoints: Sequence[str | Path] = (),
    runs: Sequence[str | Path] | None = None,
    *,
    data_dir: str | None = None,
    port: int = 8000,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    upload_limit: int = UPLOAD_LIMIT,
    max_side: int = MAX_SIDE,
    max_pixels: int = MAX_PIXELS,
) -> ExploreConfig:
    """The explorer's config. Without ``runs``, ``./runs`` is served if it exists; without ``checkpoints``, the
    trained classifiers found there (:func:`found_checkpoints`) are loaded. Another machine may connect only when
    ``host`` names a non-loopback address, and then only with the config's token."""
    roots: list[str | Path] = list(runs) if runs is not None else ([DEFAULT_RUNS] if DEFAULT_RUNS.is_dir() else [])
    missing = [str(r) for r in roots if not Path(r).is_dir()]
    if missing:
        raise FileNotFoundError(
            f"--runs {', '.join(missing)}: no such folder; pass the folder `vitlab compare` "
            f"or `vitlab train` wrote into (e.g. runs)"
        )
    if data_dir is not None and not Path(data_dir).is_dir():
        raise FileNotFoundError(f"--data-dir {data_dir}: no such folder")
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port must lie in [1, 65535], got {port}")
    return ExploreConfig(
        checkpoints=list(checkpoints) or list(found_checkpoints(roots)),
        runs=roots,
        data_dir=data_dir,
        upload_limit=upload_limit,
        max_side=max_side,
        max_pixels=max_pixels,
        host=host,
        allowed_hosts=list(allowed_hosts),
    )


def address(config: ExploreConfig, port: int) -> str:
    """The URL to open: ``http://HOST:PORT/``, with ``?token=...`` when the explorer needs one."""
    return f"http://{bracketed(config.host)}:{port}/" + (f"?token={config.token}" if config.token else "")


def banner(config: ExploreConfig, port: int) -> list[str]:
    """What ``vitlab explore`` prints on starting: the address and what it serves."""
    return [
        f"vitlab explore: {address(config, port)}  (Ctrl+C stops it)",
        f"  checkpoints: {', '.join(map(str, config.checkpoints)) or 'none (--checkpoint RUN_OR_FILE)'}",
        f"  runs:        {', '.join(map(str, config.runs)) or 'none (--runs DIR)'}",
        f"  data:        {config.data_dir or 'built-in samples only (--data-dir DIR for MNIST and others)'}",
    ]


def exposure_warning(config: ExploreConfig) -> str | None:
    """The warning for an explorer other machines can reach (behind its token), else None."""
    if not config.token:
        return None
    return (
        f"vitlab explore: WARNING: serving on {config.host}, which other machines can reach: every request "
        f"needs the token in the address above; whoever has it can read the checkpoints and runs given"
    )


__all__ = ["DEFAULT_RUNS", "address", "banner", "exposure_warning", "found_checkpoints", "launch_config"]
