"""Per-bucket storage settings: endpoint, region, credentials, addressing style, headers, chosen by URL prefix.

Two buckets on two S3 services (or an S3 bucket and an authenticated HTTP server) can be read in one pipeline:
each URL gets the settings of the longest rule prefix that matches it. Rules come from a YAML or TOML file
(``SHARDSTREAM_STORAGE_CONFIG``) and from inline YAML/JSON text (``SHARDSTREAM_STORAGE``), same schema::

    storage:
      - prefix: s3://train-data/            # or: bucket: train-data  (scheme: s3 by default)
        endpoint_url: http://10.0.0.5:7480
        region: us-east-1
        key: AKIA...                        # or profile: name (an AWS config profile)
        secret: ...
        addressing_style: path              # path | virtual | auto
      - bucket: eval-data
        profile: other-account
      - prefix: https://data.example.com/
        headers: {Authorization: "Bearer ..."}
      - prefix: gs://my-bucket/
        options: {project: my-project}      # passed to the fsspec filesystem as they are

Rule keys: ``prefix`` or ``bucket`` (+ ``scheme``), ``endpoint_url``, ``region``, ``key``, ``secret``, ``token``,
``profile``, ``anon``, ``addressing_style``, ``headers``, ``options``. An unknown key is a ConfigError (typos
would otherwise fail silently). Credentials not given here come from each library's usual sources (for S3:
``AWS_*`` variables, ``~/.aws``).

A dataset spec's ``storage:`` (:mod:`shardstream.spec`) is made of *scoped* rules: they apply to the spec's own
shard URLs (and files named after them, such as their indexes), ahead of these rules, and only while the dataset
that reads them exists; any other URL, in the same bucket too, keeps the settings above.

>>> config = StorageConfig.from_text('''
... storage:
...   - bucket: a
...     endpoint_url: http://127.0.0.1:7480
...     addressing_style: path
...   - prefix: s3://a/private/
...     profile: admin
... ''')
>>> config.match("s3://a/private/x.tar").profile, config.match("s3://a/x.tar").endpoint_url
('admin', 'http://127.0.0.1:7480')
>>> config.match("s3://b/x.tar") is None
True
>>> config.match("s3://a/x.tar").fsspec_options("s3")["config_kwargs"]
{'s3': {'addressing_style': 'path'}}
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import Settings, get_settings
from ..errors import ConfigError
from ..redact import is_secret_name, parse_problem, register_secret

__all__ = ["StorageConfig", "StorageRule", "add_storage_rules", "http_headers", "load_storage_config",
           "storage_options"]

_KEYS = {"prefix", "bucket", "scheme", "endpoint_url", "region", "key", "secret", "token", "profile", "anon",
         "addressing_style", "headers", "options"}
_TYPES: dict[str, tuple[type, str]] = {"anon": (bool, "true or false"), "headers": (Mapping, "a mapping"),
                                       "options": (Mapping, "a mapping")}  # the others: strings
_AZURE = ("az://", "abfs://", "abfss://")
_NOT_AZURE = ("endpoint_url", "region", "profile", "addressing_style")  # S3 settings adlfs has no use for
_ALIASES = {"endpoint": "endpoint_url", "region_name": "region", "aws_access_key_id": "key",
            "access_key_id": "key", "aws_secret_access_key": "secret", "secret_access_key": "secret",
            "aws_session_token": "token", "session_token": "token"}


def _register_secrets(values: Mapping[str, Any]) -> None:
    """Every secret of a rule (its ``secret``, ``token``, credential headers and options) is masked wherever
    shardstream shows text from now on (:func:`shardstream.redact.register_secret`)."""
    register_secret(values.get("secret") if isinstance(values.get("secret"), str) else None)
    register_secret(values.get("token") if isinstance(values.get("token"), str) else None)
    for group in ("headers", "options"):
        found = values.get(group)
        if isinstance(found, Mapping):
            for name, value in found.items():
                if isinstance(value, str) and is_secret_name(str(name)):
                    register_secret(value)


@dataclasses.dataclass(frozen=True)
class StorageRule:
    """The settings of one URL prefix (see the module docstring). ``source`` names where it was defined."""

    prefix: str
    endpoint_url: str | None = None
    region: str | None = None
    key: str | None = None
    secret: str | None = dataclasses.field(default=None, repr=False)  # never shown (repr, errors, logs)
    token: str | None = dataclasses.field(default=None, repr=False)
    profile: str | None = None
    anon: bool | None = None
    addressing_style: str | None = None
    headers: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False)  # may hold credentials
    options: tuple[tuple[str, Any], ...] = dataclasses.field(default=(), repr=False)
    source: str = "<code>"
    #: when not empty, the rule applies to these URLs only (and to files named after them: ``URL.ext``, such as a
    #: shard's index), not to the whole prefix: a dataset spec's rules, set by :func:`shardstream.spec.load_spec`
    scope: frozenset[str] = dataclasses.field(default=frozenset(), repr=False)

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any], source: str = "<code>") -> StorageRule:
        """Build a rule from one entry of a settings file."""
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{source}: a storage rule must be a mapping, not {type(entry).__name__}")
        values = {_ALIASES.get(k, k): v for k, v in entry.items()}
        _register_secrets(values)  # before any message can show them: every error and log masks them
        unknown = sorted(set(values) - _KEYS, key=str)
        if unknown:
            raise ConfigError(f"{source}: unknown storage setting(s) {unknown}; known: {sorted(_KEYS)}")
        for name, value in values.items():  # named by its type, never its value: it may be a secret
            wanted, what = _TYPES.get(name, (str, "a string"))
            if value is not None and not isinstance(value, wanted):
                raise ConfigError(f"{source}: the storage setting {name!r} must be {what}, not {type(value).__name__}")
        prefix, bucket, scheme = values.pop("prefix", None), values.pop("bucket", None), values.pop("scheme", "s3")
        if (prefix is None) == (bucket is None):
            raise ConfigError(f"{source}: a storage rule needs exactly one of 'prefix' or 'bucket'; the rule has "
                              f"the keys {sorted(map(str, entry))}")
        if bucket is not None:
            prefix = f"{scheme}://{bucket}/"
        ignored = sorted(k for k in _NOT_AZURE if values.get(k) is not None)
        if str(prefix).lower().startswith(_AZURE) and ignored:
            raise ConfigError(f"{source}: the storage setting(s) {ignored} of {prefix} have no meaning for Azure "
                              "(adlfs would ignore them); give the account in 'options': {connection_string: ...} "
                              "(its BlobEndpoint names a custom endpoint) or {account_name: ..., account_key: ...}")
        style = values.get("addressing_style")
        if style is not None and style not in ("path", "virtual", "auto"):
            raise ConfigError(f"{source}: addressing_style must be path, virtual or auto, got {style!r}")
        headers, options = values.pop("headers", None) or {}, values.pop("options", None) or {}
        if not all(isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in headers.items()):
            raise ConfigError(f"{source}: 'headers' must map header names to strings ({prefix})")
        if not all(isinstance(k, str) for k in options):
            raise ConfigError(f"{source}: the names in 'options' must be strings ({prefix})")
        return cls(prefix=str(prefix), headers=tuple((str(k), str(v)) for k, v in headers.items()),
                   options=tuple(options.items()), source=source, **values)

    def applies_to(self, url: str) -> bool:
        """Whether ``url`` is under the rule's prefix (and, for a scoped rule, one of its URLs or a file named after
        one).

        >>> rule = StorageRule("s3://b/", scope=frozenset({"s3://b/a.tar"}))
        >>> rule.applies_to("s3://b/a.tar"), rule.applies_to("s3://b/a.tar.ssidx"), rule.applies_to("s3://b/c.tar")
        (True, True, False)
        """
        if not url.startswith(self.prefix):
            return False
        return not self.scope or url in self.scope or url.rpartition(".")[0] in self.scope

    def fsspec_options(self, protocol: str) -> dict[str, Any]:
        """Keyword arguments for ``fsspec.filesystem(protocol, ...)`` (s3fs names for ``s3``)."""
        opts: dict[str, Any] = {}
        if protocol == "s3":
            for name in ("endpoint_url", "key", "secret", "token", "profile", "anon"):
                if getattr(self, name) is not None:
                    opts[name] = getattr(self, name)
            if self.region is not None:
                opts["client_kwargs"] = {"region_name": self.region}
            if self.addressing_style is not None:
                opts["config_kwargs"] = {"s3": {"addressing_style": self.addressing_style}}
        elif protocol in ("az", "abfs"):  # adlfs: the account name and key, a SAS token
            for name, option in (("key", "account_name"), ("secret", "account_key"), ("token", "sas_token"),
                                 ("anon", "anon")):
                if getattr(self, name) is not None:
                    opts[option] = getattr(self, name)
        else:
            for name in ("endpoint_url", "token", "anon"):
                if getattr(self, name) is not None:
                    opts[name] = getattr(self, name)
        for name, value in self.options:
            if isinstance(value, Mapping) and isinstance(opts.get(name), dict):
                value = {**opts[name], **value}
            opts[name] = value
        return opts


class StorageConfig:
    """An ordered set of :class:`StorageRule`; :meth:`match` picks the most specific rule that applies."""

    def __init__(self, rules: Iterable[StorageRule] = ()):
        self.rules = tuple(rules)

    @classmethod
    def from_data(cls, data: Any, source: str = "<code>") -> StorageConfig:
        """From parsed YAML/TOML/JSON: ``{"storage": [rule, ...]}`` or a bare list of rules."""
        if data is None:
            return cls()
        if isinstance(data, Mapping):
            unknown = set(data) - {"storage"}
            if unknown:
                raise ConfigError(f"{source}: unknown top-level key(s) {sorted(unknown)}; put rules under 'storage'")
            data = data.get("storage") or []
        if not isinstance(data, list):
            raise ConfigError(f"{source}: 'storage' must be a list of rules")
        return cls(StorageRule.from_dict(entry, source) for entry in data)

    @classmethod
    def from_text(cls, text: str, source: str = "<text>", format: str = "yaml") -> StorageConfig:
        """Parse YAML (which includes JSON) or TOML text."""
        try:
            if format == "toml":
                try:
                    import tomllib  # noqa: PLC0415 - tomllib is Python 3.11+
                except ImportError:  # pragma: no cover - Python 3.10
                    import tomli as tomllib  # noqa: PLC0415 - tomllib's backport, for Python 3.10
                data = tomllib.loads(text)
            else:
                import yaml  # noqa: PLC0415 - only a YAML storage config needs PyYAML

                data = yaml.safe_load(text)
        except ImportError as e:  # pragma: no cover - Python 3.10 without tomli
            raise ConfigError(f"{source}: reading TOML needs Python >= 3.11 or 'tomli'; or write YAML") from e
        except Exception as e:  # the error, not the document's lines it quotes (they may hold a secret)
            raise ConfigError(f"{source}: not valid {format.upper()}: {parse_problem(e)}") from None
        return cls.from_data(data, source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> StorageConfig:
        """Read a ``.yaml``/``.yml``/``.json`` or ``.toml`` file."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"cannot read the storage settings file {path!r}: {e.strerror or e}") from e
        return cls.from_text(text, path, "toml" if path.lower().endswith(".toml") else "yaml")

    def __add__(self, other: StorageConfig) -> StorageConfig:
        return StorageConfig(self.rules + other.rules)

    def match(self, url: str) -> StorageRule | None:
        """The most specific rule that applies to ``url``, or None: a scoped rule (the smallest scope first) before
        any other, then the longest prefix; the first such rule on a tie."""
        best: StorageRule | None = None
        rank: tuple[int, int, int] = (0, 0, -1)
        for rule in self.rules:
            if rule.applies_to(url):
                mine = (1, -len(rule.scope), len(rule.prefix)) if rule.scope else (0, 0, len(rule.prefix))
                if best is None or mine > rank:
                    best, rank = rule, mine
        return best

    def __repr__(self) -> str:
        return f"StorageConfig({[r.prefix for r in self.rules]})"


