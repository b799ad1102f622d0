"""The generated reference cannot drift from the code: a config field or a command-line option added to vitlab
appears in it without a word of documentation written, because the pages are made from the live parser and
the live config classes (docs/hooks/reference.py, the hook the site build runs)."""

import argparse
import importlib.util
from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

import pytest

from vitlab.checks import Check, Int, OneOf
from vitlab.cli import main as cli_main
from vitlab.tasks import TaskSpec, register, unregister
from vitlab.tasks.classify import TrainConfig

HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "reference.py"


@pytest.fixture(scope="module")
def reference():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class ToyConfig(TrainConfig):
    """A task's config with a field of its own."""

    crowd_size: int = 7  # how many crows gather
    crowd_kind: str = "murder"

    extra: ClassVar[dict[str, Check]] = {"crowd_size": Int(1, 99), "crowd_kind": OneOf(("murder", "flock"))}

    def checks(self) -> dict[str, Check]:
        return {**super().checks(), **self.extra}


def test_every_option_of_every_command_is_in_the_cli_page(reference):
    parser = cli_main.build_parser()
    page = reference.cli_page(parser)
    for path, sub in walk(parser, ["vitlab"]):
        assert len(path) == 1 or f"## `{' '.join(path)}`" in page
        for action in sub._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            for name in action.option_strings or [action.metavar or action.dest]:
                assert f"`{name}" in page, f"{' '.join(path)} {name} is not in the CLI reference"


def walk(parser, path):
    yield path, parser
    for name, sub in reference_subcommands(parser).items():
        yield from walk(sub, [*path, name])


def reference_subcommands(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def test_a_new_option_appears_in_the_cli_reference(reference, monkeypatch):
    built = cli_main.build_parser

    def with_option(command=None):
        parser = built(command)
        train = reference.subcommands(parser)["train"]
        train.add_argument("--crow-count", type=int, default=3, help="crows to count before each epoch")
        return parser

    monkeypatch.setattr(cli_main, "build_parser", with_option)
    page = reference.pages()[reference.CLI_PAGE]
    row = next(line for line in page.splitlines() if line.startswith("| `--crow-count`"))
    assert "`3`" in row and "crows to count before each epoch" in row


def test_every_field_of_every_config_class_is_in_the_config_page(reference):
    classes = reference.config_classes()
    assert {"ViTConfig", "TrainConfig", "DataOptions", "AugmentConfig", "RunConfig"} <= {c.__name__ for c in classes}
    page = reference.config_page(classes)
    for cls in classes:
        for field in fields(cls):
            assert f"| `{field.name}` |" in page, f"{cls.__name__}.{field.name} is not in the config reference"


def test_a_new_config_field_and_its_flag_appear_in_the_reference(reference):
    """A task registered with a config of one more field: the field is in the config page (type, default, range,
    meaning), and the flag the task gives it is in the CLI page, with its range as help."""
    from vitlab.tasks import get_task

    classify = get_task("classify")
    spec = TaskSpec(
        "crows",
        ToyConfig,
        build=classify.build,
        kinds=("crow-counter",),
        summary=classify.summary,
        line=classify.line,
        options=("crowd_size",),
    )
    register(spec)
    try:
        pages = reference.pages()
    finally:
        unregister("crows")
    config = pages[reference.CONFIG_PAGE]
    assert "## `ToyConfig`" in config
    row = next(line for line in config.splitlines() if line.startswith("| `crowd_size` |"))
    assert "`int`" in row and "`7`" in row and "[1, 99]" in row and "how many crows gather" in row
    kind = next(line for line in config.splitlines() if line.startswith("| `crowd_kind` |"))
    assert "'murder'" in kind and "'flock'" in kind
    cli = pages[reference.CLI_PAGE]
    flag = next(line for line in cli.splitlines() if line.startswith("| `--crowd-size` |"))
    assert "[1, 99]" in flag
