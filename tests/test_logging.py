"""The library reports through the ``shardstream`` logger (child loggers per module), never with print.

SHARDSTREAM_VERBOSE / ``verbose=True`` / :func:`log_to_stderr` show the records on stderr; the CLI routes its
diagnostics through the same loggers and shows the library's INFO records with ``-v``.
"""

from __future__ import annotations

import ast
import logging
import os
import pathlib
import subprocess
import sys

import pytest

import shardstream
from shardstream.cli import main
from shardstream.io.cache import ShardCache
from shardstream.logs import log_to_stderr, stop_logging_to_stderr
from shardstream.tar import accelerated
from shardstream.writer import ShardWriter, TarWriter

SRC = pathlib.Path(shardstream.__file__).parent


def write_samples(pattern: str, n: int = 6, maxcount: int = 3, **kw) -> list[str]:
    with ShardWriter(pattern, maxcount=maxcount, **kw) as sink:
        for i in range(n):
            sink.write({"__key__": f"{i:04d}", "txt": f"sample {i}"})
    return sink.shards


def records(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == name]


def test_shardwriter_logs_each_shard_at_info(tmp_path, caplog, capsys):
    caplog.set_level(logging.INFO, logger="shardstream")
    shards = write_samples(str(tmp_path / "s-%d.tar"))
    lines = records(caplog, "shardstream.writer.shardwriter")
    assert lines == [f"writing {shards[0]} (0 samples so far)", f"finished {shards[0]}: 3 samples, 0.0 MB",
                     f"writing {shards[1]} (3 samples so far)", f"finished {shards[1]}: 3 samples, 0.0 MB"]
    assert capsys.readouterr().err == ""  # logged, not printed: nothing on stderr without a handler


def test_nothing_is_shown_by_default(tmp_path, capsys):
    write_samples(str(tmp_path / "s-%d.tar"))
    assert capsys.readouterr() == ("", "")
    assert logging.getLogger("shardstream").getEffectiveLevel() == logging.WARNING


def test_cache_logs_downloads_and_evictions(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="shardstream.io.cache")
    shards = write_samples(str(tmp_path / "s-%d.tar"))
    size = os.path.getsize(shards[0])
    cache = ShardCache(str(tmp_path / "cache"), max_bytes=size)  # room for one shard
    for shard in shards:
        with cache.open(f"pipe:cat {shard}") as stream:
            stream.read()
    lines = records(caplog, "shardstream.io.cache")
    assert [line.split()[0] for line in lines] == ["cached", "cached", "evicted"]
    assert f"pipe:cat {shards[0]}" in lines[0] and f"({size} bytes)" in lines[0]


def test_verbose_objects_show_their_records_on_stderr(tmp_path, capsys):
    write_samples(str(tmp_path / "s-%d.tar"), verbose=1)
    err = capsys.readouterr().err
    assert "shardstream.writer.shardwriter INFO: writing" in err and "INFO: finished" in err


def test_log_to_stderr_is_one_handler_and_can_be_undone(capsys):
    logger = logging.getLogger("shardstream")
    handler = log_to_stderr()
    assert log_to_stderr() is handler and logger.handlers.count(handler) == 1
    logging.getLogger("shardstream.test").info("hello")
    assert capsys.readouterr().err == "shardstream.test INFO: hello\n"
    log_to_stderr("DEBUG")
    assert logger.level == logging.DEBUG
    stop_logging_to_stderr()
    logging.getLogger("shardstream.test").info("hidden")
    assert handler not in logger.handlers and logger.level == logging.NOTSET and capsys.readouterr().err == ""


def test_a_lower_level_set_by_the_program_stays(capsys):
    logger = logging.getLogger("shardstream")
    logger.setLevel(logging.DEBUG)
    log_to_stderr(logging.INFO)
    assert logger.level == logging.DEBUG


