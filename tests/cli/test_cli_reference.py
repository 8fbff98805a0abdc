"""docs/cli.md, the command line reference, is what scripts/gen_cli_reference.py writes from the parsers now: change
a command or an option, then run the script. The page is in the site's navigation."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import shardstream

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = pathlib.Path(shardstream.__file__).parent
SCRIPT = ROOT / "scripts" / "gen_cli_reference.py"


def _env() -> dict[str, str]:
    """This checkout's package first (the script imports it, not another installed copy)."""
    path = os.pathsep.join(p for p in (str(SRC.parent), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path)


def test_the_reference_is_generated_from_the_parsers():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, env=_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_bites(tmp_path):
    """--check fails on a page that differs (run on a copy of the script whose target is elsewhere)."""
    copy = tmp_path / "scripts" / "gen_cli_reference.py"
    copy.parent.mkdir()
    copy.write_text(SCRIPT.read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cli.md").write_text((ROOT / "docs" / "cli.md").read_text().replace("--dry-run", "--dryrun"))
    result = subprocess.run([sys.executable, str(copy), "--check"], env=_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1 and "out of date" in result.stderr


def test_every_command_and_option_is_on_the_page():
    page = (ROOT / "docs" / "cli.md").read_text()
    for command in ("create", "convert", "map", "cat", "split", "shuffle", "sort", "ls", "info", "verify", "extract",
                    "index", "cache", "view"):
        assert f"## `shardstream {command}`" in page, command
    assert "`-o DEST`, `--output DEST`" in page and "`--redo`" in page
    assert "cli.md" in (ROOT / "mkdocs.yml").read_text()
