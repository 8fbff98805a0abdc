"""A stage that keeps state is declared in one piece: its Cursor class (``stage(cls)``), whose ``__init__`` is the
stage's signature and whose docstring is its documentation; other code asks :class:`StageSpec`'s flags, never a
stage's name."""

from __future__ import annotations

import ast
import inspect
import pathlib
import pickle
import pydoc

import pytest

import shardstream
from shardstream.pipeline import (
    REGISTRY,
    Context,
    DataPipeline,
    FluidInterface,
    Stage,
    batched,
    check_empty,
    core,
    detshuffle,
    repeat,
    rsample,
    shuffle,
    single_node_only,
    slice,
    split_by_node,
    split_by_worker,
    unbatched,
    unlisted,
    with_epoch,
    with_length,
)
from shardstream.pipeline.cursors import Counted, Cursor, IndexCursor, PassCursor
from shardstream.pipeline.stages import equalize  # noqa: F401 - registers equalize (WebDataset's)
from shardstream.pipeline.stages.reading import ReaderCursor

SRC = pathlib.Path(shardstream.__file__).parent


def _is_spec_name(node: ast.AST) -> bool:
    """``<anything>.spec.name`` or ``spec.name``."""
    if not (isinstance(node, ast.Attribute) and node.attr == "name"):
        return False
    value = node.value
    return (isinstance(value, ast.Attribute) and value.attr == "spec") or (
        isinstance(value, ast.Name) and value.id == "spec")


def _has_string(node: ast.AST) -> bool:
    """A string literal, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_has_string(e) for e in node.elts)


def name_checks(tree: ast.AST) -> list[int]:
    """The lines that compare a stage's ``spec.name`` with string literals (``==``, ``!=``, ``in``...)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_spec_name(s) for s in sides) and any(_has_string(s) for s in sides):
                lines.append(node.lineno)
    return lines


def test_no_code_compares_a_stage_name_with_a_string():
    """Stages are told apart by the flags of their StageSpec (or their class), not by ``spec.name == "..."``: a
    name is for messages and the registry."""
    found = {str(path.relative_to(SRC)): lines for path in sorted(SRC.rglob("*.py"))
             if (lines := name_checks(ast.parse(path.read_text(), str(path))))}
    assert found == {}


def test_the_guard_finds_a_name_check():
    code = 'if item.spec.name == "shuffle" or spec.name in ("a", "b") or x.name == "c": pass'
    assert name_checks(ast.parse(code)) == [1, 1]


#: the parameters of the cursor factories that stage classes replaced
FACTORY = ["upstream", "stage", "ctx", "restart", "name"]


def _placeholders(tree: ast.Module) -> list[str]:
    """Module-level functions whose body (after the docstring) only raises NotImplementedError, and cursor
    factories (``shuffle_cursor(upstream, stage, ctx, restart, name)``...)."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            only_raises = len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(
                body[0])
            if only_raises or [a.arg for a in node.args.args] == FACTORY:
                found.append(node.name)
    return found


def test_no_placeholder_and_no_cursor_factory_is_left():
    found = {path.name: names for path in sorted((SRC / "pipeline" / "stages").glob("*.py"))
             if (names := _placeholders(ast.parse(path.read_text())))}
    assert found == {}


CLASS_STAGES = ["check_empty", "detshuffle", "equalize", "repeat", "rsample", "shuffle", "single_node_only", "slice",
                "split_by_node", "split_by_worker", "unbatched", "unlisted", "with_epoch"]


def test_every_stateful_stage_is_its_cursor_class():
    """The registered stages that keep state have no generator: their class is the implementation, and the
    factory's documentation and module are the class's."""
    assert sorted(name for name, spec in REGISTRY.items() if spec.cursor_only) == CLASS_STAGES
    for name in CLASS_STAGES:
        spec = REGISTRY[name]
        assert spec.fn is None and issubclass(spec.state, Cursor) and spec.definition is spec.state
        params = list(inspect.signature(spec.state.__init__).parameters)
        assert params[:2] == ["self", "upstream"]
        assert [p for p in params[2:] if p not in core.GIVEN] == list(spec.signature.parameters), name
        assert set(spec.given) == {p for p in params if p in core.GIVEN}


def test_the_class_gives_the_signature_and_the_documentation():
    spec = REGISTRY["shuffle"]
    assert str(spec.signature) == ("(bufsize: 'int' = 1000, initial: 'int' = 100, seed: 'int | str | None' = None, "
                                   "rng: 'random.Random | None' = None, handler: 'Any' = None)")
    assert spec.context and spec.given == ("ctx", "name")
    assert shuffle.__doc__ == spec.state.__doc__ and shuffle.__module__ == spec.state.__module__
    assert "Shuffle with a buffer of ``bufsize`` items" in FluidInterface.shuffle.__doc__
    assert "Fluid form of :func:`shardstream.pipeline.stages.shuffle.shuffle`" in FluidInterface.shuffle.__doc__
    assert "Shuffle with a buffer" in pydoc.render_doc(shuffle)
    assert REGISTRY["repeat"].restarts and REGISTRY["repeat"].given == ("restart", "name")
    assert str(REGISTRY["slice"].signature) == "(*args: 'int | None')"
    assert str(REGISTRY["split_by_node"].signature) == "(group: 'Any' = None, empty_check: 'bool' = True, *, " \
                                                       "warn_uneven: 'bool' = True)"


def test_arguments_arrive_as_parameters():
    """The class is called with the stage's arguments as they were given, and the given parameters by name."""
    seen = {}

    class _Probe(Counted):
        """Record the arguments."""

        def __init__(self, upstream, a, b=2, *rest, c=3, ctx, name):
            super().__init__(upstream, name)
            seen.update(a=a, b=b, rest=rest, c=c, epoch=ctx.epoch, name=name)

        def __next__(self):
            return next(self.upstream)

    probe = core.stage(_Probe, fluid=False)
    try:
        assert str(probe.spec.signature) == "(a, b=2, *rest, c=3)" and probe.spec.context
        assert list(probe(1, 5, 6, 7, c=8)([1, 2], Context(epoch=4))) == [1, 2]
        assert seen == {"a": 1, "b": 5, "rest": (6, 7), "c": 8, "epoch": 4, "name": "probe"}
        assert list(DataPipeline((1, 2), probe(0))) == [1, 2] and seen["name"] == "stage 1 (probe)"
        with pytest.raises(TypeError, match=r"probe\(\)"):
            probe()
    finally:
        core.unregister("probe")


