"""Stages, declared once: the registry behind both :class:`DataPipeline` and the fluid methods.

A stage is a generator function ``fn(source, *args, **kwargs)`` over an iterator. :func:`stage` registers it
and returns its *factory*: ``factory(*args, **kwargs)`` checks the arguments and returns a :class:`Stage`, a
picklable callable ``stage(source) -> iterator``. The same registration adds a fluid method of the same name
to :class:`FluidInterface` (``pipeline.map(f)`` == ``pipeline.compose(map(f))``): nothing is declared twice.

A stage is one of two things, never both:

- a generator function that keeps nothing between the items it yields (``state="pass"``: map, select, decode,
  batched...); a resumable pipeline saves its position through it;
- a :class:`~shardstream.pipeline.cursors.Cursor` class that keeps state (shuffle, repeat, split, slice...): its
  factory, ``state=factory``, is the stage's *only* implementation. ``fn`` then only declares the signature and the
  documentation, and calling the stage on an iterable (``shuffle(5)(items)``) builds the cursor.

Stages that make random choices, or that split data between ranks and workers, receive a
:class:`~shardstream.pipeline.context.Context` (``ctx=``): the seed, the epoch, the rank and worker.

>>> @stage
... def _twice(source, n=2):
...     '''Repeat each item n times.'''
...     for item in source:
...         yield from [item] * n
>>> twice = _twice
>>> list(twice(3)([1, 2]))
[1, 1, 1, 2, 2, 2]
>>> "twice" in REGISTRY and hasattr(FluidInterface, "twice")
True
>>> unregister("twice")
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from .adapters import as_cursor
from .context import Context, Source
from .cursors import CursorFactory

if TYPE_CHECKING:  # the fluid methods as declarations, generated from this table by scripts/gen_fluid_types.py
    from ._fluid import FluidMethods
else:  # at run time stage() adds them to FluidInterface itself
    FluidMethods = object

__all__ = [
    "REGISTRY",
    "Context",
    "FluidInterface",
    "Source",
    "Stage",
    "StageSpec",
    "StateKind",
    "pipelinefilter",
    "stage",
    "unregister",
]

#: how a resumable pipeline saves a stage's position: ``"pass"`` (it keeps nothing between the items it yields:
#: its position is its input's), a cursor factory (the stage's implementation, see
#: :mod:`~shardstream.pipeline.cursors`), or None (no state support: ``state_dict()`` names the stage)
StateKind = Literal["pass"] | CursorFactory | None


@dataclasses.dataclass(frozen=True)
class StageSpec:
    """What :func:`stage` records about a stage: its function and how pipelines must call it."""

    name: str
    fn: Callable[..., Iterator[Any]]
    signature: inspect.Signature
    context: bool = False  #: takes ``ctx=`` (a Context)
    splits: bool = False  #: gives each rank/worker its own part of the data
    restarts: bool = False  #: iterates its source several times (gets a re-iterable upstream)
    at_end: bool = False  #: fluid calls keep it at the end of the pipeline (epoch-level stages)
    fluid: bool = True  #: has a fluid method
    state: StateKind = None  #: how its position is saved (see :data:`StateKind`)
    #: reads shards (``tarfile_to_samples``): the stages before it are replayed (URLs are cheap), its cursor
    #: reopens a shard to restore; ``fn`` stays its reading loop over a list of shards
    reads_shards: bool = False

    @property
    def cursor_only(self) -> bool:
        """True when the cursor factory is the stage's only implementation (see the module docstring)."""
        return callable(self.state) and not self.reads_shards


class Stage:
    """A stage with its arguments bound: ``stage(source) -> iterator`` (``ctx`` is given by pipelines).

    >>> from shardstream.pipeline import shuffle
    >>> s = shuffle(10, seed=1); sorted(s(range(5)))
    [0, 1, 2, 3, 4]
    """

    __slots__ = ("spec", "args", "kwargs")

    def __init__(self, spec: StageSpec, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None):
        self.spec, self.args, self.kwargs = spec, args, dict(kwargs or {})

    def __call__(self, source: Iterable[Any], ctx: Context | None = None) -> Iterator[Any]:
        spec = self.spec
        if ctx is None and spec.context:
            ctx = Context.current()
        if spec.cursor_only:
            here = ctx if ctx is not None else Context()
            # called on a plain iterable, as a generator would be: no positions to keep (a pipeline keeps them)
            restart = (lambda cycle: as_cursor(source, spec.name, positions=False)) if spec.restarts else None
            upstream = as_cursor(source, spec.name, positions=False)
            return spec.state(upstream, self, here, restart, spec.name)  # type: ignore[misc,operator]
        if spec.context:
            return spec.fn(source, *self.args, ctx=ctx, **self.kwargs)
        return spec.fn(source, *self.args, **self.kwargs)

    @property
    def splits(self) -> bool:
        return self.spec.splits

    @property
    def restarts(self) -> bool:
        return self.spec.restarts

    @property
    def at_end(self) -> bool:
        return self.spec.at_end

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.spec, self.args, self.kwargs)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.spec, self.args, self.kwargs = state

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.spec.name}({', '.join(parts)})"


