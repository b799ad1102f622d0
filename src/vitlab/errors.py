"""The errors a user can cause, each naming the value at fault and the way out.

Every class derives from :class:`VitlabError` *and* a builtin (``ValueError``, ``OSError`` or
``RuntimeError``), so library callers may catch either. The command line has one boundary
(``vitlab.cli.main``): a :class:`VitlabError` prints its message on one line and exits with
:attr:`VitlabError.exit_code` (2: bad input, 1: a run failed); anything else is a bug and keeps
its traceback.

    ConfigError        a setting out of range or unknown            (ValueError, exit 2)
    DataError          a dataset, image or data file that cannot be used  (ValueError, exit 2)
    CheckpointError    a checkpoint that is corrupt, foreign or ambiguous (ValueError, exit 2)
    RunFolderError     a run folder that holds another run, is locked, or cannot resume (ValueError, exit 2)
    DownloadError      files that could not be fetched                (OSError, exit 1)
    DivergenceError    training produced a non-finite loss            (RuntimeError, exit 1)
    MissingExtraError  an optional dependency is not installed       (ImportError, exit 2)
"""

from __future__ import annotations


class VitlabError(Exception):
    """Base class: an error caused by the user's input or environment, not a bug."""

    exit_code = 2


class ConfigError(VitlabError, ValueError):
    """A setting is unknown or out of its range; the message names the field and its range."""


class DataError(VitlabError, ValueError):
    """A dataset, image or data file cannot be used as given."""


class CheckpointError(VitlabError, ValueError):
    """A checkpoint is unreadable, corrupt (checksum), foreign, or fits more than one reading."""


class RunFolderError(VitlabError, ValueError):
    """A run folder holds another run, is in use by another process, or cannot be resumed."""


class DownloadError(VitlabError, OSError):
    """Files could not be fetched (offline, server down, too slow, too large)."""

    exit_code = 1


class WorkerError(VitlabError, RuntimeError):
    """A data-loading worker process died (killed by the system, usually for memory)."""

    exit_code = 1


class DivergenceError(VitlabError, RuntimeError):
    """Training produced a non-finite loss; the last finite checkpoint is kept."""

    exit_code = 1


class MissingExtraError(VitlabError, ImportError):
    """An optional dependency is not installed; the message gives the ``pip install`` line."""


def require(module: str, extra: str, purpose: str) -> None:
    """Raise :class:`MissingExtraError` unless ``module`` imports (``extra`` names the pip extra)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(f"{purpose} needs {module}, which is not installed: pip install 'vitlab[{extra}]'")
