"""Single augmentation fields on top of a recipe's augmentation: ``augment_overrides`` / ``--set augment.KEY``."""

import json

import pytest

from vitlab.cli.main import main
from vitlab.data import AugmentConfig, load_dataset
from vitlab.errors import ConfigError
from vitlab.tasks.classify import TrainConfig
from vitlab.tasks.classify.task import resolve_augment


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", rows=64)


@pytest.mark.parametrize("augment", ["light", AugmentConfig(erasing=0.25)], ids=["preset", "config"])
def test_overrides_change_one_field_and_keep_the_rest(digits, augment):
    base = resolve_augment(augment, digits)
    config = TrainConfig(augment=augment, augment_overrides={"color_jitter": 0.4})
    resolved = resolve_augment(config.augment, digits, config.augment_overrides)
    assert resolved.color_jitter == 0.4 and base.color_jitter == 0.0
    assert {**vars(resolved), "color_jitter": 0.0} == vars(base)


def test_unknown_fields_and_bad_values_are_refused_when_the_config_is_made():
    with pytest.raises(ConfigError, match=r"unknown augment option\(s\) \['jitter'\]; known: .*color_jitter"):
        TrainConfig(augment_overrides={"jitter": 0.4})
    with pytest.raises(ConfigError, match="color_jitter is a strength in"):
        TrainConfig(augment="none", augment_overrides={"color_jitter": 2})


def test_set_augment_key_reaches_the_run_and_its_config(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--rows", "64", "--epochs", "1", "--set", "depth=1", "--quiet", "--out", str(out)]
    assert main([*args, "--set", "augment.color_jitter=0.3"]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["augment_overrides"] == {"color_jitter": 0.3}
    assert saved["model_overrides"]["depth"] == 1 and "augment.color_jitter" not in saved
    assert main([*args, "--overwrite", "--set", "augment.color_jitter=3"]) == 2
    assert "color_jitter is a strength" in capsys.readouterr().err
