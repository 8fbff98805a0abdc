"""The examples in every ``shardstream COMMAND --help`` run, in a shell, on the inputs of conftest.py."""

from __future__ import annotations

import re

import pytest
from cli_helpers import shell

from shardstream.cli import build_parser

COMMANDS = ["create", "cat", "split", "shuffle", "sort", "ls", "info", "verify", "extract", "index", "cache", "view"]


def help_text(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([command, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def help_examples(text: str) -> list[str]:
    return re.findall(r"^  \$ (.+)$", text, re.M)


def test_every_command_has_examples(capsys):
    for command in COMMANDS:
        assert len(help_examples(help_text(command, capsys))) >= 2, command


@pytest.mark.parametrize("command", COMMANDS)
def test_help_examples_run(command, inputs, capsys):
    examples = help_examples(help_text(command, capsys))
    for example in examples:
        r = shell(example, inputs)
        assert r.returncode == 0, f"`{example}` exited {r.returncode}\n{r.stdout!r}\n{r.stderr.decode()}"


def test_reshard_is_split(capsys):
    assert "-n N, --shards N" in help_text("reshard", capsys)
