"""Every ``--set`` field of every task config, with null, a value of the wrong type and a value out of range:
exit 2 and exactly one line on stderr naming the field, no traceback, nothing trained.

The table is generated from the config dataclasses and their checks (``config.checks()``), so a field added
without a check fails ``test_every_field_of_every_task_config_has_a_check``, and a check added gets its bad
values here without a line of this file changing. Model config fields (``--set depth=...``), the data and
augmentation fields (``data.KEY``, ``augment.KEY``), MAE's (``mae.KEY``) and CLIP's image tower
(``vision={...}``) go through the same checks."""

import inspect
import json
import math
from dataclasses import fields

import pytest

from vitlab.checks import Bool, Fields, Float, Int, Maybe, OneOf, Options, Pair, Seq, Text
from vitlab.cli.main import main
from vitlab.data import AugmentConfig
from vitlab.data.options import DataOptions
from vitlab.engine.config import RunFolder
from vitlab.models import get_config
from vitlab.models.clip import CLIPConfig
from vitlab.models.dense import DenseConfig
from vitlab.models.promptable import PromptableConfig
from vitlab.models.tuning import LoraTargets, TuneMode, TuneOptions
from vitlab.tasks.classify import TrainConfig
from vitlab.tasks.classify.task import AugmentChoice, ModelFields
from vitlab.tasks.clip import CLIPTrainConfig
from vitlab.tasks.dense import DenseTrainConfig
from vitlab.tasks.promptable import PromptableTrainConfig
from vitlab.tasks.ssl import PretrainConfig
from vitlab.tasks.ssl.mae import MAEConfig

UNKNOWN = {"no_such_field": 1}


def bad_values(check) -> list:
    """JSON values ``check`` refuses: null (unless it allows null), the wrong type, past each end of its range."""
    if isinstance(check, Maybe):
        return [v for v in bad_values(check.check) if v is not None]
    if isinstance(check, Int):
        return [None, "abc", 1.5, True, check.low - 1, check.high + 1]
    if isinstance(check, Float):
        below = check.low if check.low_open else check.low - 1
        above = check.high if check.high_open else check.high + 1
        return [None, "abc", True, math.nan, below, above]
    if isinstance(check, Bool):
        return [None, "yes", 1]
    if isinstance(check, OneOf):
        return [None, 5, "no-such-choice"]
    if isinstance(check, Text):
        return [None, 5, [1], "", " "]
    if isinstance(check, Seq):
        return [None, "abc", [], [bad_values(check.item)[1]] * check.min_len, [0.5] * (check.max_len + 1)]
    if isinstance(check, Pair):
        return [None, "abc", [1, 2, 3], bad_values(check.item)[-1]]
    if isinstance(check, Options):
        return ([] if check.null_ok else [None]) + [5, "abc", UNKNOWN]
    if isinstance(check, Fields):
        nested = [{key: UNKNOWN} for key, _ in check.nested]
        return [None, 5, "abc", *([] if check.open else [UNKNOWN]), *nested]
    if isinstance(check, (ModelFields, AugmentChoice)):
        return [None, 5, UNKNOWN] + (["heavy"] if isinstance(check, AugmentChoice) else [])
    if isinstance(check, RunFolder):
        return [None, 5, ""]
    if isinstance(check, TuneMode):
        return [None, 5, "sideways", "last-0"]
    if isinstance(check, LoraTargets):
        return [None, 5, "", "qkv,nope"]
    raise AssertionError(f"no bad values for {check!r}: teach bad_values this check")


# command line -> its config class, and the nested configs it sets as PREFIX.KEY
TASKS = {
    "classify": (["train"], TrainConfig, {"data": DataOptions, "augment": AugmentConfig, "tune": TuneOptions}),
    "segment": (["train", "--task", "segment"], DenseTrainConfig, {}),
    "promptable": (["train", "--task", "promptable"], PromptableTrainConfig, {}),
    "clip": (["train", "--task", "clip"], CLIPTrainConfig, {}),
    "mae": (["pretrain", "mae"], PretrainConfig, {"mae": MAEConfig}),
}
# the model config a task's plain ``--set KEY=VALUE`` reaches (the fields the run derives from its data aside)
MODEL_FIELDS = {
    "classify": (type(get_config("vit-digits")).checks, ()),
    "segment": (DenseConfig.checks, ("task", "head", "num_classes", "img_size", "mean", "std")),
    "promptable": (PromptableConfig.checks, ("img_size", "mean", "std")),
    "clip": (CLIPConfig.checks, ("mean", "std")),
    "mae": (type(get_config("vit-digits")).checks, ()),
}


