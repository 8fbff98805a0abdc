#include "_scan.h"

/* ---- Chunks: serving the samples of lists one by one (the reader cursor's __next__) ----
 *
 * A base type for the pipeline's shard reader (pipeline/stages/reading.py, ReaderCursor): ``_chunk`` (a list),
 * ``_i`` (the next item of it) and ``_count`` (items served) are its attributes; ``next()`` serves
 * ``_chunk[_i]`` and advances both, and at the end of the list calls ``self._fill()``, which sets the next list
 * (and ``_i``) and returns True, or returns False at the end (StopIteration). The same as the pure-Python
 * ``shardstream.pipeline.bases.PyChunks``, without an interpreter frame per item. The hook it calls is named in
 * _scan.h (HOOK_CHUNKS), the one place in C that names the hooks. */

typedef struct {
    PyObject_HEAD
    PyObject *chunk;
    Py_ssize_t i, count;
} ChunksObject;

PyObject *str_fill; /* "_fill" (interned) */

static PyObject *chunks_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    ChunksObject *self = (ChunksObject *)type->tp_alloc(type, 0);
    (void)args;
    (void)kwds;
    if (self == NULL)
        return NULL;
    self->chunk = PyList_New(0);
    if (self->chunk == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int chunks_traverse(ChunksObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->chunk); /* not the type: a static type (a heap subclass visits itself) */
    return 0;
}

static int chunks_clear(ChunksObject *self)
{
    Py_CLEAR(self->chunk);
    return 0;
}

static void chunks_dealloc(ChunksObject *self)
{
    PyObject_GC_UnTrack(self);
    chunks_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self); /* a heap subclass's dealloc releases its type */
}

static PyObject *chunks_next(ChunksObject *self)
{
    for (;;) {
        PyObject *chunk = self->chunk, *more;
        int ok;
        if (chunk != NULL && PyList_CheckExact(chunk) && self->i >= 0 && self->i < PyList_GET_SIZE(chunk)) {
            PyObject *item = PyList_GET_ITEM(chunk, self->i);
            self->i++;
            self->count++;
            Py_INCREF(item);
            return item;
        }
        if (chunk != NULL && !PyList_CheckExact(chunk)) {
            PyErr_SetString(PyExc_TypeError, "Chunks: _chunk must be a list");
            return NULL;
        }
        more = PyObject_CallMethodNoArgs((PyObject *)self, str_fill);
        if (more == NULL)
            return NULL;
        ok = PyObject_IsTrue(more);
        Py_DECREF(more);
        if (ok <= 0)
            return NULL; /* False: the end (StopIteration); or the error of bool() */
    }
}

static int chunks_set_chunk(ChunksObject *self, PyObject *value, void *closure)
{
    (void)closure;
    if (value == NULL || !PyList_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "_chunk must be a list");
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(self->chunk, value);
    return 0;
}

static PyObject *chunks_get_chunk(ChunksObject *self, void *closure)
{
    (void)closure;
    if (self->chunk == NULL)
        return PyList_New(0);
    Py_INCREF(self->chunk);
    return self->chunk;
}

static PyGetSetDef chunks_getset[] = {
    {"_chunk", (getter)chunks_get_chunk, (setter)chunks_set_chunk, "the list being served", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef chunks_members[] = {
    {"_i", T_PYSSIZET, offsetof(ChunksObject, i), 0, "the next item of _chunk"},
    {"_count", T_PYSSIZET, offsetof(ChunksObject, count), 0, "items served"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject ChunksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shardstream._native._scan.Chunks",
    .tp_basicsize = sizeof(ChunksObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Serves the items of lists one by one; self._fill() gives the next list (see _scan_types.c).",
    .tp_new = chunks_new,
    .tp_dealloc = (destructor)chunks_dealloc,
    .tp_traverse = (traverseproc)chunks_traverse,
    .tp_clear = (inquiry)chunks_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)chunks_next,
    .tp_members = chunks_members,
    .tp_getset = chunks_getset,
};

/* ---- Tally and Relay: the pipeline's per-item steps without an interpreter frame ----
 *
 * Tally is the base type of the splitter cursor (pipeline/stages/split.py, _Split): its attributes ``upstream``,
 * ``index``, ``count``, ``total`` (items read) and ``mine`` (items kept) live here, and ``next()`` reads items of
 * ``upstream`` and keeps every ``count``-th from ``index`` (deal()'s rule); when ``upstream`` ends it calls
 * ``self._ended()`` (which may raise the splitter's errors) and ends. Relay is the base type of the pipeline's
 * iterator (pipeline/iteration.py, PipelineIterator): once ``_started`` is true and ``_chain`` is set, ``next()``
 * serves the items of ``_chain`` and, at its end, sets ``_done`` and drops the chain; otherwise (the first item,
 * no chain yet, the end) it calls ``self._step()``, which does all of that in Python. Their pure-Python twins,
 * with the same behaviour, are shardstream.pipeline.bases.PyTally and PyRelay. Their hooks are named in _scan.h
 * (HOOK_TALLY, HOOK_RELAY). */

PyObject *str_ended, *str_step; /* "_ended", "_step" (interned) */

/* The next item of it: a new reference; NULL with no error at its end (StopIteration is cleared). */
static PyObject *next_of(PyObject *it)
{
    PyObject *item;
    if (it == NULL || !PyIter_Check(it)) {
        PyErr_Format(PyExc_TypeError, "'%.200s' object is not an iterator",
                     it == NULL ? "NoneType" : Py_TYPE(it)->tp_name);
        return NULL;
    }
    item = (*Py_TYPE(it)->tp_iternext)(it);
    if (item == NULL && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_StopIteration))
        PyErr_Clear();
    return item;
}

typedef struct {
    PyObject_HEAD
    PyObject *upstream;
    Py_ssize_t index, count, total, mine;
} TallyObject;

static PyObject *tally_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    TallyObject *self = (TallyObject *)type->tp_alloc(type, 0);
    (void)args;
    (void)kwds;
    if (self != NULL)
        self->count = 1;
    return (PyObject *)self;
}

static int tally_traverse(TallyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->upstream);
    return 0;
}

