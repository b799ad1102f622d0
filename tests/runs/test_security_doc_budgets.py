"""SECURITY.md's budget, config-value, data-identity and process promises each name tests that exist (paths relative to
``tests/``; a bare name is in the file named before it in the same row)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADINGS = (
    "## Budgets: estimated before anything is allocated",
    "## Config values: one validation, whatever the source",
    "## Data identity: a model is used on the data it knows",
    "## Processes: nothing left running",
)


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else None]


def test_every_budget_and_identity_promise_names_tests_that_exist():
    text = (ROOT / "SECURITY.md").read_text()
    for heading in HEADINGS:
        rows = [line for line in section(text, heading).splitlines() if line.startswith("| **")]
        assert rows, heading
        for row in rows:
            proved_by = row.rstrip(" |").rsplit(" | ", 1)[1]
            names = re.findall(r"`(?:([\w/]+\.py)::)?(test_\w+)`", proved_by)
            assert names and names[0][0], row
            current = None
            for file, name in names:
                current = file or current
                source = (ROOT / "tests" / str(current)).read_text()
                assert re.search(rf"^def {name}\(", source, re.M), f"{current}::{name} named in SECURITY.md"