def checks_of(cls) -> dict:
    """``{field: Check}`` of a config class (an instance method on run configs, a table on the others)."""
    table = inspect.getattr_static(cls, "checks")
    if isinstance(table, dict):
        return dict(table)
    return cls.checks() if isinstance(table, staticmethod) else cls().checks()


def cases() -> list:
    rows = []
    for task, (_, cls, nested) in TASKS.items():
        owned = getattr(cls, "CLI_OWNED", {})
        for name, check in checks_of(cls).items():
            values = ["x", None] if name in owned else bad_values(check)
            rows += [(task, name, value) for value in values]
        for prefix, sub in nested.items():
            for name, check in checks_of(sub).items():
                rows += [(task, f"{prefix}.{name}", value) for value in bad_values(check)]
        table, derived = MODEL_FIELDS[task]
        for name, check in table.items():
            if name not in derived:
                rows += [(task, name, value) for value in bad_values(check)]
    return rows


CASES = cases()


def shown(value) -> str:
    return json.dumps(value) if not (isinstance(value, float) and math.isnan(value)) else "NaN"


@pytest.fixture
def nothing_trains(monkeypatch):
    """A config that passes would start training: fail the test at once instead."""

    def trained(*args, **kwargs):
        raise AssertionError("a refused setting started training")

    monkeypatch.setattr("vitlab.tasks.run", trained)  # every task trains through it


@pytest.mark.parametrize("task, name, value", CASES, ids=[f"{t}-{n}={shown(v)}"[:70] for t, n, v in CASES])
def test_a_bad_value_of_any_field_is_one_line_naming_the_field(task, name, value, nothing_trains, capsys):
    argv = TASKS[task][0]
    assert main([*argv, "--set", f"{name}={shown(value)}"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"vitlab {argv[0]}: error: "), lines
    named = name.split(".")[-1] if name.startswith(("data.", "augment.", "mae.")) else name
    unknown = "no_such_field" in json.dumps(value)  # a mapping with an unknown key: that key is named
    assert named in lines[0] or (unknown and "no_such_field" in lines[0]), (name, lines[0])


@pytest.mark.parametrize("task", TASKS)
def test_every_field_of_every_task_config_has_a_check(task):
    _, cls, nested = TASKS[task]
    for config in (cls, *nested.values()):
        assert {f.name for f in fields(config)} == set(checks_of(config)), config.__name__


@pytest.mark.parametrize(
    "argv, named",
    [
        (["train", "--set", "model=null"], "model must be a non-empty string"),
        (["train", "--set", "model=5"], "model must be a non-empty string"),
        (["train", "--set", "augment.erasing=null"], "augment.erasing is a probability in [0, 1], got None"),
        (["train", "--set", "augment_overrides=5"], "augment_overrides must be a mapping of augment fields"),
        (["train", "--set", "out_dir=elsewhere"], "out_dir is set by --out DIR"),
        (["train", "--task", "clip", "--set", 'vision={"depht": 2}'], "vision: unknown vision option(s) ['depht']"),
        (["train", "--task", "clip", "--set", 'vision={"depth": "two"}'], "vision.depth must be an integer"),
        (["train", "--task", "segment", "--set", "model=null"], "model must be a mapping of DenseConfig fields"),
        (["train", "--task", "segment", "--set", "task=detect"], "task is set by --task"),
        (["pretrain", "mae", "--set", "method=dino"], "method is set by vitlab pretrain mae|dino"),
        (["pretrain", "mae", "--set", "mae.mask_ratio=null"], "mae.mask_ratio must be a number"),
    ],
)
def test_the_campaign_examples(argv, named, nothing_trains, capsys):
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], lines


@pytest.mark.parametrize(
    "text, named",
    [
        ("model: null\n", "model must be a non-empty string"),
        ("model_overrides: 5\n", "model_overrides must be a mapping"),
        ("augment: {erasing: null}\n", "augment.erasing is a probability"),
        ("augment_overrides: {jitter: 0.4}\n", "unknown augment option(s) ['jitter']"),
        ("data: {crop_pct: -1}\n", "data.crop_pct must be"),
        ("epochs: '3'\n", "epochs must be an integer"),
    ],
)
def test_a_config_file_goes_through_the_same_checks(text, named, tmp_path, nothing_trains, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(text)
    assert main(["train", "--config", str(config)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], lines


def test_the_api_goes_through_the_same_checks():
    from vitlab.errors import ConfigError

    with pytest.raises(ConfigError, match="model must be a non-empty string"):
        TrainConfig(model=None)
    with pytest.raises(ConfigError, match=r"vision: unknown vision option\(s\) \['depht'\]"):
        CLIPTrainConfig(model_overrides={"vision": {"depht": 2}})
    with pytest.raises(ConfigError, match="data.crop_mode must be"):
        TrainConfig.from_dict({"data": {"crop_mode": "nope"}})