REGISTRY: dict[str, StageSpec] = {}


class FluidInterface(FluidMethods):
    """Mixin with one method per registered stage; each returns ``self.compose(stage(...))``.

    The methods are generated by :func:`stage` from the stage's own signature and docstring. Type checkers and IDEs
    see them as declared in :mod:`._fluid`, which ``scripts/gen_fluid_types.py`` writes from the same table.
    """

    def compose(self, *stages: Callable[..., Any]) -> Any:  # pragma: no cover - implemented by DataPipeline
        raise NotImplementedError


def _summary(doc: str | None) -> str:
    """The docstring up to its first example (fluid methods do not repeat the stage's doctests)."""
    lines = []
    for line in (inspect.cleandoc(doc) if doc else "").splitlines():
        if line.lstrip().startswith(">>>"):
            break
        lines.append(line)
    return "\n".join(lines).strip()


def _make_factory(spec: StageSpec) -> Callable[..., Stage]:
    def factory(*args: Any, **kwargs: Any) -> Stage:
        try:
            spec.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{spec.name}(): {e}") from None
        return Stage(spec, args, kwargs)

    factory.__name__ = factory.__qualname__ = spec.name
    factory.__module__ = spec.fn.__module__
    factory.__doc__ = spec.fn.__doc__
    factory.__signature__ = spec.signature  # type: ignore[attr-defined]
    factory.spec = spec  # type: ignore[attr-defined]
    return factory


def _make_fluid_method(spec: StageSpec, factory: Callable[..., Stage]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.compose(factory(*args, **kwargs))

    method.__name__ = spec.name
    method.__qualname__ = f"FluidInterface.{spec.name}"
    where = f"{spec.fn.__module__}.{spec.name}"
    method.__doc__ = f"{_summary(spec.fn.__doc__)}\n\nFluid form of :func:`{where}`: returns a new pipeline."
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = spec.signature.replace(  # type: ignore[attr-defined]
        parameters=[self_param, *spec.signature.parameters.values()], return_annotation=inspect.Signature.empty
    )
    return method


def _spec_of(fn: Callable[..., Any], name: str | None, **flags: Any) -> StageSpec:
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())[1:]  # drop the source
    params = [p for p in params if p.name != "ctx"]
    return StageSpec(
        name=name or fn.__name__.lstrip("_"),
        fn=fn,
        signature=sig.replace(parameters=params, return_annotation=inspect.Signature.empty),
        **flags,
    )


def stage(
    fn: Callable[..., Iterator[Any]] | None = None,
    *,
    name: str | None = None,
    context: bool = False,
    splits: bool = False,
    restarts: bool = False,
    at_end: bool = False,
    fluid: bool = True,
    state: StateKind = None,
    reads_shards: bool = False,
) -> Any:
    """Register the generator function ``fn(source, ...)`` as a stage; return its factory.

    The stage's name is ``name`` or the function's name without leading underscores. ``context=True`` passes
    ``ctx=`` (a :class:`Context`); the other flags are described in :class:`StageSpec`. ``state="pass"`` declares
    a stage that keeps nothing between the items it yields (a map, a filter, a batcher), so that resumable
    pipelines can save their position through it; ``state=factory`` makes the cursor factory the stage's
    implementation (``fn`` then only gives the signature and the documentation).
    """

    def register(fn: Callable[..., Iterator[Any]]) -> Callable[..., Stage]:
        spec = _spec_of(fn, name, context=context, splits=splits, restarts=restarts, at_end=at_end, fluid=fluid,
                        state=state, reads_shards=reads_shards)
        factory = _make_factory(spec)
        REGISTRY[spec.name] = spec
        if fluid:
            setattr(FluidInterface, spec.name, _make_fluid_method(spec, factory))
        return factory

    return register(fn) if fn is not None else register


def unregister(name: str) -> None:
    """Remove a stage from the registry and its fluid method (for tests and plugins)."""
    spec = REGISTRY.pop(name, None)
    if spec is not None and spec.fluid and name in FluidInterface.__dict__:
        delattr(FluidInterface, name)


def pipelinefilter(fn: Callable[..., Iterator[Any]]) -> Callable[..., Stage]:
    """webdataset's ``pipelinefilter``: curry ``fn(source, *args, **kw)`` into ``factory(*args, **kw)(source)``,
    without registering a fluid method.

    >>> def _add(source, n):
    ...     return (x + n for x in source)
    >>> add = pipelinefilter(_add)
    >>> list(add(10)([1, 2]))
    [11, 12]
    """
    return _make_factory(_spec_of(fn, fn.__name__, fluid=False))
