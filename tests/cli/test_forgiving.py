"""A command line that forgives: a near miss of a command, an option, a choice or a field gets the nearest name
(one suggestion mechanism, ``vitlab.checks.suggest``); a closed pipe ends quietly; help says what an option
means and its default, never a machine's limit as a range."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vitlab.checks import Float, Int, suggest
from vitlab.cli.main import main


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1]


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["trian"], "'train'"),
        (["evalute", "run"], "'evaluate'"),
        (["train", "--modle", "vit-tiny"], "'--model'"),
        (["train", "--epohcs", "3"], "'--epochs'"),
        (["predict", "run", "a.png", "--top_k", "3"], "'--top-k'"),
        (["train", "--task", "clasify"], "'classify'"),
        (["train", "--recipe", "finetuen"], "'finetune'"),
    ],
)
def test_a_mistyped_command_option_or_choice_names_the_nearest(argv, meant, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    line = error_line(capsys)
    assert line.endswith(f"(did you mean {meant}?)"), line


def test_an_unknown_option_is_refused_by_the_commands_own_parser(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--modle", "x"])
    err = capsys.readouterr().err
    assert err.startswith("usage: vitlab train ") and "vitlab train: error: unrecognized arguments: --modle x" in err


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["train", "--set", "lrr=0.1"], "'lr'"),
        (["train", "--set", "weight_decy=0.1"], "'weight_decay'"),
        (["train", "--set", "dept=4"], "'depth'"),  # a field of the model's config
        (["train", "--set", "optimizer=adamx"], "'adam'"),
        (["train", "--set", "augment.colour_jitter=0.4"], "'color_jitter'"),
    ],
)
def test_a_mistyped_set_key_or_value_names_the_nearest(argv, meant, capsys):
    assert main([*argv, "--epochs", "1"]) == 2
    line = error_line(capsys)
    assert line.startswith("vitlab train: error: ") and f"(did you mean {meant}?)" in line, line


def test_a_set_key_near_nothing_gets_no_guess(capsys):
    assert main(["train", "--set", "zzzzzz=1", "--epochs", "1"]) == 2
    assert "did you mean" not in error_line(capsys)


@pytest.mark.parametrize(
    ("word", "choices", "said"),
    [("lrr", ["lr", "min_lr", "seed"], " (did you mean 'lr'?)"), ("xyz", ["lr", "seed"], ""), ("lr", [], "")],
)
def test_suggest(word, choices, said):
    assert suggest(word, choices) == said


def test_help_says_meaning_default_and_no_machine_limit(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "9223372036854775807" not in out and "1099511627776" not in out
    assert (
        "--seed SEED seed of the split, the initial weights and the batch order: a non-negative integer (default: 0)"
        in out
    )
    assert "--lr LR peak learning rate: a number in (0, 10] (default: 0.003)" in out


@pytest.mark.parametrize(
    ("check", "said"),
    [
        (Int(0, 2**63 - 1), "a non-negative integer"),
        (Int(1, 2**40), "a positive integer"),
        (Int(3, 2**40), "an integer >= 3"),
        (Int(1, 1000), "a positive integer in [1, 1000]"),
        (Float(0.0, 1e9, low_open=True), "a number > 0"),
        (Float(0.0, 10.0), "a number in [0, 10]"),
    ],
)
def test_an_unbounded_range_is_said_by_its_lower_bound(check, said):
    assert check.describe() == said


def test_a_closed_pipe_ends_quietly():
    """``vitlab models | head -1``: the reader leaves after one line; no BrokenPipeError, no traceback."""
    command = [sys.executable, "-c", "import sys; from vitlab.cli.main import main; sys.exit(main(['models']))"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # as `head` does once it has its line
        err = proc.stderr.read().decode()
        code = proc.wait()
    assert err == "" and code in (0, 141)


@pytest.fixture(scope="module")
def completion_cache(tmp_path_factory):
    """A cache folder holding the command line's index (built once, as the first Tab does)."""
    return tmp_path_factory.mktemp("cache")


def tab(line: str, cache) -> tuple[list[str], str]:
    """Complete ``line`` as the shell does (argcomplete's protocol); the words offered and the modules imported."""
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "XDG_CACHE_HOME": str(cache),
    }
    env |= {"_ARGCOMPLETE_IFS": "\n", "PYTHONPATH": os.pathsep.join(sys.path)}
    script = "import os, sys\nfrom vitlab.cli.main import main\nos.dup2(1, 8)\nos.dup2(2, 9)\nmain([])"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", script], env=env, capture_output=True, text=True)
    return [word.strip() for word in done.stdout.split("\n") if word.strip()], done.stderr


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("vitlab tr", ["train"]),
        ("vitlab train --mod", ["--model"]),
        ("vitlab train --model vit-dig", ["vit-digits"]),
        ("vitlab train --dataset fashion", ["fashion-mnist"]),
        ("vitlab params vit-d", ["vit-digits"]),
        ("vitlab predict run.safetensors a.png --top", ["--top-k"]),
    ],
)
def test_a_tab_completes_commands_options_and_registered_names_without_torch(line, offered, completion_cache):
    tab("vitlab ", completion_cache)  # the first Tab writes the index
    words, imports = tab(line, completion_cache)
    assert words == offered
    assert "| torch" not in imports and "vitlab.models" not in imports
