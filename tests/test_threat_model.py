"""docs/threat-model.md stays true to the tests: every ``tests/FILE::TEST`` it names exists."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "threat-model.md"


def test_every_test_the_page_names_exists():
    named = sorted(set(re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", PAGE.read_text())))
    assert len(named) > 20
    missing = [f"{path}::{name}" for path, name in named
               if not re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.M)]
    assert missing == []
