"""MkDocs hook: every ``tutorials/*.py`` (a jupytext percent script) is executed when the site builds and
becomes a Markdown page with its outputs and figures.

The script is read by jupytext, run top to bottom in a fresh Python kernel by nbclient (a cell that raises
fails the build), and written out by nbconvert's Markdown exporter; each figure becomes a PNG beside the
page. Nothing is fetched: the pages are ordinary Material pages (no notebook CSS, no MathJax, no CDN), so
``mkdocs build --strict`` checks their links like any other page's. The script itself is published too,
for a reader to download and run.
"""

from __future__ import annotations

import logging
import os
import posixpath
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from nbclient import NotebookClient
from nbconvert import MarkdownExporter
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

log = logging.getLogger("mkdocs.hooks.tutorials")

FOLDER = "tutorials"
CELL_TIMEOUT_S = 600


def is_tutorial(file: File) -> bool:
    """A tutorial script: ``tutorials/NAME.py`` (a jupytext percent script)."""
    return posixpath.dirname(file.src_uri) == FOLDER and file.src_uri.endswith(".py")


def execute(path: Path) -> nbformat.NotebookNode:
    """The notebook of the script at ``path``, executed in a fresh kernel in a scratch folder (so a tutorial
    that writes runs writes them nowhere in the repository); stderr (progress, warnings) is dropped."""
    notebook = jupytext.read(path)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    # The kernel draws figures inline (a backend set for the build, e.g. the tests' Agg, would draw none) and
    # reaches no network.
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | {"HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="vitlab-tutorial-") as scratch:
        client = NotebookClient(
            notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": scratch}}
        )
        client.execute(env=env)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
    notebook, _ = CoalesceStreamsPreprocessor().preprocess(notebook, {})
    return notebook


def to_markdown(notebook: nbformat.NotebookNode, name: str) -> tuple[str, dict[str, bytes]]:
    """The page's Markdown and its figures (``{file name: PNG bytes}``, named ``NAME_files/...``)."""
    body, resources = MarkdownExporter().from_notebook_node(
        notebook, resources={"output_files_dir": f"{name}_files", "unique_key": name}
    )
    body = body.replace("![png](", "![figure](")
    return body, dict(resources.get("outputs", {}))


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for file in [f for f in files if is_tutorial(f)]:
        name = Path(file.src_uri).stem
        started = time.perf_counter()
        body, figures = to_markdown(execute(Path(file.abs_src_path)), name)
        log.info("tutorial %s executed in %.1f s (%d figures)", name, time.perf_counter() - started, len(figures))
        script = (
            f"\n\n---\nThis page was executed when the site was built. [Download the script]({name}.py) and run "
            f"it with `python {name}.py`, or open it as a notebook with `jupytext --to ipynb {name}.py`.\n"
        )
        files.append(File.generated(config, f"{FOLDER}/{name}.md", content=body + script))
        for figure, data in figures.items():
            files.append(File.generated(config, f"{FOLDER}/{figure}", content=data))
    return files
