"""Every file of a comparison goes through write_file; a study folder refuses what it must."""

import os

import pytest

from vitlab.errors import DataError, RunFolderError
from vitlab.experiments.files import open_study, write_file


def test_write_file_makes_the_folder_and_leaves_no_temporary(tmp_path):
    path = write_file(tmp_path / "a" / "b" / "report.md", "héllo\n")
    assert path.read_text() == "héllo\n"
    write_file(path, b"\x89PNG")
    assert path.read_bytes() == b"\x89PNG" and os.listdir(path.parent) == ["report.md"]


def test_a_study_folder_is_refused_under_a_file_or_over_another_study(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(DataError, match="is a file, not a folder"):
        open_study(tmp_path / "file" / "study", {})
    open_study(tmp_path / "study", {"study": "a"}).close()
    with pytest.raises(RunFolderError, match="already holds a compare run"):
        open_study(tmp_path / "study", {"study": "b"})
    open_study(tmp_path / "study", {"study": "b"}, overwrite=True).close()
