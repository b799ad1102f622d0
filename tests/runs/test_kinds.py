"""Which run and checkpoint kinds exist is what the registered tasks say: vitlab's own, and a package's of its
own found through the ``vitlab.tasks`` entry-point group."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from vitlab.runs import kinds
from vitlab.tasks import unregister

PLUGIN = """
from vitlab.engine import RunConfig
from vitlab.tasks import TaskSpec, register

register(TaskSpec("jigsaw", RunConfig, build=None, kinds=("solver",), summary=dict, line=str))
"""


def test_the_built_in_tasks_name_every_kind():
    assert {"classifier", "encoder", "segmenter", "detector", "promptable", "clip"} <= set(kinds.checkpoint_kinds())
    assert {"classify", "mae", "dino", "segment", "detect", "promptable", "clip"} <= set(kinds.resumable_kinds())
    assert "evaluate" not in kinds.resumable_kinds() and "compare" not in kinds.resumable_kinds()


def test_a_package_of_its_own_adds_its_kinds_through_the_entry_point_group(tmp_path, monkeypatch):
    (tmp_path / "jigsaw_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = importlib.metadata.EntryPoint("jigsaw", "jigsaw_plugin", kinds.ENTRY_POINTS)
    monkeypatch.setattr(kinds.importlib.metadata, "entry_points", lambda group: [entry] if group == entry.group else [])
    monkeypatch.setattr(kinds, "_loaded", False)
    try:
        assert "solver" in kinds.checkpoint_kinds() and "jigsaw" in kinds.resumable_kinds()
    finally:
        unregister("jigsaw")
        sys.modules.pop("jigsaw_plugin", None)
    assert "solver" not in kinds.checkpoint_kinds()


@pytest.mark.parametrize("kind", ["regressor", "", "Classifier"])
def test_an_unknown_checkpoint_kind_is_not_one(kind):
    assert kind not in kinds.checkpoint_kinds()
