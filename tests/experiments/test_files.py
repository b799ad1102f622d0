"""Every file of a comparison goes through write_file; a folder that cannot be made is refused early."""
import os

import pytest

from vitlab.errors import ConfigError
from vitlab.experiments.files import check_out_dir, write_file


def test_write_file_makes_the_folder_and_leaves_no_temporary(tmp_path):
    path = write_file(tmp_path / "a" / "b" / "report.md", "héllo\n")
    assert path.read_text() == "héllo\n"
    write_file(path, b"\x89PNG")
    assert path.read_bytes() == b"\x89PNG" and os.listdir(path.parent) == ["report.md"]


def test_check_out_dir(tmp_path):
    check_out_dir(tmp_path / "new" / "deeper")           # can be made: fine, and nothing is made yet
    assert not (tmp_path / "new").exists()
    (tmp_path / "file").write_text("")
    for bad in (tmp_path / "file", tmp_path / "file" / "study"):
        with pytest.raises(ConfigError, match="is a file, not a folder"):
            check_out_dir(bad)
