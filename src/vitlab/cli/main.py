"""The ``vitlab`` command: one sub-command per module in this package, and one error boundary.

Every module here except this one defines ``register(subparsers)``, which adds its parser and
sets ``func`` to a function ``(args) -> int`` that calls into the library and prints. Commands
are thin: parse, call one library function, print.

The boundary catches what the user or the machine causes, never a bug:

- a :class:`vitlab.errors.VitlabError` (bad input, a failed run) prints its message on one line on
  stderr and exits with its ``exit_code`` (2: bad input, 1: a run failed);
- an ``OSError`` from the environment (a missing or unreadable file, a full disk, the network)
  prints one line naming the file and exits 2 for a path that is missing, of the wrong kind or not
  permitted, 1 otherwise; ``io.UnsupportedOperation`` (an ``OSError`` and a ``ValueError``: a stream
  used the wrong way) is a bug;
- Ctrl-C prints one line and exits 130.

Anything else -- a plain ``ValueError`` or ``TypeError`` included -- is a bug in vitlab and keeps its
traceback. ``--debug`` (or ``VITLAB_DEBUG=1``) shows the traceback of the caught errors too.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import pkgutil
import re
import sys
import warnings
from pathlib import Path
from typing import NoReturn

from .._version import __version__
from ..errors import VitlabError
from ..interrupts import interrupted, noted_interrupts, raise_if_interrupted

# Each command's one-line help, so that `vitlab --help` imports no command module (nor torch); a
# command's module is imported only when it runs (or when every parser is built, for completion).
COMMANDS = {
    "compare": "ViT vs a size-matched CNN across rows, patch sizes and variants, with a report",
    "convert": "convert a timm / Hugging Face / vitlab checkpoint file",
    "cost": "attention cost by token count (no arguments: the textbook's table)",
    "data": "list, describe and download datasets",
    "evaluate": "evaluate a checkpoint: accuracy, NLL, calibration, confusion",
    "explain": "explanation maps for an image, or an audit of what they are worth",
    "explore": "open the interactive explorer in the browser (127.0.0.1)",
    "export": "export a checkpoint to ONNX, timm or Hugging Face",
    "models": "list registered models",
    "params": "count a model's parameters by component",
    "predict": "classify images, or overlay a dense model's masks or boxes",
    "pretrain": "self-supervised pretraining (masked autoencoder or DINO)",
    "shapes": "shapes of patches, Q/K/V, scores and outputs in a ViT block",
    "train": "train a model on a dataset",
}


def command_modules() -> list[str]:
    """The sub-command modules of this package (those :data:`COMMANDS` names)."""
    return sorted(
        i.name for i in pkgutil.iter_modules(importlib.import_module(__package__).__path__) if i.name in COMMANDS
    )


class Parser(argparse.ArgumentParser):
    """``argparse`` whose refusal of a command, a choice or an option it does not know names the nearest one
    (:func:`vitlab.checks.suggest`): ``vitlab trian`` -> did you mean 'train'?"""

    def error(self, message: str) -> NoReturn:
        super().error(message + near_miss(self, message))


def near_miss(parser: argparse.ArgumentParser, message: str) -> str:
    """The "did you mean" for argparse's ``message``: an invalid choice among its choices, an unrecognised
    option among the parser's options."""
    from ..checks import suggest

    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        return suggest(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
    unknown = re.search(r"unrecognized arguments: (.*)", message)
    if unknown:
        options = [o for o in unknown.group(1).split() if o.startswith("--")]
        if options:
            return suggest(options[0].split("=")[0], parser._option_string_actions)
    return ""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``vitlab`` parser; with ``command``, only that command's module is imported (the others
    are listed by name and help); without, every command is built in full."""
    parser = Parser(prog="vitlab", description="Vision Transformers: understand, train, compare, explain and scale.")
    parser.add_argument("--version", action="version", version=f"vitlab {__version__}")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks (also VITLAB_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in command_modules():
        if command is None or name == command:
            importlib.import_module(f"{__package__}.{name}").register(sub)
        else:
            sub.add_parser(name, help=COMMANDS.get(name, ""), add_help=False)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``; an option the command does not know is refused by the command's own
    parser (its usage, and the nearest of its options), not by the top-level one."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = getattr(args, "command", None) or ""
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        (subparsers.choices.get(command) or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _command(argv: list[str]) -> str | None:
    """The sub-command named in ``argv`` (the first argument that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def one_line(err: BaseException) -> str:
    """The error's message on one line (an OSError names its file)."""
    if isinstance(err, OSError) and err.filename is not None and not str(err).count(str(err.filename)):
        text = f"{err.strerror or err}: {err.filename}"
    else:
        text = str(err) or type(err).__name__
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    debug = "--debug" in argv or os.environ.get("VITLAB_DEBUG", "") not in ("", "0")
    shown = warnings.showwarning
    if not debug:  # a warning (a plug-in skipped while the parser is built, too) is one line
        warnings.showwarning = lambda message, *_, **__: print(
            f"vitlab{f' {command}' if command in COMMANDS else ''}: warning: {message}", file=sys.stderr
        )
    with noted_interrupts():  # the command's block: SIGINT is noted from here (from the script's start, under it)
        try:
            return _main(argv, command, debug)
        except KeyboardInterrupt:  # before a command runs (imports, parsing): _run says more once one does
            return _interrupted(command)
        except BrokenPipeError:  # the reader went away (`vitlab models | head`): stop quietly, as `yes | head` does
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush must not fail
            return 128 + 13  # killed by SIGPIPE
        except Exception:
            if interrupted():  # e.g. an import the Ctrl-C cut short, failing when it is imported again
                return _interrupted(command)
            raise
        finally:
            warnings.showwarning = shown


def _interrupted(command: str | None, during: bool = False) -> int:
    """Say that ``command`` was interrupted (``during`` its work: what it wrote is kept); the exit code, 130."""
    kept = "; files already written are intact (a training run continues with --resume)" if during else ""
    print(f"vitlab{f' {command}' if command in COMMANDS else ''}: interrupted{kept}", file=sys.stderr)
    return 130


def _main(argv: list[str], command: str | None, debug: bool) -> int:
    if "_ARGCOMPLETE" in os.environ:  # a Tab: answered from the command line's index, without torch
        from .complete import complete

        complete(build_parser)
    parser = build_parser(command if command in command_modules() else "")
    args = parse(parser, argv)
    raise_if_interrupted()  # a Ctrl-C a finaliser swallowed while the command's modules were imported
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    code = _run(args, debug)
    sys.stdout.flush()  # inside the boundary: a closed pipe is seen here
    return code


def _run(args: argparse.Namespace, debug: bool) -> int:
    """``args.func(args)`` inside the error boundary (see the module docstring)."""
    from .outputs import check_outputs, remove_made

    made: list[Path] = []
    try:
        made = check_outputs(args)  # where it writes, before any work
        done = int(args.func(args) or 0)
        raise_if_interrupted()  # a Ctrl-C a finaliser swallowed still ends the command as one
        made = []
        return done
    except KeyboardInterrupt:
        return _interrupted(args.command, during=True)
    except BrokenPipeError:
        raise  # the reader went away: main() ends quietly
    except Exception as err:
        if interrupted():  # an error that ended the command after a Ctrl-C (a worker it stopped, say) is the Ctrl-C
            return _interrupted(args.command, during=True)
        code = exit_code(err)
        if debug or code is None:
            raise
        print(f"vitlab {args.command}: error: {one_line(err)}", file=sys.stderr)
        return code
    finally:
        remove_made(made)  # a failed command leaves no empty folder it made for its output


def exit_code(err: BaseException) -> int | None:
    """The exit code for an error the user or the machine caused, or None for a bug (which keeps its
    traceback): a :class:`VitlabError`'s own; for an ``OSError``, 2 when a path is missing, of the
    wrong kind or not permitted, else 1 (a full disk, the network); ``io.UnsupportedOperation``, an
    ``OSError`` that is also a ``ValueError`` (a stream used the wrong way), is a bug."""
    if isinstance(err, VitlabError):
        return err.exit_code
    if not isinstance(err, OSError) or isinstance(err, io.UnsupportedOperation):
        return None
    return 2 if isinstance(err, (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)) else 1


if __name__ == "__main__":
    sys.exit(main())
