"""Hugging Face hub model ids as model sources: ``timm/NAME.TAG``, ``hf-hub:timm/NAME.TAG``, ``ORG/NAME``.

:func:`hub_checkpoint` finds the files of an id with ``huggingface_hub``: its cache first (``HF_HUB_CACHE``,
``HF_HOME``), the hub only for what the cache lacks, never when ``HF_HUB_OFFLINE=1``. A timm repo holds
``config.json`` (architecture, pretrained_cfg, label_names) and ``model.safetensors``; a transformers repo
``config.json`` (with ``model_type``), the weights and ``preprocessor_config.json``. Only those files are
fetched. A model that is not cached while offline or without a network is one
:class:`~vitlab.errors.CheckpointError` line naming the id and how to get it. A revision (``ORG/NAME@REV``) must be
a commit hash or a git branch or tag name, and the cache's ``refs/`` files must hold commit hashes. A download from
the hub (``HF_ENDPOINT``, read now) is given up after ``VITLAB_HUB_TIMEOUT`` seconds in all
(:data:`HUB_DEADLINE` by default): one :class:`~vitlab.errors.DownloadError` line.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import CheckpointError, ConfigError, DownloadError
from ..interop.schema import HFModelConfig, TimmConfig, read_json

HUB_PREFIX = "hf-hub:"
DEADLINE_ENV = "VITLAB_HUB_TIMEOUT"
HUB_DEADLINE = 300.0  # seconds for a whole hub model (config, weights, preprocessing)
HUB_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})(?:@(?P<rev>[\w./-]+))?$")
_FILE_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin", ".keras", ".ckpt", ".json", ".onnx")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|/\.|^\.|^/|/$|\.lock$|\.$|^@$")
_TRUE = {"1", "ON", "YES", "TRUE"}
_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def parse_hub_id(source: str | Path) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` of a hub model id (``[hf-hub:]ORG/NAME[@REVISION]``), or None for a string
    that is not one (a path: more than one ``/``, a leading ``.`` or ``/``, a weights-file suffix)."""
    text = str(source)
    if text.startswith(HUB_PREFIX):
        text = text[len(HUB_PREFIX) :]
    match = _ID.match(text)
    if match is None:
        return None
    repo = match.group("repo")
    if "--" in repo or ".." in repo or repo.endswith(".") or repo.lower().endswith(_FILE_SUFFIXES):
        return None
    return repo, match.group("rev")


def check_revision(revision: str, source: str) -> str:
    """``revision`` when it is a commit hash or a branch or tag name by git's rules (``git check-ref-format``: no
    ``..``, no component starting with ``.``, no leading or trailing ``/``, no control characters or ``~^:?*[\\``),
    else one :class:`CheckpointError` line: such a name would reach outside the hub cache's folders."""
    if not revision or _REF_FORBIDDEN.search(revision):
        raise CheckpointError(
            f"{source}: revision {revision!r} is not a commit hash, branch or tag name (git's rules: no '..', "
            f"no part starting with '.', no leading or trailing '/'): name the revision as the hub shows it"
        )
    return revision


def _cached_commit(repo: str, revision: str | None) -> None:
    """Refuse a cached ``refs/REVISION`` file that holds anything but a commit hash (a damaged or planted cache
    would send huggingface_hub to another folder)."""
    if revision is not None and _COMMIT.match(revision):
        return
    ref = cache_dir() / f"models--{repo.replace('/', '--')}" / "refs" / (revision or "main")
    if ref.is_file():
        text = ref.read_text(errors="replace").strip()
        if not _COMMIT.match(text):
            raise CheckpointError(
                f"{ref} holds {text[:40]!r}, not a commit hash (40 hex digits): the hub cache is damaged; "
                f"delete {ref.parent.parent} and fetch the model again"
            )


def is_hub_id(source: str | Path) -> bool:
    """Whether ``source`` names a hub model rather than a local file: ``hf-hub:...`` always; otherwise
    an ``ORG/NAME`` string that is not an existing path."""
    text = str(source)
    if text.startswith(HUB_PREFIX):
        return parse_hub_id(text) is not None
    return parse_hub_id(text) is not None and not Path(text).exists()


def offline() -> str | None:
    """The variable that says "offline", ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` set to a true value
    (read now, not at import), or None."""
    return next((k for k in _OFFLINE if (os.environ.get(k) or "").upper() in _TRUE), None)


