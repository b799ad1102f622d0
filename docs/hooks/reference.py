"""MkDocs hook: the reference pages that are generated from the code when the site builds, so they cannot drift.

- ``reference/cli.md``: every command and option of ``vitlab``, walked from the parser the command itself
  uses (:func:`vitlab.cli.main.build_parser`, every sub-command built in full): usage, the option's value,
  choices, default and help, as argparse would print them.
- ``reference/config.md``: every config dataclass of vitlab (every dataclass with ``checks``, found by
  importing each module of the package, and every subclass of one, a plug-in task's config included):
  each field's type, default, the values it allows (the field's :class:`vitlab.checks.Check`, described by
  its own ``describe()``, the words its command-line flag's help is made of, :func:`vitlab.cli.options.argument`)
  and what it means (the comment beside the field in the source or the config's ``HELP``, else the flag's help).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import pkgutil
import re
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

CLI_PAGE = "reference/cli.md"
CONFIG_PAGE = "reference/config.md"


def cell(text: Any) -> str:
    """``text`` fit for one Markdown table cell (pipes escaped, one line)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: Any) -> str:
    """``text`` as inline code in a table cell (a backtick inside made safe)."""
    inner = cell(text).replace("`", "'")
    return f"`{inner}`" if inner else ""


# ---------------------------------------------------------------- the command line


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's sub-command parsers by name (none for a leaf command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def option_rows(parser: argparse.ArgumentParser) -> list[str]:
    """One table row per argument of ``parser``: name(s), value, default, help (``%(default)s`` expanded)."""
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)) or action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(action.option_strings) or action.metavar or action.dest
        if action.choices is not None:
            value = " \\| ".join(code(c) for c in action.choices)
        elif action.nargs == 0:
            value = "(a switch)"
        else:
            value = code(formatter._format_args(action, action.dest.upper()))
        default = action.default
        shown = "" if default in (None, argparse.SUPPRESS, False) or action.nargs == 0 else code(default)
        help_text = formatter._expand_help(action) if action.help else ""
        rows.append(f"| {code(names)} | {value} | {shown} | {cell(help_text)} |")
    return rows