static int tally_clear(TallyObject *self)
{
    Py_CLEAR(self->upstream);
    return 0;
}

static void tally_dealloc(TallyObject *self)
{
    PyObject_GC_UnTrack(self);
    tally_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tally_next(TallyObject *self)
{
    for (;;) {
        PyObject *item = next_of(self->upstream), *ended;
        if (item == NULL) {
            if (PyErr_Occurred())
                return NULL;
            ended = PyObject_CallMethodNoArgs((PyObject *)self, str_ended);
            Py_XDECREF(ended);
            return NULL; /* the end (StopIteration), or the error _ended() raised */
        }
        self->total++;
        if (self->count <= 1 || (self->total - 1) % self->count == self->index) {
            self->mine++;
            return item;
        }
        Py_DECREF(item);
    }
}

static PyMemberDef tally_members[] = {
    {"upstream", T_OBJECT, offsetof(TallyObject, upstream), 0, "the cursor read"},
    {"index", T_PYSSIZET, offsetof(TallyObject, index), 0, "the part kept"},
    {"count", T_PYSSIZET, offsetof(TallyObject, count), 0, "the number of parts"},
    {"total", T_PYSSIZET, offsetof(TallyObject, total), 0, "items read"},
    {"mine", T_PYSSIZET, offsetof(TallyObject, mine), 0, "items kept"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject TallyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shardstream._native._scan.Tally",
    .tp_basicsize = sizeof(TallyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Keeps every count-th item of upstream from index; self._ended() at its end (see _scan_types.c).",
    .tp_new = tally_new,
    .tp_dealloc = (destructor)tally_dealloc,
    .tp_traverse = (traverseproc)tally_traverse,
    .tp_clear = (inquiry)tally_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)tally_next,
    .tp_members = tally_members,
};

typedef struct {
    PyObject_HEAD
    PyObject *chain;
    char started, done;
} RelayObject;

static int relay_traverse(RelayObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->chain);
    return 0;
}

static int relay_clear(RelayObject *self)
{
    Py_CLEAR(self->chain);
    return 0;
}

static void relay_dealloc(RelayObject *self)
{
    PyObject_GC_UnTrack(self);
    relay_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *relay_next(RelayObject *self)
{
    PyObject *chain = self->chain, *item;
    if (!self->started || chain == NULL || chain == Py_None)
        return PyObject_CallMethodNoArgs((PyObject *)self, str_step);
    Py_INCREF(chain); /* the chain may drop its relay's reference while it runs */
    item = next_of(chain);
    if (item == NULL && !PyErr_Occurred()) { /* the end: shards and DataLoader workers are released now */
        self->done = 1;
        if (self->chain == chain)
            Py_CLEAR(self->chain);
    }
    Py_DECREF(chain);
    return item;
}

static PyMemberDef relay_members[] = {
    {"_chain", T_OBJECT, offsetof(RelayObject, chain), 0, "the cursors served (None: not built, or dropped)"},
    {"_started", T_BOOL, offsetof(RelayObject, started), 0, "whether the first item was asked for"},
    {"_done", T_BOOL, offsetof(RelayObject, done), 0, "whether the iteration ended"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject RelayType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shardstream._native._scan.Relay",
    .tp_basicsize = sizeof(RelayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Serves the items of self._chain once started; self._step() otherwise (see _scan_types.c).",
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)relay_dealloc,
    .tp_traverse = (traverseproc)relay_traverse,
    .tp_clear = (inquiry)relay_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)relay_next,
    .tp_members = relay_members,
};
