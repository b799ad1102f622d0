"""Command-line interface: one module per sub-command (see :mod:`vitlab.cli.main`), and the
option parsing they share."""
from __future__ import annotations

import json
from typing import Any


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["depth=4", "pos_embed=sincos2d", "widths=[16,32]"]`` -> config overrides: JSON values
    where they parse (numbers, true/false/null, lists), the text otherwise."""
    overrides = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects key=value, got {item!r}: e.g. --set depth=4")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    return overrides