def command_section(path: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """The section of one command (and, below it, its sub-commands)."""
    title = " ".join(path)
    lines = [f"## `{title}`", ""]
    if parser.description:
        lines += [parser.description.strip(), ""]
    usage = parser.format_usage().strip().removeprefix("usage: ")
    lines += ["```text", usage, "```", ""]
    rows = option_rows(parser)
    if rows:
        lines += ["| option | value | default | help |", "| --- | --- | --- | --- |", *rows, ""]
    if parser.epilog:
        lines += [parser.epilog.strip(), ""]
    for name, sub in subcommands(parser).items():
        lines += command_section([*path, name], sub)
    return lines


def cli_page(parser: argparse.ArgumentParser) -> str:
    """The CLI reference of ``parser`` (the ``vitlab`` parser with every command built)."""
    commands = subcommands(parser)
    lines = [
        "# Command line",
        "",
        "Generated from the parsers `vitlab` itself uses when the site was built (`vitlab COMMAND --help` prints",
        "the same). Options shared by every command mean the same everywhere: see",
        "[the conventions](conventions.md).",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    helps = {
        choice.dest: choice.help
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action._choices_actions
    }
    lines += [f"| [`vitlab {name}`](#vitlab-{name}) | {cell(helps.get(name, ''))} |" for name in commands]
    lines += ["", *command_section(["vitlab"], parser)[4:]]  # the top parser's usage and options, no heading
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the config dataclasses


def walk_modules(package: str = "vitlab") -> list[Any]:
    """Every module of ``package``, imported (``__main__`` excepted: importing it runs the command)."""
    root = importlib.import_module(package)
    names = [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.") if not m.name.endswith("__main__")]
    return [root, *(importlib.import_module(n) for n in sorted(names))]


def has_checks(obj: Any) -> bool:
    return inspect.isclass(obj) and dataclasses.is_dataclass(obj) and hasattr(obj, "checks")


def config_classes(package: str = "vitlab") -> list[type]:
    """vitlab's config dataclasses (those with ``checks``), defined in the package or subclassing one of them."""
    found: dict[str, type] = {}
    todo = [obj for module in walk_modules(package) for obj in vars(module).values() if has_checks(obj)]
    while todo:
        cls = todo.pop()
        key = f"{cls.__module__}.{cls.__qualname__}"
        if key not in found:
            found[key] = cls
            todo += [sub for sub in cls.__subclasses__() if has_checks(sub)]
    return [found[k] for k in sorted(found)]


def field_checks(cls: type) -> dict[str, Any]:
    """``{field: Check}`` of a config class, however it declares them (a class dict, a static method, or a
    method that reads no field: called on an instance not yet initialised, so no config is made)."""
    static = inspect.getattr_static(cls, "checks")
    if isinstance(static, dict):
        return static
    if isinstance(static, staticmethod):
        return cls.checks()
    return cls.checks(object.__new__(cls))


COMMENT = re.compile(r"^\s+(\w+)\s*:[^=#]*(?:=[^#]*)?#\s*(.+)$")


def field_comments(cls: type) -> dict[str, str]:
    """The comment beside each field in the source of ``cls`` and its bases (``depth: int = 12  # blocks``)."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        for line in source.splitlines():
            match = COMMENT.match(line)
            if match:
                comments[match.group(1)] = match.group(2).strip()
    return comments


def type_name(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))


def default_of(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        return code(repr(field.default))
    if field.default_factory is not dataclasses.MISSING:
        return code(repr(field.default_factory()))
    return "(required)"


def config_section(cls: type) -> list[str]:
    """One config class: its docstring's first paragraph and a row per field."""
    from vitlab.cli.options import argument

    checks = field_checks(cls)
    comments = field_comments(cls)
    doc = inspect.getdoc(cls) or ""
    lines = [f"## `{cls.__name__}`", "", f"`{cls.__module__}.{cls.__qualname__}`", ""]
    if doc:
        lines += [doc.split("\n\n")[0].replace("\n", " "), ""]
    lines += ["| field | type | default | allowed values | meaning |", "| --- | --- | --- | --- | --- |"]
    for field in dataclasses.fields(cls):
        check = checks.get(field.name)
        allowed = cell(check.describe()) if check is not None else "checked with the config's other fields"
        default = field.default if field.default is not dataclasses.MISSING else None
        flag = argument(check, default) if check is not None else {}
        flag_help = "" if flag.get("action") == "store_true" else flag.get("help", "")  # a switch's help: "turn it on"
        said = comments.get(field.name) or getattr(cls, "HELP", {}).get(field.name)  # the source's few words
        meaning = said or (flag_help if cell(flag_help) != allowed else "")
        lines.append(
            f"| `{field.name}` | {code(type_name(field.type))} | {default_of(field)} | {allowed} | {cell(meaning)} |"
        )
    return [*lines, ""]


def config_page(classes: list[type]) -> str:
    """The config reference of ``classes``."""
    lines = [
        "# Config fields",
        "",
        "Generated from the config dataclasses when the site was built: each field's type and default, the",
        "values it allows (the check that refuses anything else, in the words of the one-line error and of the",
        "command-line flag's help), and what it means. On the command line a field is `--set NAME=VALUE`",
        "(a nested one `--set data.crop_pct=0.9`), or its own flag where the command has one",
        "([command line](cli.md)); in Python, the class's keyword argument; in a file, a key of `--config FILE`.",
        "",
        *(f"- [`{c.__name__}`](#{c.__name__.lower()}) — `{c.__module__}`" for c in classes),
        "",
    ]
    for cls in classes:
        lines += config_section(cls)
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Every generated reference page, ``{path under docs/: Markdown}``, from the live code."""
    from vitlab.cli.main import build_parser

    return {CLI_PAGE: cli_page(build_parser()), CONFIG_PAGE: config_page(config_classes())}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files
