"""Data files written by someone else, broken one way at a time: a manifest row with more fields than its header,
a JSON manifest nested past Python's limit, a ``save_to_disk`` folder whose JSON files are the wrong shape; each one
:class:`DataError` line naming the file, never an AttributeError or RecursionError."""

import json

import pytest

from vitlab.data import read_records
from vitlab.errors import DataError

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("m.csv", "path,label\na.png,cat\n,,a note\n", "line 3 has more fields than its header"),
        ("m.csv", "path,label\na.png,cat,x,y\n", "line 2 has more fields"),
        ("m.json", DEEP, "nested too deep"),
        ("m.json", '[{"path": "a.png", "label": ' + DEEP + "}]", "nested too deep"),
    ],
)
def test_a_broken_manifest_is_one_line(name, text, says, tmp_path):
    (tmp_path / name).write_text(text)
    with pytest.raises(DataError, match=says) as err:
        read_records("manifest", tmp_path / name)
    assert "\n" not in str(err.value) and name in str(err.value)


@pytest.mark.parametrize(
    ("file", "obj", "says"),
    [
        ("state.json", [], "state.json: the file"),
        ("state.json", None, "state.json: the file"),
        ("dataset_info.json", {"features": 3}, "dataset_info.json: field 'features'"),
        ("dataset_info.json", "x", "dataset_info.json: the file"),
        ("dataset_dict.json", {"splits": 5}, "dataset_dict.json: field 'splits'"),
    ],
)
def test_a_save_to_disk_folder_with_json_of_the_wrong_shape_is_one_line(file, obj, says, tmp_path):
    pytest.importorskip("datasets")
    (tmp_path / file).write_text(json.dumps(obj))
    with pytest.raises(DataError, match=says) as err:
        read_records("hf", tmp_path)
    assert "\n" not in str(err.value)
