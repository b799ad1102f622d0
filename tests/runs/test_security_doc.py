"""SECURITY.md's run-folder and config-file promises each name tests that exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = {  # heading -> the test folder its bare names live in (a name with a folder: under tests/), the default file
    "## Run folders: nothing of the user's is touched": ("tests/runs", None),
    "## Config files: a budget before any work": ("tests/cli", "test_config_budget.py"),
}


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else None]


def test_every_promise_names_tests_that_exist():
    text = (ROOT / "SECURITY.md").read_text()
    for heading, (folder, default) in SECTIONS.items():
        rows = [line for line in section(text, heading).splitlines() if line.startswith("| **")]
        assert rows, heading
        for row in rows:
            proved_by = row.rstrip(" |").rsplit(" | ", 1)[1]
            current = default
            names = re.findall(r"`(?:([\w/]+\.py)::)?(test_\w+)`", proved_by)
            assert names, row
            for file, name in names:
                current = file or current
                assert current is not None, row
                source = (ROOT / ("tests" if "/" in current else folder) / current).read_text()
                assert re.search(rf"^def {name}\(", source, re.M), f"{current}::{name} named in SECURITY.md"
