"""The entry point: exit codes, one-line errors, --debug, --quiet, progress bars, python -m shardstream."""

from __future__ import annotations

import argparse
import io
import sys

import pytest
from cli_helpers import run_cli, shell

from shardstream.cli import _common, _options, main


def test_version_and_help(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("shardstream ")
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Exit codes" in out and "create" in out and "verify" in out


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_usage_errors_are_one_line_with_exit_2(inputs, capsys):
    assert main(["split", "dataset.tar"]) == 2  # -o missing
    err = capsys.readouterr().err
    assert err.startswith("shardstream: error: ") and err.count("\n") == 1 and "--help" in err
    assert main(["split", "dataset.tar", "-o", "out.tar", "-n", "2"]) == 2  # no shard pattern
    assert "shard pattern" in capsys.readouterr().err
    assert main(["split", "dataset.tar", "-o", "o-%d.tar", "-n", "2", "--maxcount", "3"]) == 2
    assert main(["split", "dataset.tar", "-o", "o-%d.tar", "--maxsize", "lots"]) == 2
    assert "not a size" in capsys.readouterr().err
    assert main(["info", "dataset.tar", "--key-rule", "(unclosed"]) == 2


def test_data_errors_exit_3_without_traceback(inputs, capsys):
    assert main(["info", "missing.tar"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("shardstream: error: ") and "missing.tar" in err
    assert "Traceback" not in err and err.count("\n") == 1
    (inputs / "garbage.tar").write_bytes(b"\x01" * 1500)
    assert main(["ls", "garbage.tar"]) == 3
    assert "garbage.tar" in capsys.readouterr().err
    assert main(["info", "pipe:exit 7"]) == 3
    assert "status 7" in capsys.readouterr().err


def test_warnings_are_one_line_too(inputs, capsys):
    data = (inputs / "a.tar").read_bytes()
    (inputs / "noend.tar").write_bytes(data[: 4096 * 6])  # every member, no end-of-archive blocks
    assert main(["info", "noend.tar", "--json"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("shardstream: warning: ") and err.count("\n") == 1


def test_debug_shows_the_traceback(inputs, capsys):
    assert main(["--debug", "info", "missing.tar"]) == 3
    assert "Traceback" in capsys.readouterr().err
    assert main(["info", "missing.tar", "--debug"]) == 3  # also after the subcommand
    assert "Traceback" in capsys.readouterr().err


def test_unexpected_errors_are_one_line_too(inputs, capsys, monkeypatch):
    import shardstream.cli.info as info

    def boom(*a, **k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(info, "shard_samples", boom)
    assert main(["ls", "dataset.tar"]) == 3
    err = capsys.readouterr().err
    assert "unexpected RuntimeError: a bug" in err and "--debug" in err and "Traceback" not in err


def test_broken_stdout_exits_141_quietly(inputs, capsys, monkeypatch):
    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["ls", "dataset.tar"]) == 141
    assert capsys.readouterr().err == ""


def test_quiet_silences_summaries(inputs, capsys):
    assert run_cli("cat", "a.tar", "-o", "x.tar") == 0
    assert "wrote 6 samples" in capsys.readouterr().err
    assert run_cli("-q", "cat", "a.tar", "-o", "y.tar") == 0
    assert run_cli("cat", "a.tar", "-o", "z.tar", "--quiet") == 0
    assert capsys.readouterr().err == ""


def test_progress_bars_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    loud, quiet = argparse.Namespace(quiet=False), argparse.Namespace(quiet=True)
    assert _common.progress_enabled(loud, Tty()) is True
    assert _common.progress_enabled(quiet, Tty()) is False
    assert _common.progress_enabled(loud, io.StringIO()) is False


def test_progress_bar_draws_on_a_terminal(inputs, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["split", "dataset.tar", "--maxcount", "5", "-o", "p-%03d.tar"]) == 0
    assert "split" in err.getvalue() and "samples" in err.getvalue()


def test_sizes_and_descriptions():
    assert _common.parse_size("2K") == 2048 and _common.parse_size("3MB") == 3 << 20
    with pytest.raises(argparse.ArgumentTypeError):
        _common.parse_size("-1")
    assert _options.describe("A ``x`` and :func:`~a.b.c`.\n\n>>> 1\n1") == "A 'x' and c."


def test_python_dash_m_and_console_script(inputs):
    r = shell(f"{sys.executable} -m shardstream info dataset.tar --json", inputs)
    assert r.returncode == 0 and b'"samples": 20' in r.stdout
    r = shell("shardstream verify nothing-here.tar", inputs)
    assert r.returncode == 1 and b"cannot open" in r.stdout
    r = shell("shardstream info nothing-here.tar", inputs)
    assert r.returncode == 3 and r.stderr.decode().startswith("shardstream: error: ")
    r = shell("shardstream ls dataset.tar | head -n 1", inputs)
    assert r.returncode == 0 and r.stdout.startswith(b"d000000\t")


def test_reading_stdin_from_a_terminal_is_refused(inputs, capsys, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Tty())
    assert main(["info", "-"]) == 2
    assert "terminal" in capsys.readouterr().err


def test_stdin_only_once(inputs, capsys):
    assert main(["cat", "-", "-", "-o", "x.tar"]) == 2
    assert "only once" in capsys.readouterr().err


def test_brace_patterns_expand(inputs, capsys):
    assert main(["info", "shards-{000000..000003}.tar", "--json"]) == 0
    assert '"samples": 20' in capsys.readouterr().out


@pytest.fixture
def http_server(inputs):
    """The inputs served over HTTP on 127.0.0.1 (a thread; no network needed)."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(inputs))
    handler.log_message = lambda *a: None  # type: ignore[assignment]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_remote_urls_go_through_shardstream_io(inputs, http_server, capsys):
    assert main(["info", f"{http_server}/dataset.tar", "--json"]) == 0
    assert '"samples": 20' in capsys.readouterr().out
    assert main(["cat", f"{http_server}/a.tar", "b.tar", "-o", "ab.tar"]) == 0
    assert main(["verify", "-q", f"{http_server}/ab.tar"]) == 0
    assert main(["verify", "-q", f"{http_server}/missing.tar"]) == 1
    assert "404" in capsys.readouterr().out


def test_commands_that_read_and_write_shards_do_not_import_torch(inputs):
    """torch takes seconds to import: the CLI pulls it in only where a pipeline is built (``cat --spec``)."""
    probe = ("import sys, runpy; sys.argv = ['shardstream', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('shardstream', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('torch' in sys.modules, file=sys.stderr)")
    for args in ("--help", "info dataset.tar", "cat dataset.tar -o copy.tar"):
        r = shell(f"{sys.executable} -c \"{probe}\" {args}", inputs)
        assert r.stderr.decode().strip().splitlines()[-1] == "False", (args, r.stderr.decode())