@pytest.mark.parametrize("value, shown", [("1", True), ("0", False)])
def test_shardstream_verbose_shows_info_records_on_stderr(tmp_path, value, shown):
    code = ("import shardstream as wds\n"
            "with wds.ShardWriter('v-%d.tar', maxcount=2) as sink:\n"
            "    sink.write({'__key__': 'a', 'txt': 'x'})\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SHARDSTREAM_VERBOSE=value))
    assert r.returncode == 0, r.stderr
    assert ("shardstream.writer.shardwriter INFO: writing v-0.tar" in r.stderr) is shown
    assert ("finished v-0.tar" in r.stderr) is shown and r.stdout == ""


@pytest.mark.parametrize("value, handlers", [("1", 1), ("0", 0), ("maybe", 0)])
def test_shardstream_verbose_adds_the_handler_at_import(value, handlers):
    """Applied by ``import shardstream`` itself (before the program configures logging), though a bare import
    does not load ``logging`` (tests/test_import_cost.py): only when the variable asks for it."""
    code = ("import sys, shardstream, logging\n"
            "print(len(logging.getLogger('shardstream').handlers), 'shardstream.logs' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SHARDSTREAM_VERBOSE=value))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(handlers), str(bool(handlers))]


def test_a_malformed_environment_does_not_break_the_import(tmp_path):
    r = subprocess.run([sys.executable, "-c", "import shardstream"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SHARDSTREAM_VERBOSE="maybe"))
    assert r.returncode == 0 and r.stderr == ""


# -- the command line ---------------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "files").mkdir()
    for i in range(4):
        (tmp_path / "files" / f"{i:04d}.txt").write_text(f"text {i}")
    return tmp_path


@pytest.mark.parametrize("flags", [["-v"], ["create", "-v"]])
def test_cli_verbose_shows_the_library_records(tree, capsys, flags):
    argv = ["create", "files", "-o", "out-%06d.tar", "--maxcount", "2"]
    argv = flags + argv if flags == ["-v"] else [*argv[:1], "-v", *argv[1:]]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "shardstream: writing out-000000.tar (0 samples so far)" in err
    assert "shardstream: finished out-000001.tar: 2 samples" in err


def test_cli_without_verbose_shows_no_library_records(tree, capsys):
    assert main(["-q", "create", "files", "-o", "out-%06d.tar", "--maxcount", "2"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_restores_the_logger(tree, capsys):
    logger = logging.getLogger("shardstream")
    before = logger.level, logger.propagate, list(logger.handlers)
    TarWriter("t.tar").close()
    assert main(["-v", "info", "t.tar"]) == 0
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


# -- no print in the library ----------------------------------------------------------------------------------

#: programs, not library code: the demo prints its progress, the CLI its results (on stdout) and summary lines
PROGRAMS = {"demo.py", "__main__.py"}


def _prints(path: pathlib.Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "print":
            to = next((ast.unparse(k.value) for k in node.keywords if k.arg == "file"), "sys.stdout")
            found.append((node.lineno, f"print(file={to})"))
        elif isinstance(func, ast.Attribute) and func.attr == "write" and ast.unparse(func.value) == "sys.stderr":
            found.append((node.lineno, "sys.stderr.write"))
    return found


def test_the_library_does_not_print():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative in PROGRAMS:
            continue
        for line, what in _prints(path):
            in_cli = relative.startswith("cli/")
            if in_cli and "stderr" not in what:
                continue  # the command's results on stdout
            if relative == "cli/_common.py" and what == "print(file=sys.stderr)":
                continue  # message(): the one place for the summary lines (-q drops them)
            offenders.append(f"{relative}:{line}: {what}")
    assert offenders == [], "use logging.getLogger(__name__) instead:\n" + "\n".join(offenders)


# -- where things happen: the C walk, offline jobs, converters (the network: tests/io/test_io_logs.py) ----------


@pytest.mark.skipif(not accelerated(), reason="the C extension is not built or is off")
def test_the_c_grouping_says_when_it_hands_a_shard_over_to_python(tmp_path, caplog):
    shard = str(tmp_path / "big.tar")
    with TarWriter(shard) as sink:
        sink.write({"__key__": "a", "txt": "small"})
        sink.write({"__key__": "b", "bin": bytes(2 << 20)})  # a member too large for the C grouping
    caplog.set_level(logging.DEBUG, logger="shardstream.reading")
    assert len(list(shardstream.WebDataset(shard, shardshuffle=False))) == 2
    assert records(caplog, "shardstream.reading") == [
        f"{shard}: the C grouping hands the rest over to Python at byte 1024: a member of {(2 << 20) + 512} bytes"]
    caplog.clear()
    assert len(list(shardstream.WebDataset(shard, shardshuffle=False, keys="last-dot"))) == 2
    assert records(caplog, "shardstream.reading") == ["samples grouped in Python: the key rule is not the default one"]


def _fails_once(sample, _marks={}):  # noqa: B006 - the inline engine runs it in this process: one failure per key
    if sample["__key__"] == "0001" and not _marks.get("failed"):
        _marks["failed"] = True
        raise RuntimeError("a flaky sample")
    return sample


def test_a_job_logs_its_tasks_start_finish_retry_and_reuse(tmp_path, caplog):
    from shardstream.process import map_dataset

    shards = write_samples(str(tmp_path / "in-%d.tar"), n=6, maxcount=3)
    caplog.set_level(logging.DEBUG, logger="shardstream.process")
    map_dataset(shards, str(tmp_path / "out"), _fails_once, engine="inline", progress=False)
    lines = records(caplog, "shardstream.process.job")
    assert lines[0] == "running 2 tasks on InlineEngine (0 complete already)"
    assert f"task 0 ({shards[0]}): started" in lines and f"task 0 ({shards[0]}): started (attempt 2)" in lines
    retry = next(r for r in caplog.records if "retrying" in r.getMessage())
    assert retry.levelno == logging.WARNING and retry.getMessage().startswith(
        f"task 0 ({shards[0]}) failed on attempt 1 of 3 (")
    assert "RuntimeError: a flaky sample" in retry.getMessage()
    assert any(line.startswith(f"task 1 ({shards[1]}) finished: 3 samples read, 3 written, 1 shards") for line in lines)
    caplog.clear()
    map_dataset(shards, str(tmp_path / "out"), _fails_once, engine="inline", progress=False)
    assert records(caplog, "shardstream.process.job")[:2] == [
        f"task 0 ({shards[0]}): complete already (its manifest is current), not run again",
        f"task 1 ({shards[1]}): complete already (its manifest is current), not run again"]


def _always_fails(sample):
    raise ValueError("broken")


def test_a_task_that_fails_after_its_retries_is_an_error_record(tmp_path, caplog):
    from shardstream.process import map_dataset

    shards = write_samples(str(tmp_path / "in-%d.tar"), n=3, maxcount=3)
    caplog.set_level(logging.INFO, logger="shardstream.process")
    with pytest.raises(shardstream.ProcessingError):
        map_dataset(shards, str(tmp_path / "out"), _always_fails, engine="inline", retries=1, progress=False)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [f"task 0 ({shards[0]}) failed after 2 attempts: ValueError: broken"]


def test_a_conversion_logs_its_start_and_its_end(tmp_path, caplog):
    from shardstream.convert import convert

    (tmp_path / "rows.jsonl").write_text("".join(f'{{"id": {i}, "text": "row {i}"}}\n' for i in range(5)))
    caplog.set_level(logging.INFO, logger="shardstream")
    result = convert(str(tmp_path / "rows.jsonl"), str(tmp_path / "out"), engine="inline", progress=False)
    lines = records(caplog, "shardstream.convert")
    assert lines[0].startswith(f"converting {tmp_path / 'rows.jsonl'} (") and lines[0].endswith(
        f") to shards under {tmp_path / 'out'}: 1 tasks")
    assert lines[1] == f"converted {tmp_path / 'rows.jsonl'}: 5 samples in {len(result.shards)} files under " \
                       f"{tmp_path / 'out'} (0 skipped)"
    assert any(r.name == "shardstream.process.job" and "finished" in r.getMessage() for r in caplog.records)


# -- progress= on the library's long operations ----------------------------------------------------------------


@pytest.mark.parametrize("progress", [True, False, None])  # None: shown when stderr is a terminal (not here)
def test_index_dataset_shows_its_progress_when_asked(tmp_path, capsys, caplog, progress):
    from shardstream.indexed import index_dataset

    shards = write_samples(str(tmp_path / "s-%d.tar"), n=6, maxcount=3)
    caplog.set_level(logging.DEBUG, logger="shardstream.indexed")
    index = index_dataset(shards, str(tmp_path / "index.json"), progress=progress)
    assert [s.samples for s in index.shards] == [3, 3]
    err = capsys.readouterr().err
    assert ("indexing" in err and "2/2" in err) is bool(progress)
    assert records(caplog, "shardstream.indexed.dataset_index") == [
        f"built the index of {shards[0]}: 3 samples", f"built the index of {shards[1]}: 3 samples",
        f"wrote the dataset index {tmp_path / 'index.json'}: 2 shards (2 indexes built, 0 reused), 6 samples"]


@pytest.mark.parametrize("shuffle, what", [("global", "indexing"), ("stream", "counting")])
def test_training_dataset_shows_its_progress_while_it_indexes_the_shards(tmp_path, capsys, caplog, shuffle, what):
    from shardstream import TrainingDataset

    shards = write_samples(str(tmp_path / "s-%d.tar"), n=6, maxcount=3)
    caplog.set_level(logging.INFO, logger="shardstream.training")
    dataset = TrainingDataset(shards, batch_size=2, shuffle=shuffle, progress=True)
    assert list(dataset.lengths) == [3, 3]
    err = capsys.readouterr().err
    assert what in err and "2/2" in err
    built = records(caplog, "shardstream.training.sources")
    assert len(built) == (2 if shuffle == "global" else 0)
    assert all(line.startswith(f"built the index of {shard} (3 samples): ") for line, shard in zip(built, shards))
    TrainingDataset(shards, batch_size=2, shuffle=shuffle, progress=False)
    assert capsys.readouterr().err == ""
