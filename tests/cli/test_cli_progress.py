"""Progress on a terminal: one display for every command (tqdm, as the processing jobs use): a counter and a
rate when the total is unknown, cleared when done; nothing when stderr is not a terminal or with --quiet."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest


def run_on_terminal(args: list[str], cwd) -> bytes:
    """Run ``shardstream ARGS`` with stderr on a pseudo-terminal; what it drew there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal has a size
    try:
        proc = subprocess.Popen([sys.executable, "-m", "shardstream", *args], cwd=cwd, stderr=slave,
                                stdout=subprocess.DEVNULL)
    finally:
        os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, out
    return out


SLOW = ["cat", "a.tar", "pipe:sleep 0.4; cat b.tar", "-o", "slow.tar"]


def test_counter_when_the_total_is_unknown(inputs):
    drawn = run_on_terminal(SLOW, inputs).decode()
    frames = [f.strip() for f in drawn.split("\r") if f.startswith("cat: ")]
    assert frames and frames[0].startswith("cat: 0 samples [")  # tqdm's counter: count, elapsed, rate
    assert any(" 7 samples [" in f or " 12 samples [" in f for f in frames), frames  # drawn after the wait
    assert drawn.rstrip().endswith("wrote 12 samples (51200 bytes) to slow.tar")


def test_bar_when_the_total_is_known(inputs):
    drawn = run_on_terminal(["info", "a.tar", "b.tar"], inputs).decode()
    frames = [f.strip() for f in drawn.split("\r") if f.startswith("info: ")]
    assert frames and frames[0].startswith("info:   0%|") and "| 0/2 [" in frames[0], frames


@pytest.mark.parametrize("extra", [["--quiet"]])
def test_quiet_on_a_terminal_draws_nothing(inputs, extra):
    assert run_on_terminal([*SLOW, *extra], inputs) == b""


def test_nothing_when_stderr_is_not_a_terminal(inputs):
    r = subprocess.run([sys.executable, "-m", "shardstream", *SLOW], cwd=inputs, capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stderr == b"shardstream: wrote 12 samples (51200 bytes) to slow.tar\n"
