"""Which run and checkpoint kinds exist is what the registered tasks tell runs/: runs checks what it is given (a
name, a kind no other task has) and loads nothing itself."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from vitlab.errors import ConfigError
from vitlab.runs import kinds
from vitlab.tasks import registry

PLUGIN = """
from vitlab.engine import RunConfig
from vitlab.tasks import TaskSpec, register

register(TaskSpec("jigsaw", RunConfig, build=None, kinds=("solver",), summary=dict, line=str))
"""


def test_the_built_in_tasks_name_every_kind():
    assert {"classifier", "encoder", "segmenter", "detector", "promptable", "clip"} <= set(kinds.checkpoint_kinds())
    assert {"classify", "mae", "dino", "segment", "detect", "promptable", "clip"} <= set(kinds.resumable_kinds())
    assert "evaluate" not in kinds.resumable_kinds() and "compare" not in kinds.resumable_kinds()


@pytest.mark.slow  # a fresh interpreter, where nothing has imported the task wing yet
@pytest.mark.parametrize(
    "script",
    [
        "import vitlab\nvitlab.save_checkpoint",
        "from vitlab.runs import save_checkpoint",  # runs alone: the task wing is registered on the first question
    ],
)
def test_vitlab_knows_every_kind_before_it_saves_or_loads_a_checkpoint(script):
    script += "\nimport sys\nfrom vitlab.runs import kinds\n"
    script += "print('vitlab.tasks' in sys.modules, kinds.checkpoint_kinds())"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    imported_before, known = out.split(" ", 1)
    assert imported_before == "False"  # asking registered them, not importing runs
    assert {"classifier", "encoder", "segmenter"} <= set(eval(known))


def test_a_package_of_its_own_adds_its_kinds_through_the_entry_point_group(tmp_path, monkeypatch):
    (tmp_path / "jigsaw_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = importlib.metadata.EntryPoint("jigsaw", "jigsaw_plugin", registry.ENTRY_POINTS)
    monkeypatch.setattr(registry.importlib.metadata, "entry_points", lambda group: [entry])
    registry.reload_plugins()
    try:
        assert "jigsaw" in [spec.name for spec in registry.specs()]
        assert "solver" in kinds.checkpoint_kinds() and "jigsaw" in kinds.resumable_kinds()
    finally:
        registry.unregister("jigsaw")
        sys.modules.pop("jigsaw_plugin", None)
        monkeypatch.undo()
        registry.reload_plugins()
    assert "solver" not in kinds.checkpoint_kinds()


@pytest.mark.parametrize("kind", ["regressor", "", "Classifier"])
def test_an_unknown_checkpoint_kind_is_not_one(kind):
    assert kind not in kinds.checkpoint_kinds()


@pytest.mark.parametrize(
    ("run_kinds", "checkpoint_kinds", "said"),
    [
        (("toy",), ("classifier",), "'classifier' is task 'classify'"),  # a kind another task has
        (("classify",), ("toy",), "'classify' is task 'classify'"),
        (("toy",), ("",), "lower-case name"),
        (("toy",), ("Toy Kind",), "lower-case name"),
        (("toy",), (3,), "lower-case name"),
        (("toy",), "toy", "non-empty tuple"),  # a string, not a tuple of names
        ((), ("toy",), "non-empty tuple"),
    ],
)
def test_runs_refuses_a_malformed_or_taken_kind_and_records_nothing(run_kinds, checkpoint_kinds, said):
    before = (kinds.checkpoint_kinds(), kinds.resumable_kinds())
    with pytest.raises(ConfigError, match=said):
        kinds.register_kinds("toy", run_kinds, checkpoint_kinds)
    assert (kinds.checkpoint_kinds(), kinds.resumable_kinds()) == before
