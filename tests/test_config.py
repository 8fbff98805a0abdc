"""config.py is the only reader of the environment; explicit values win."""

import dataclasses
import pathlib

import pytest

import shardstream
from shardstream.config import Settings, choose, get_settings
from shardstream.errors import ConfigError

SRC = pathlib.Path(shardstream.__file__).parent


def test_defaults_without_environment():
    s = Settings.from_env({})
    assert s == Settings()
    assert s.cache_dir is None and s.rank is None and s.http_retries == 5


def test_values_from_environment():
    s = Settings.from_env(
        {
            "SHARDSTREAM_CACHE_DIR": "/c",
            "SHARDSTREAM_CACHE_SIZE": "1.5G",
            "SHARDSTREAM_VERBOSE": "yes",
            "SHARDSTREAM_URL_REWRITES": "gs://b/=/mnt/b/; s3://x/=/mnt/x/",
            "RANK": "1",
            "WORLD_SIZE": "4",
            "UNRELATED": "x",
        }
    )
    assert s.cache_dir == "/c" and s.cache_size == int(1.5 * 2**30) and s.verbose is True
    assert s.url_rewrites == ("gs://b/=/mnt/b/", "s3://x/=/mnt/x/")
    assert (s.rank, s.world_size) == (1, 4)


@pytest.mark.parametrize(
    "env, match",
    [
        ({"SHARDSTREAM_VERBOSE": "maybe"}, "SHARDSTREAM_VERBOSE"),
        ({"RANK": "one"}, "RANK"),
        ({"SHARDSTREAM_CACHE_SIZE": "lots"}, "size"),
    ],
)
def test_bad_values_name_the_variable(env, match):
    with pytest.raises(ConfigError, match=match):
        Settings.from_env(env)


def test_explicit_wins():
    assert choose("/explicit", "/env") == "/explicit"
    assert choose(0, 5) == 0 and choose(False, True) is False
    assert choose(None, 5) == 5


def test_get_settings_reads_the_process_environment(monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_HTTP_RETRIES", "9")
    assert get_settings().http_retries == 9


def test_get_settings_follows_every_change_of_the_environment(monkeypatch):
    """Settings read once are reused only while the environment is the same: any set, change or removal (of any
    variable: ``WDS_*`` values are settings too) is seen by the next call."""
    monkeypatch.setenv("SHARDSTREAM_HTTP_RETRIES", "9")
    first = get_settings()
    assert get_settings() is first  # unchanged environment: not read again
    monkeypatch.setenv("SHARDSTREAM_HTTP_RETRIES", "3")
    assert get_settings().http_retries == 3
    monkeypatch.setenv("WDS_BUCKET", "b1")
    assert ("BUCKET", "b1") in get_settings().url_vars
    monkeypatch.setenv("WDS_BUCKET", "b2")
    assert ("BUCKET", "b2") in get_settings().url_vars
    monkeypatch.delenv("SHARDSTREAM_HTTP_RETRIES")
    monkeypatch.delenv("WDS_BUCKET")
    assert get_settings().http_retries == Settings().http_retries and ("BUCKET", "b2") not in get_settings().url_vars


def test_no_other_module_reads_the_environment():
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "config.py":
            continue
        text = path.read_text()
        if "os.environ" in text or "os.getenv" in text or "environ.get(" in text:
            offenders.append(str(path.relative_to(SRC)))
    assert offenders == [], f"only config.py may read the environment: {offenders}"


def test_every_variable_is_documented_on_the_configuration_page():
    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()  # the checkout's
    for field in dataclasses.fields(Settings):
        name = Settings._ENV_NAMES.get(field.name, "SHARDSTREAM_" + field.name.upper())
        assert f"`{name}`" in page, f"{name} is missing from the table of docs/configuration.md"
