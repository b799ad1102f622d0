"""Settings merge in one order: a config file, then options, then ``--set``; ``PREFIX.KEY`` sets a nested field."""

from __future__ import annotations

import pytest

from vitlab.errors import ConfigError
from vitlab.settings import merge_settings, parse_overrides


def test_each_later_source_wins_and_none_is_not_given():
    file = {"lr": 0.1, "epochs": 5, "seed": 1}
    merged = merge_settings(file, {"lr": 0.2, "epochs": None}, ["lr=0.3", "rows=100"])
    assert merged == {"lr": 0.3, "epochs": 5, "seed": 1, "rows": 100}


def test_a_prefixed_key_sets_a_field_of_its_nested_mapping():
    nested = {"augment": "augment_overrides", "data": "data"}
    merged = merge_settings(
        {"data": {"image_size": 32}}, {"data.loader": "memory"}, {"augment.color_jitter": 0.4}, nested
    )
    assert merged == {"data": {"image_size": 32, "loader": "memory"}, "augment_overrides": {"color_jitter": 0.4}}
    assert merge_settings(None, None, ["other.key=1"], nested) == {"other.key": 1}  # not a nested prefix


def test_a_nested_field_that_is_not_a_mapping_is_refused():
    with pytest.raises(ConfigError, match="data must be a mapping of data fields, got 3"):
        merge_settings({"data": 3}, None, ["data.loader=memory"], {"data": "data"})


@pytest.mark.parametrize(("text", "value"), [("depth=4", 4), ("x=[1,2]", [1, 2]), ("p=null", None), ("n=abc", "abc")])
def test_set_values_read_as_json_where_they_parse(text, value):
    assert parse_overrides([text]) == {text.split("=")[0]: value}


@pytest.mark.parametrize("text", ["depth", "=4"])
def test_a_set_without_key_or_value_is_refused(text):
    with pytest.raises(ConfigError, match="--set expects key=value"):
        parse_overrides([text])
