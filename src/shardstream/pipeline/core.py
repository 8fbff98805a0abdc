"""Stages, declared once: the registry behind both :class:`DataPipeline` and the fluid methods.

A stage is a generator function ``fn(source, *args, **kwargs)`` over an iterator. :func:`stage` registers it
and returns its *factory*: ``factory(*args, **kwargs)`` checks the arguments and returns a :class:`Stage`, a
picklable callable ``stage(source) -> iterator``. The same registration adds a fluid method of the same name
to :class:`FluidInterface` (``pipeline.map(f)`` == ``pipeline.compose(map(f))``): nothing is declared twice.

Stages that make random choices, or that split data between ranks and workers, receive a :class:`Context`
(``ctx=``): the seed, the epoch, the rank and worker, and whether their input is still the same in every
worker. Every random choice comes from ``ctx.rng()``, a fresh ``random.Random`` derived from those values:
there is no hidden global random state, and an iteration is reproducible from ``(seed, epoch)``.

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
import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..runtime import Placement, derive_key

__all__ = [
    "REGISTRY",
    "Context",
    "Source",
    "FluidInterface",
    "Stage",
    "StageSpec",
    "pipelinefilter",
    "stage",
    "unregister",
]


@dataclasses.dataclass(frozen=True)
class Context:
    """The inputs of every random or placement-dependent choice a stage makes during one iteration.

    ``cycle`` counts restarts of the upstream within one epoch (``repeat``, ``with_epoch``); ``stage`` is the
    stage's position in its pipeline; ``shared`` is True where the data is still the same in every rank and
    worker (before a splitter), so the random choices there must be the same everywhere too.

    >>> a, b = Context(seed=1, epoch=0), Context(seed=1, epoch=1)
    >>> a.rng().random() == Context(seed=1, epoch=0).rng().random() != b.rng().random()
    True
    """

    seed: int | str = 0
    epoch: int = 0
    placement: Placement = Placement()
    cycle: tuple[int, ...] = ()
    stage: int = 0
    shared: bool = False
    loader_seed: int | None = None

    @classmethod
    def current(cls, seed: int | str | None = None, epoch: int = 0) -> "Context":
        """A context for an iteration starting now, here (rank and worker read from the runtime)."""
        return cls(seed=0 if seed is None else seed, epoch=epoch, placement=Placement.current())

    def replace(self, **changes: Any) -> "Context":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @property
    def rank(self) -> int:
        return self.placement.rank

    @property
    def world_size(self) -> int:
        return self.placement.world_size

    @property
    def worker(self) -> int:
        return self.placement.worker

    @property
    def num_workers(self) -> int:
        return self.placement.num_workers

    def rng(self, *salt: Any) -> random.Random:
        """A new ``random.Random`` seeded with :func:`~shardstream.runtime.derive_key` of (seed, epoch, loader_seed,
        cycle, stage, salt) and, unless ``shared``, the rank and worker."""
        who = () if self.shared else (self.rank, self.worker)
        return random.Random(derive_key(self.seed, self.epoch, self.loader_seed, self.cycle, self.stage, who, salt))


@dataclasses.dataclass(frozen=True)
class StageSpec:
    """What :func:`stage` records about a stage: its generator function and how pipelines must call it."""

    name: str
    fn: Callable[..., Iterator[Any]]
    signature: inspect.Signature
    context: bool = False  #: fn takes ``ctx=`` (a Context)
    splits: bool = False  #: fn gives each rank/worker its own part of the data
    restarts: bool = False  #: fn iterates its source several times (gets a re-iterable upstream)
    at_end: bool = False  #: fluid calls keep it at the end of the pipeline (epoch-level stages)
    fluid: bool = True  #: has a fluid method
    #: how a resumable pipeline saves its position (see :mod:`shardstream.pipeline.cursors`): ``"pass"`` (holds
    #: nothing between items: its position is its input's), ``"reader"`` (reads shards), a cursor factory
    #: ``(upstream, stage, ctx, restart) -> Cursor``, or None (no state support: ``state_dict()`` names it)
    state: Any = None


class Stage:
    """A stage with its arguments bound: ``stage(source) -> iterator`` (``ctx`` is given by pipelines)."""

    __slots__ = ("spec", "args", "kwargs")

    def __init__(self, spec: StageSpec, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None):
        self.spec, self.args, self.kwargs = spec, args, dict(kwargs or {})

    def __call__(self, source: Iterable[Any], ctx: Context | None = None) -> Iterator[Any]:
        if self.spec.context:
            return self.spec.fn(source, *self.args, ctx=ctx if ctx is not None else Context.current(), **self.kwargs)
        return self.spec.fn(source, *self.args, **self.kwargs)

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


class Source:
    """Base of the sources that need the :class:`Context` (shard lists): pipelines call ``iterate(ctx)``;
    iterating one directly uses a context read from the runtime with the source's own seed."""

    seed: int | str | None = None

    def iterate(self, ctx: Context) -> Iterator[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def cursor(self, ctx: Context) -> Any:
        """A cursor over the items of ``iterate(ctx)`` that saves its own position (see
        :mod:`~shardstream.pipeline.cursors`), or None (the default): a resumable pipeline then replays
        ``iterate(ctx)`` up to its position, which suits sources of cheap items such as URLs."""
        return None

    def __iter__(self) -> Iterator[Any]:
        return self.iterate(Context.current(seed=self.seed))


class FluidInterface:
    """Mixin with one method per registered stage; each returns ``self.compose(stage(...))``.

    The methods are generated by :func:`stage` from the stage's own signature and docstring.
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
    state: Any = None,
) -> Any:
    """Register the generator function ``fn(source, ...)`` as a stage; return its factory.

    The stage's name is ``name`` or the function's name without leading underscores. ``context=True`` passes
    ``ctx=`` (a :class:`Context`); the other flags are described in :class:`StageSpec`. ``state="pass"`` declares
    a stage that keeps nothing between the items it yields (a map, a filter, a batcher), so that resumable
    pipelines can save their position through it.
    """

    def register(fn: Callable[..., Iterator[Any]]) -> Callable[..., Stage]:
        spec = _spec_of(fn, name, context=context, splits=splits, restarts=restarts, at_end=at_end, fluid=fluid,
                        state=state)
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
