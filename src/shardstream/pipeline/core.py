"""Stages, declared once: the registry behind both :class:`DataPipeline` and the fluid methods.

:func:`stage` registers a stage and returns its *factory*: ``factory(*args, **kwargs)`` checks the arguments and
returns a :class:`Stage`, a picklable callable ``stage(source) -> iterator``. The same registration adds a fluid
method of the same name to :class:`FluidInterface` (``pipeline.map(f)`` == ``pipeline.compose(map(f))``): nothing
is declared twice. A stage is one of two things, never both:

- a generator function ``fn(source, *args, **kwargs)`` that keeps nothing between the items it yields
  (``state="pass"``: map, select, decode, batched...); a resumable pipeline saves its position through it;
- a :class:`~shardstream.pipeline.cursors.Cursor` class that keeps state (shuffle, repeat, split, slice...): the
  class *is* the stage. Its ``__init__(self, upstream, ...)`` is the stage's signature (the parameters after
  ``upstream``), its docstring the stage's documentation; pipelines make the cursor with
  ``cls(upstream, *args, **kwargs, <given>).simplest()``, and calling the stage on an iterable
  (``shuffle(5)(items)``) does the same over that iterable.

The *given* parameters are the keyword-only parameters of ``__init__`` named in :data:`GIVEN`: the pipeline fills
them, and they are not part of the stage's signature:

- ``ctx``: the :class:`~shardstream.pipeline.context.Context` (seed, epoch, rank and worker) of random choices;
- ``restart``: ``restart(cycle)``, a fresh cursor of the stages before (``repeat``, ``with_epoch``);
- ``name``: the stage's name and position in its pipeline, for messages.

A generator function that needs the context declares ``ctx`` and registers with ``context=True``. Flags on
:class:`StageSpec` tell other code what a stage does (``keeps_count``, ``deals_to``, ``shuffles``...): code asks
those, never a stage's name.

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

A stage that keeps state is a cursor class (here, its state is its count, see ``Counted``):

>>> from shardstream.pipeline.cursors import Counted
>>> class _Numbered(Counted):
...     '''Pair each item with its number, from ``start``.'''
...     fields = ("n",)
...     def __init__(self, upstream, start=0, *, name):
...         super().__init__(upstream, name)
...         self.n = start
...     def __next__(self):
...         item, self.n = next(self.upstream), self.n + 1
...         return self.n - 1, item
>>> numbered = stage(_Numbered)
>>> list(numbered(5)("ab")), numbered.spec.signature
([(5, 'a'), (6, 'b')], <Signature (start=0)>)
>>> unregister("numbered")
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from .adapters import as_cursor
from .context import Context, Source
from .cursors import Cursor, Restart

if TYPE_CHECKING:  # the fluid methods as declarations, generated from this table by scripts/gen_fluid_types.py
    from ._fluid import FluidMethods
else:  # at run time stage() adds them to FluidInterface itself
    FluidMethods = object

__all__ = [
    "GIVEN",
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
#: its position is its input's), a cursor class (the stage's implementation, see the module docstring), or None
#: (no state support: ``state_dict()`` names the stage)
StateKind = Literal["pass"] | type[Cursor] | None

#: the keyword-only parameters of a stage class's ``__init__`` that pipelines fill (see the module docstring)
GIVEN = ("ctx", "restart", "name")

#: how a splitter deals items out, by :func:`~shardstream.pipeline.stages.split.deal`'s rule: between the ranks,
#: between the DataLoader workers of a rank, or everything to the one rank there is (``single_node_only``)
Deal = Literal["ranks", "workers", "one rank"]


@dataclasses.dataclass(frozen=True)
class StageSpec:
    """What :func:`stage` records about a stage: its implementation, how pipelines call it, and what it does (the
    flags other code asks instead of its name)."""

    name: str
    #: the generator ``fn(source, ...)``; None when the cursor class (``state``) is the only implementation
    fn: Callable[..., Iterator[Any]] | None
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
    #: the given parameters (:data:`GIVEN`) its cursor class declares
    given: tuple[str, ...] = ()
    #: a splitter whose share is worked out ahead by ``deal()`` (see :data:`Deal`); None for other stages
    deals_to: Deal | None = None
    shuffles: bool = False  #: shuffles its items, reproducibly from the context (the shard list's shuffle)
    keeps_count: bool = False  #: yields one item per item (as long as no item fails and no map returns None)
    #: ``count(n, **arguments)``: the items ``n`` items make after it (``TypeError`` when unknown)
    count: Callable[..., int] | None = None
    #: ``length(**arguments)``: the length it declares for the whole pipeline (``with_length``)
    length: Callable[..., int] | None = None
    #: ``equal_epochs(**arguments)``: whether every rank yields as many items after it, whatever the shards give:
    #: a fixed number (``with_epoch``) or no end (a ``repeat`` without a count)
    equal_epochs: Callable[..., bool] | None = None

    @property
    def cursor_only(self) -> bool:
        """True when the cursor class is the stage's only implementation (see the module docstring)."""
        return self.fn is None

    @property
    def definition(self) -> Callable[..., Any]:
        """What was registered: the generator function, or the cursor class (its documentation and module)."""
        return self.fn if self.fn is not None else self.state  # type: ignore[return-value]


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
        if spec.fn is None:
            # called on a plain iterable, as a generator would be: no positions to keep (a pipeline keeps them)
            restart = (lambda cycle: as_cursor(source, spec.name, positions=False)) if spec.restarts else None
            upstream = as_cursor(source, spec.name, positions=False)
            return self.cursor_over(upstream, ctx if ctx is not None else Context(), restart, spec.name)
        if spec.context:
            return spec.fn(source, *self.args, ctx=ctx, **self.kwargs)
        return spec.fn(source, *self.args, **self.kwargs)

    def cursor_over(self, upstream: Cursor, ctx: Context, restart: Restart | None, name: str) -> Cursor:
        """The cursor of this stage over ``upstream``: its class called with the stage's arguments and the given
        parameters it declares (see the module docstring)."""
        given = {"ctx": ctx, "restart": restart, "name": name}
        make: Any = self.spec.state
        cursor: Cursor = make(upstream, *self.args, **self.kwargs, **{key: given[key] for key in self.spec.given})
        return cursor.simplest()

    @property
    def arguments(self) -> dict[str, Any]:
        """The stage's arguments by parameter name, defaults included (for code that inspects a pipeline: the
        fused plan, the rules of :class:`StageSpec`).

        >>> from shardstream.pipeline import batched
        >>> batched(4).arguments["batchsize"], batched(4).arguments["partial"]
        (4, True)
        """
        bound = self.spec.signature.bind(*self.args, **self.kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def replace(self, **kwargs: Any) -> Stage:
        """The same stage with some keyword arguments changed.

        >>> from shardstream.pipeline import batched
        >>> batched(4).replace(partial=False)
        batched(4, partial=False)
        """
        return Stage(self.spec, self.args, {**self.kwargs, **kwargs})

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
    factory.__module__ = spec.definition.__module__
    factory.__doc__ = spec.definition.__doc__
    factory.__signature__ = spec.signature  # type: ignore[attr-defined]
    factory.spec = spec  # type: ignore[attr-defined]
    return factory


def _make_fluid_method(spec: StageSpec, factory: Callable[..., Stage]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.compose(factory(*args, **kwargs))

    method.__name__ = spec.name
    method.__qualname__ = f"FluidInterface.{spec.name}"
    where = f"{spec.definition.__module__}.{spec.name}"
    method.__doc__ = f"{_summary(spec.definition.__doc__)}\n\nFluid form of :func:`{where}`: returns a new pipeline."
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = spec.signature.replace(  # type: ignore[attr-defined]
        parameters=[self_param, *spec.signature.parameters.values()], return_annotation=inspect.Signature.empty
    )
    return method


def _public(sig: inspect.Signature, skip: int, given: tuple[str, ...]) -> inspect.Signature:
    """``sig`` without its first ``skip`` parameters (the source; ``self`` and the upstream) and the given ones."""
    params = [p for p in list(sig.parameters.values())[skip:] if p.name not in given]
    return sig.replace(parameters=params, return_annotation=inspect.Signature.empty)


def _init_signature(cls: type[Cursor]) -> inspect.Signature:
    """The signature of a stage class's ``__init__`` (``self``, the upstream, then the stage's parameters)."""
    return inspect.signature(cls.__init__)


def _given(cls: type[Cursor]) -> tuple[str, ...]:
    """The given parameters a stage class's ``__init__`` declares (keyword-only, see :data:`GIVEN`); a
    ``TypeError`` for an ``__init__`` that does not take the upstream first or declares one another way."""
    params = list(_init_signature(cls).parameters.values())
    if len(params) < 2 or params[1].kind not in (params[1].POSITIONAL_ONLY, params[1].POSITIONAL_OR_KEYWORD):
        raise TypeError(f"stage class {cls.__qualname__}: __init__(self, upstream, ...) takes the upstream cursor "
                        "first")
    given = []
    for p in params[2:]:
        if p.name in GIVEN:
            if p.kind is not p.KEYWORD_ONLY:
                raise TypeError(f"stage class {cls.__qualname__}: {p.name!r} is given by the pipeline, so it must "
                                "be keyword-only (after * in __init__)")
            given.append(p.name)
    return tuple(given)


def _stage_name(definition: Callable[..., Any]) -> str:
    """A function's name without leading underscores; a class's, in snake case (``_WithEpoch``: ``with_epoch``)."""
    name = definition.__name__.lstrip("_")
    if isinstance(definition, type) and issubclass(definition, Cursor):
        return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    return name


def _spec_of(definition: Callable[..., Any], name: str | None, **flags: Any) -> StageSpec:
    name, fn = name or _stage_name(definition), definition  # fn: a generator function, unless a Cursor class
    if isinstance(definition, type) and issubclass(definition, Cursor):  # a cursor class: the stage itself
        if flags.get("state") is not None:
            raise TypeError(f"stage {name!r}: a stage class is its own state; do not pass state=")
        given = _given(definition)
        flags.update(state=definition, given=given, context=flags.get("context") or "ctx" in given,
                     restarts=flags.get("restarts") or "restart" in given)
        return StageSpec(name=name, fn=None, signature=_public(_init_signature(definition), 2, given), **flags)
    signature = _public(inspect.signature(definition), 1, ("ctx",))
    state = flags.get("state")
    if isinstance(state, type) and issubclass(state, Cursor):  # a reader: the class is its cursor in pipelines,
        given = _given(state)  # fn its loop over shards when called directly
        mine = _public(_init_signature(state), 2, given)
        if [(p.name, p.kind, p.default) for p in mine.parameters.values()] != \
                [(p.name, p.kind, p.default) for p in signature.parameters.values()]:
            raise TypeError(f"stage {name!r}: its cursor class {state.__qualname__} takes {mine}, the function "
                            f"{signature}: they must take the same arguments")
        flags["given"] = given
    elif state not in ("pass", None):
        raise TypeError(f"stage {name!r}: state= is 'pass', None or a Cursor class, not {state!r} (a stage that "
                        "keeps state is its Cursor class: stage(cls))")
    return StageSpec(name=name, fn=fn, signature=signature, **flags)


def stage(
    definition: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    context: bool = False,
    splits: bool = False,
    restarts: bool = False,
    at_end: bool = False,
    fluid: bool = True,
    state: StateKind = None,
    reads_shards: bool = False,
    deals_to: Deal | None = None,
    shuffles: bool = False,
    keeps_count: bool = False,
    count: Callable[..., int] | None = None,
    length: Callable[..., int] | None = None,
    equal_epochs: Callable[..., bool] | None = None,
) -> Any:
    """Register a stage (see the module docstring); return its factory.

    ``definition`` is a generator function ``fn(source, ...)`` or a :class:`~shardstream.pipeline.cursors.Cursor`
    class. The stage's name is ``name``, or the function's name without leading underscores, or the class's in
    snake case. For a function, ``context=True`` passes ``ctx=`` (a :class:`Context`), and ``state="pass"``
    declares a stage that keeps nothing between the items it yields (a map, a filter, a batcher), so that
    resumable pipelines can save their position through it; a shard reader (``reads_shards=True``) gives its
    cursor class as ``state=`` (it takes the function's arguments). A class declares ``ctx`` and ``restart``
    itself (see :data:`GIVEN`). The other flags are described in :class:`StageSpec`.
    """
    flags = dict(context=context, splits=splits, restarts=restarts, at_end=at_end, fluid=fluid, state=state,
                 reads_shards=reads_shards, deals_to=deals_to, shuffles=shuffles, keeps_count=keeps_count,
                 count=count, length=length, equal_epochs=equal_epochs)

    def register(definition: Callable[..., Any]) -> Callable[..., Stage]:
        spec = _spec_of(definition, name, **flags)
        factory = _make_factory(spec)
        REGISTRY[spec.name] = spec
        if fluid:
            setattr(FluidInterface, spec.name, _make_fluid_method(spec, factory))
        return factory

    return register(definition) if definition is not None else register


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
