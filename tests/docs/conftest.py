"""The documentation site, built once per test session: ``mkdocs build --strict`` of the repository's
``mkdocs.yml`` (every tutorial executed, the reference generated), into a temporary folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built site's folder; the build's output is shown when it fails (a warning fails it: strict).
    ``VITLAB_DOCS_SITE=DIR`` checks a site already built there instead (while writing the docs)."""
    pytest.importorskip("mkdocs", reason="pip install -e '.[docs]' (in the dev extra)")
    if os.environ.get("VITLAB_DOCS_SITE"):
        return Path(os.environ["VITLAB_DOCS_SITE"])
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    return out