def test_a_given_parameter_must_be_keyword_only():
    class _Bad(Counted):
        def __init__(self, upstream, ctx):
            super().__init__(upstream, "bad")

    with pytest.raises(TypeError, match="'ctx' is given by the pipeline, so it must be keyword-only"):
        core.stage(_Bad, fluid=False)
    assert "bad" not in REGISTRY


def test_a_reader_cursor_must_take_the_function_arguments():
    def _reads(source, handler=None):
        yield from source

    with pytest.raises(TypeError, match="must take the same arguments"):
        core.stage(_reads, fluid=False, state=ReaderCursor, reads_shards=True)
    assert "reads" not in REGISTRY
    with pytest.raises(TypeError, match="state= is 'pass', None or a Cursor class"):
        core.stage(_reads, fluid=False, state=lambda upstream, stage, ctx, restart, name: upstream)


def test_simplest_cursors_keep_the_states_of_before():
    """Where a stage needs no state for its arguments, its cursor is a pass-through (the state of before: the
    input's, one level down)."""
    ctx = Context()
    for stage in (shuffle(1), shuffle(0), split_by_worker, split_by_node):
        cursor = stage.cursor_over(IndexCursor([1, 2, 3]), ctx, None, "s")
        assert type(cursor) is PassCursor, stage
        assert next(cursor) == 1 and cursor.state_dict() == {"upstream": {"items": 1}}
    cursor = single_node_only.cursor_over(IndexCursor([1, 2]), ctx, None, "s")
    assert isinstance(cursor, PassCursor) and list(cursor) == [1, 2]


def test_flags_say_what_the_names_said():
    """The flags that replaced the name checks, stage by stage (the sets the checks named before)."""
    assert {n for n, s in REGISTRY.items() if s.keeps_count} == {
        "check_empty", "decode", "detshuffle", "equalize", "extract_keys", "log_keys", "map", "map_dict",
        "map_tuple", "rename", "rename_keys", "shuffle", "to_tuple", "xdecode"}
    assert {n: s.deals_to for n, s in REGISTRY.items() if s.deals_to} == {
        "split_by_node": "ranks", "split_by_worker": "workers", "single_node_only": "one rank"}
    assert {n for n, s in REGISTRY.items() if s.splits} == {
        "split_by_node", "split_by_worker", "single_node_only", "custom_splitter"}
    assert {n for n, s in REGISTRY.items() if s.shuffles} == {"shuffle", "detshuffle"}
    assert {n for n, s in REGISTRY.items() if s.count} == {"batched", "slice", "with_epoch"}
    assert {n for n, s in REGISTRY.items() if s.length} == {"with_length"}
    assert {n for n, s in REGISTRY.items() if s.equal_epochs} == {"repeat", "with_epoch"}
    assert len(DataPipeline(range(3), with_length(7))) == 7
    assert [s.spec.equal_epochs(**s.arguments) for s in (repeat(), repeat(2), repeat(2, 5), with_epoch(3))] == [
        True, False, True, True]


ALL_CLASS_STAGES = [shuffle(5, seed=1), detshuffle(4, seed=2, epoch=1), slice(0, 50, 2), rsample(0.8), repeat(2),
                    with_epoch(40), check_empty(), split_by_worker, split_by_node, single_node_only,
                    batched(3, collation_fn=None), unlisted(), batched(2), unbatched()]


def test_class_stages_pickle():
    """Pipelines are pickled for DataLoader workers: a stage of a class pickles by reference to it, and the copy
    gives the same items."""
    pipeline = DataPipeline(tuple(range(30)), *ALL_CLASS_STAGES, seed=3)
    copy = pickle.loads(pickle.dumps(pipeline))
    assert all(isinstance(s, Stage) for s in copy.pipeline[1:])
    assert [s.spec.state for s in copy.pipeline[1:]] == [s.spec.state for s in pipeline.pipeline[1:]]
    assert list(copy) == list(pipeline)


def test_class_stages_run_in_spawned_dataloader_workers():
    """A spawned DataLoader worker unpickles the pipeline (fork would copy it): the same items as here."""
    data = pytest.importorskip("torch.utils.data")

    def pipeline():
        made = DataPipeline(tuple(range(30)), *ALL_CLASS_STAGES, seed=3)
        made.set_epoch(0)
        return made

    expected = [int(x) for x in pipeline()]
    loader = data.DataLoader(pipeline(), batch_size=None, num_workers=1, multiprocessing_context="spawn")
    assert [int(x) for x in loader] == expected
