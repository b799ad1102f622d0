"""Every option naming what a command writes is checked at the door, before any work: for each one (found by
walking every command's parser), generated bad values -- no suffix, a suffix its writer does not support, a folder
where a file goes or a file where a folder goes, a path under a file, an existing file without --overwrite -- end in
one line naming the option, exit 2; good values pass, a file's parent folder made."""

import argparse

import pytest

from vitlab.cli.main import build_parser, command_modules, main
from vitlab.cli.outputs import Output, check_outputs, output_rules

OUTPUT_DESTS = ("out", "plot", "dst")  # what an option that names a command's output is called
OUT = "<out>"
VARIANTS = {"export": (("--to", "onnx"), ("--to", "hf"), ("--adapters-only",)), "convert": ((), ("--to", "timm"))}


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(command words, parser)`` of every runnable (sub-)command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            if child is not parser:
                yield from leaves(child, (*path, name))


def commands():
    for module in command_modules():
        parser = build_parser(module)
        command = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[module]
        yield from leaves(command, (module,))


def base_argv(path: tuple[str, ...], parser: argparse.ArgumentParser, output: argparse.Action) -> list[str]:
    """``path``, a value for each positional and required option, and ``OUT`` where ``output`` goes."""
    argv = list(path)
    for action in parser._actions:
        if action is output:
            argv += [*action.option_strings[:1], OUT]
        elif not action.option_strings and action.nargs not in ("?", "*"):
            argv.append(str(next(iter(action.choices))) if action.choices else "x")
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], str(next(iter(action.choices))) if action.choices else "x"]
    return argv


def output_options():
    found = []
    for path, parser in commands():
        for action in parser._actions:
            if action.dest in OUTPUT_DESTS:
                found.append(pytest.param(path, parser, action, id=" ".join(path) + " " + action.dest))
    return found


def with_output(argv: list[str], value: str) -> list[str]:
    return [value if a == OUT else a for a in argv]


def test_every_output_option_is_declared_with_its_rule():
    options = output_options()
    assert len(options) >= 10
    for param in options:
        path, parser, action = param.values
        assert action.dest in (parser.get_default("outputs") or {}), f"{' '.join(path)} {action.dest} has no rule"


@pytest.mark.parametrize("path, parser, action", output_options())
def test_bad_output_paths_are_refused_at_the_door_and_good_ones_pass(path, parser, action, tmp_path, capsys):
    base = base_argv(path, parser, action)
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file.txt").write_text("not a folder")
    for variant in VARIANTS.get(path[0], ((),)):
        argv = [*base, *variant]
        probe = build_parser(path[0]).parse_args(with_output(argv, str(tmp_path / "probe")))
        name, output = output_rules(probe)[action.dest]
        assert isinstance(output, Output)
        if output.folder:
            bad = {"a file": tmp_path / "a-file.txt", "under a file": tmp_path / "a-file.txt" / "run"}
            good = [tmp_path / "new" / "run"]
        else:
            suffix = output.suffixes[0]
            (tmp_path / f"exists{suffix}").write_text("")
            bad = {
                "no suffix": tmp_path / "name",
                "another suffix": tmp_path / "name.xyz",
                "a folder": tmp_path / "a-folder",
                "under a file": tmp_path / "a-file.txt" / f"out{suffix}",
                "existing": tmp_path / f"exists{suffix}",
            }
            good = [
                tmp_path / "new" / "deeper" / f"out{s.upper() if i % 2 else s}" for i, s in enumerate(output.suffixes)
            ]
        for why, value in bad.items():
            capsys.readouterr()
            assert main(with_output(argv, str(value))) == 2, (why, argv)
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and name in err and repr(str(value)) in err, (why, err)
        for value in good:
            check_outputs(build_parser(path[0]).parse_args(with_output(argv, str(value))))
            assert value.parent.is_dir() or output.folder