@functools.lru_cache(maxsize=16)
def _load(path: str | None, mtime: float | None, inline: str | None) -> StorageConfig:
    config = StorageConfig.from_file(path) if path else StorageConfig()
    if inline:
        config = config + StorageConfig.from_text(inline, "SHARDSTREAM_STORAGE")
    return config


#: rules added by code (a dataset spec's ``storage:``), before those of the settings: arguments win. Those of an
#: owner (a spec's shard list) live as long as it does; the others for the process.
_ADDED: tuple[StorageRule, ...] = ()
_OWNED: weakref.WeakKeyDictionary[Any, tuple[StorageRule, ...]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def add_storage_rules(rules: Iterable[StorageRule], owner: Any = None) -> None:
    """Add rules ahead of the settings' (a dataset spec's shard list calls it in every process that reads): for as
    long as ``owner`` lives (weakly referenced; adding again for the same owner replaces its rules), or, without
    one, for the process (adding a rule already added then does nothing).

    >>> class Owner: pass
    >>> owner = Owner()
    >>> add_storage_rules([StorageRule("s3://demo/", region="r1", scope=frozenset({"s3://demo/a.tar"}))], owner)
    >>> load_storage_config().match("s3://demo/a.tar").region, load_storage_config().match("s3://demo/b.tar")
    ('r1', None)
    >>> del owner; load_storage_config().match("s3://demo/a.tar") is None  # gone with its owner
    True
    """
    global _ADDED
    rules = tuple(rules)
    with _LOCK:
        if owner is not None:
            _OWNED[owner] = rules
        else:
            _ADDED += tuple(r for r in rules if r not in _ADDED)


def _added() -> tuple[StorageRule, ...]:
    """The rules added by code now: the process's, then each live owner's (a rule once)."""
    with _LOCK:
        groups = [_ADDED, *_OWNED.values()]
    if len(groups) == 1:
        return _ADDED
    rules: list[StorageRule] = []
    for group in groups:
        rules.extend(r for r in group if r not in rules)
    return tuple(rules)


def load_storage_config(settings: Settings | None = None) -> StorageConfig:
    """The rules added by code (:func:`add_storage_rules`), then those of the settings (file, then inline text),
    re-read when the file changes."""
    settings = settings or get_settings()
    path = settings.storage_config
    mtime = None
    if path:
        try:
            mtime = os.stat(path).st_mtime
        except OSError as e:
            raise ConfigError(f"SHARDSTREAM_STORAGE_CONFIG={path!r}: {e.strerror or e}") from e
    loaded = _load(path, mtime, settings.storage)
    added = _added()
    return StorageConfig(added) + loaded if added else loaded


def storage_options(url: str, protocol: str, settings: Settings | None = None) -> dict[str, Any]:
    """fsspec options for ``url`` from the matching rule (empty when none matches)."""
    rule = load_storage_config(settings).match(url)
    return rule.fsspec_options(protocol) if rule is not None else {}


def http_headers(url: str, settings: Settings | None = None) -> dict[str, str]:
    """HTTP headers for ``url``: ``SHARDSTREAM_HTTP_HEADERS`` first, then those of the matching rule.

    >>> http_headers("https://x/a.tar", Settings(http_headers=("X-Token: abc",)))
    {'X-Token': 'abc'}
    """
    settings = settings or get_settings()
    headers: dict[str, str] = {}
    for number, line in enumerate(settings.http_headers, 1):
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"SHARDSTREAM_HTTP_HEADERS: entry {number} is not 'Name: value' (not shown here: it "
                              "may hold a secret)")
        headers[name.strip()] = value.strip()
        if is_secret_name(name.strip()):
            register_secret(value.strip())
    rule = load_storage_config(settings).match(url)
    if rule is not None:
        headers.update(rule.headers)
    return headers
