"""A plug-in task (an entry point of the ``vitlab.tasks`` group) is isolated: one that is missing, raises, does not
parse, calls ``sys.exit`` or clashes with a built-in name or kind is skipped with one warning line naming it, and
vitlab's own tasks, ``--help`` and ``--resume`` work on; only asking for the broken plug-in's task fails, in one
line."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from vitlab.cli.main import main
from vitlab.runs import kinds
from vitlab.tasks import registry

HEADER = "from vitlab.engine import RunConfig\nfrom vitlab.tasks import TaskSpec, register\n"


def spec(name: str, kind: str) -> str:
    return f"register(TaskSpec({name!r}, RunConfig, build=None, kinds=({kind!r},), summary=dict, line=str))\n"


BROKEN = {  # entry point name -> the module's text (None: no such module)
    "missing": None,
    "raises": "raise RuntimeError('no GPU driver found')\n",
    "syntax": "def broken(:\n",
    "exits": "import sys\nsys.exit(3)\n",
    "kind_clash": HEADER + spec("kind_clash", "classifier"),
    "name_clash": HEADER + spec("classify", "classifier2"),
    "half_done": HEADER + spec("half_done", "half") + "raise ImportError('a dependency is missing')\n",
}
GOOD = HEADER + spec("jigsaw", "solver")


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Every broken plug-in of :data:`BROKEN` and one good one, as entry points; loaded afresh."""
    entries = []
    for name, text in {**BROKEN, "jigsaw": GOOD}.items():
        module = f"vitlab_test_plugin_{name}"
        if text is not None:
            (tmp_path / f"{module}.py").write_text(text)
        entries.append(importlib.metadata.EntryPoint(name, module, registry.ENTRY_POINTS))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        registry.importlib.metadata, "entry_points", lambda group: entries if group == registry.ENTRY_POINTS else []
    )
    registry.reload_plugins()
    yield entries
    for entry in entries:
        registry.unregister(entry.name)
        sys.modules.pop(entry.value, None)
    monkeypatch.undo()
    registry.reload_plugins()


def test_each_broken_plugin_is_skipped_with_its_reason_and_the_good_one_registers(plugins):
    with pytest.warns(UserWarning) as warned:
        names = [spec.name for spec in registry.specs()]
    assert names[: len(names) - 1] == [s.name for s in registry.specs() if s.name != "jigsaw"]
    assert "jigsaw" in names and "solver" in kinds.checkpoint_kinds()
    assert "classify" in names and "classifier" in kinds.checkpoint_kinds()
    failed = registry.broken()
    assert sorted(failed) == sorted(BROKEN)
    assert "ModuleNotFoundError" in failed["missing"] and "no GPU driver" in failed["raises"]
    assert "syntax error" in failed["syntax"] and "sys.exit(3)" in failed["exits"]
    assert "'classifier' is task 'classify'" in failed["kind_clash"] and "already registered" in failed["name_clash"]
    assert "half_done" not in names and "half" not in kinds.checkpoint_kinds()  # taken back when it failed
    lines = [str(w.message) for w in warned]
    assert len(lines) == len(BROKEN) and all("\n" not in line for line in lines)
    assert all(any(f"plug-in {name!r}" in line for line in lines) for name in BROKEN)


def test_help_names_each_broken_plugin_in_one_warning_line(plugins, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["train", "--help"])
    assert exit.value.code == 0
    out, err = capsys.readouterr()
    assert "--task" in out and "jigsaw" in out
    lines = err.strip().splitlines()
    assert len(lines) == len(BROKEN) and all(line.startswith("vitlab train: warning: plug-in ") for line in lines)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_asking_for_a_broken_plugins_task_fails_in_one_line(plugins, name, capsys):
    code = main(["train", "--task", name, "--epochs", "1"])
    err = [line for line in capsys.readouterr().err.splitlines() if ": warning: " not in line]
    if name == "name_clash":  # its entry point's name is no task's: the usual refusal
        assert code == 2
    else:
        assert code == 2 and err == [err[0]] and "its plug-in failed to load" in err[0]


def test_a_built_in_task_still_resolves_its_config(plugins, capsys):
    from vitlab.tasks import resolve_config

    config = resolve_config("classify", options={"epochs": 1}, sets=["lr=0.01"])
    assert config.epochs == 1 and config.lr == 0.01
    capsys.readouterr()


@pytest.mark.slow
def test_a_built_in_task_trains_and_resumes_beside_broken_plugins(plugins, tmp_path, capsys):
    out = str(tmp_path / "run")
    common = ["--out", out, "--quiet", "--device", "cpu", "--set", "warmup_epochs=0"]
    assert main(["train", "--epochs", "1", "--rows", "64", *common]) == 0
    assert main(["train", "--epochs", "1", "--rows", "64", "--resume", *common]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and ": error: " not in err and err.count("run folder: ") == 2