def cache_dir() -> Path:
    """The hub cache ``huggingface_hub`` uses, read from the environment now: ``HF_HUB_CACHE``, else
    ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(key):
            return Path(os.environ[key]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def _missing(source: str) -> str:
    """How a message about an id that could not be had begins: a bare ``ORG/NAME`` may have meant a path."""
    return f"{source}:" if source.startswith(HUB_PREFIX) else f"no checkpoint at {source} (no such file or folder), and"


def _how_to_get(repo: str) -> str:
    return f"run it once with a network, or `hf download {repo}` (huggingface-cli download) where there is one"


def _endpoint_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub's host answers a TCP connection (skipped, True, behind a proxy)."""
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")):
        return True
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def _fetch(repo: str, filename: str, revision: str | None, local: bool) -> Path | None:
    """One file of ``repo`` from the cache (``local``) or the hub; None when the repo has no such file
    (or, from the cache, when it is not cached)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import EntryNotFoundError, LocalEntryNotFoundError

    try:
        path = hf_hub_download(
            repo,
            filename,
            revision=revision,
            cache_dir=cache_dir(),
            local_files_only=local,
            endpoint=os.environ.get("HF_ENDPOINT") or None,
            etag_timeout=min(10.0, hub_deadline()),
        )
    except LocalEntryNotFoundError:
        return None
    except EntryNotFoundError:  # the hub (or the cache's record of it) says the repo has no such file
        return None
    return Path(str(path))


def _is_transformers(config: Path) -> bool:
    """Whether the hub ``config.json`` at ``config`` is a transformers model's (else timm's); its fields checked."""
    obj = read_json(config)
    transformers = isinstance(obj, dict) and "model_type" in obj
    (HFModelConfig if transformers else TimmConfig).from_json(config, obj)
    return transformers


def _snapshot(repo: str, revision: str | None, local: bool) -> Path | None:
    """The snapshot folder holding ``config.json`` and weights of ``repo`` (from the cache when ``local``),
    with ``preprocessor_config.json`` for a transformers model where the repo has one."""
    config = _fetch(repo, "config.json", revision, local)
    if config is None:
        return None
    weights = next((w for name in HUB_WEIGHTS if (w := _fetch(repo, name, revision, local)) is not None), None)
    if weights is None:
        return None
    if _is_transformers(config):
        _fetch(repo, "preprocessor_config.json", revision, local)
    if weights.parent != config.parent:
        raise CheckpointError(f"{repo}: config.json and weights come from different snapshots of the cache")
    return config.parent


def hub_snapshot(source: str) -> Path:
    """The local snapshot folder of the hub model ``source`` (see :func:`parse_hub_id`), cache first."""
    parsed = parse_hub_id(source)
    if parsed is None:
        raise CheckpointError(f"{source!r} is not a hub model id: expected ORG/NAME, timm/NAME.TAG or hf-hub:ORG/NAME")
    repo, revision = parsed
    if revision is not None:
        check_revision(revision, source)
    _cached_commit(repo, revision)
    found = _snapshot(repo, revision, local=True)
    if found is not None:
        return found
    if (variable := offline()) is not None:
        raise CheckpointError(
            f"{_missing(source)} the hub model {repo} is not in the Hugging Face cache "
            f"({cache_dir()}) while {variable} is set: {_how_to_get(repo)}"
        )
    if not _endpoint_reachable():
        raise CheckpointError(
            f"{_missing(source)} the hub model {repo} is not in the Hugging Face cache "
            f"({cache_dir()}) and the hub cannot be reached: {_how_to_get(repo)}"
        )
    return _download(source, repo, revision)


def hub_deadline() -> float:
    """Seconds a hub model's download may take in all: ``VITLAB_HUB_TIMEOUT`` (read now), else
    :data:`HUB_DEADLINE`."""
    text = os.environ.get(DEADLINE_ENV) or str(HUB_DEADLINE)
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"{DEADLINE_ENV}={text!r}: give the seconds a hub download may take, a number > 0")
    return seconds


def _within_deadline(source: str, repo: str, revision: str | None) -> Path | None:
    """:func:`_snapshot` from the hub, given up after :func:`hub_deadline` seconds (a server that accepts and never
    answers): the fetch runs in a daemon thread left behind."""
    deadline = hub_deadline()
    outcome: list[Any] = []

    def fetch() -> None:
        try:
            outcome.append(_snapshot(repo, revision, local=False))
        except BaseException as err:  # handed to the caller's thread
            outcome.append(err)

    worker = threading.Thread(target=fetch, name=f"hub {repo}", daemon=True)
    worker.start()
    worker.join(deadline)
    if not outcome:
        endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
        raise DownloadError(
            f"{source}: the hub ({endpoint}) did not send {repo} within {deadline:g} s ({DEADLINE_ENV}): "
            f"{_how_to_get(repo)}, or allow more time"
        )
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _download(source: str, repo: str, revision: str | None) -> Path:
    from huggingface_hub.utils import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        found = _within_deadline(source, repo, revision)
    except DownloadError:  # the deadline's own line
        raise
    except GatedRepoError as err:
        raise CheckpointError(
            f"{source}: the hub model {repo} is gated: accept its terms, then `hf auth login`"
        ) from err
    except RepositoryNotFoundError as err:
        hint = (
            " (timm's hub models carry a tag: timm/NAME.TAG, e.g. timm/vit_tiny_patch16_224.augreg_in21k)"
            if repo.startswith("timm/") and "." not in repo
            else ""
        )
        raise CheckpointError(
            f"{_missing(source)} there is no model {repo} on the Hugging Face hub{hint} "
            f"(a private one needs `hf auth login`)"
        ) from err
    except RevisionNotFoundError as err:
        raise CheckpointError(f"{source}: the hub model {repo} has no revision {revision!r}") from err
    except (HfHubHTTPError, OSError) as err:
        detail = " ".join(str(err).split()[:30])
        raise CheckpointError(
            f"{source}: the hub model {repo} could not be fetched ({detail}): {_how_to_get(repo)}"
        ) from err
    if found is None:
        raise CheckpointError(
            f"{source}: the hub model {repo} has no config.json with {' or '.join(HUB_WEIGHTS)}: vitlab reads timm "
            f"and transformers ViTs"
        )
    return found


def hub_checkpoint(source: str) -> Path:
    """What :func:`~vitlab.runs.load_checkpoint` reads for the hub model ``source``: the snapshot folder of
    a transformers model (a ``save_pretrained`` folder), or the weights file of a timm model (its
    ``config.json`` beside it)."""
    folder = hub_snapshot(source)
    if _is_transformers(folder / "config.json"):
        return folder
    return next(folder / name for name in HUB_WEIGHTS if (folder / name).is_file())
