#include "_scan.h"

/* ---- the dict sink: scan_samples, samples as {"__key__": key, "__url__": url, ext: bytes, ...} ----
 *
 * The fields of the sample in progress are held here (pending) and its dict is made when it is complete: a copy
 * of a template dict of the same shape (its keys in the same order, the per-sample values None), whose values are
 * then replaced. A copy of a clean dict clones its key table in one block (PyDict_Copy), where inserting each key
 * into a new dict hashes, probes and grows it; the dict is the same either way: the same keys in the same order
 * ("__key__", "__url__", the fields in member order, then "__local_path__" when set) and the same values.
 *
 * On CPython 3.11 to 3.13 (the builds with a GIL) the copy's values are written in its key table directly: a
 * value slot is written only where the slot holds the very key object the template put there and the placeholder
 * None, which the copy is checked for first; a table laid out otherwise (another interpreter version) takes
 * PyDict_SetItem, as on 3.10.
 *
 * A sample that comes in as a dict (the sample in progress of an earlier call), or that has more fields than the
 * pending slots hold, is filled as a dict. A sample in progress when the walk stops leaves as a dict without
 * "__local_path__", which is set when it is complete. */

#define PENDING 16

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && \
    !defined(Py_LIMITED_API) && !defined(PYPY_VERSION)
#define DIRECT_VALUES 1
/* The head of a dict's key table and a slot of a table of str keys, as CPython 3.11-3.13 lay them out. */
typedef struct {
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size, dk_log2_index_bytes, dk_kind;
    uint32_t dk_version;
    Py_ssize_t dk_usable, dk_nentries;
    char dk_indices[];
} key_table;
typedef struct {
    PyObject *me_key, *me_value;
} str_slot;
#define STR_KEYS 1 /* dk_kind of a table whose keys are all str */
#endif

typedef struct {
    sink base;
    PyObject *url, *samples;
    PyObject *current; /* the sample in progress as a dict (owned), or NULL while its fields are pending */
    PyObject *local;   /* the shard's local file: "__local_path__" of each complete sample (None: not set) */
    int n;             /* pending fields of the sample in progress (current == NULL) */
    PyObject *exts[PENDING], *values[PENDING]; /* owned */
    PyObject *shape;   /* the template (owned) or NULL: its values None but for "__url__" and "__local_path__" */
    int shape_n;
    PyObject *shape_exts[PENDING]; /* its field names, borrowed from it: the shape is matched by identity */
} dict_sink;

static void drop_pending(dict_sink *d)
{
    for (int i = 0; i < d->n; i++) {
        Py_DECREF(d->exts[i]);
        Py_DECREF(d->values[i]);
    }
    d->n = 0;
}

/* The sample in progress as a dict: "__key__", "__url__" and its fields; "__local_path__" too when complete. */
static PyObject *fresh_dict(dict_sink *d, int complete)
{
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    if (PyDict_SetItem(out, str_key, d->base.key) < 0 || PyDict_SetItem(out, str_url, d->url) < 0)
        goto fail;
    for (int i = 0; i < d->n; i++)
        if (PyDict_SetItem(out, d->exts[i], d->values[i]) < 0)
            goto fail;
    if (complete && d->local != Py_None && PyDict_SetItem(out, str_local, d->local) < 0)
        goto fail;
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* The pending fields moved into d->current (a sample with more fields than the slots, or one the walk leaves). */
static int to_dict(dict_sink *d)
{
    d->current = fresh_dict(d, 0);
    drop_pending(d);
    return d->current == NULL ? -1 : 0;
}

static int same_shape(dict_sink *d)
{
    if (d->shape == NULL || d->shape_n != d->n)
        return 0;
    for (int i = 0; i < d->n; i++)
        if (d->shape_exts[i] != d->exts[i])
            return 0;
    return 1;
}

/* The template of the pending sample's shape (-1 on error). */
static int new_shape(dict_sink *d)
{
    PyObject *t = PyDict_New();
    if (t == NULL)
        return -1;
    if (PyDict_SetItem(t, str_key, Py_None) < 0 || PyDict_SetItem(t, str_url, d->url) < 0)
        goto fail;
    for (int i = 0; i < d->n; i++)
        if (PyDict_SetItem(t, d->exts[i], Py_None) < 0)
            goto fail;
    if (d->local != Py_None && PyDict_SetItem(t, str_local, d->local) < 0)
        goto fail;
    Py_XSETREF(d->shape, t);
    d->shape_n = d->n;
    for (int i = 0; i < d->n; i++)
        d->shape_exts[i] = d->exts[i]; /* the template holds them */
    return 0;
fail:
    Py_DECREF(t);
    return -1;
}

/* Write the key and the field values into a fresh copy of the template, in its key table: 1 done, 0 where the
 * table is not the one expected (nothing written). */
static int write_values(dict_sink *d, PyObject *out)
{
#ifdef DIRECT_VALUES
    key_table *t = (key_table *)((PyDictObject *)out)->ma_keys;
    str_slot *slot;
    int i;
    if (((PyDictObject *)out)->ma_values != NULL || t->dk_kind != STR_KEYS ||
        t->dk_nentries != d->n + 2 + (d->local != Py_None))
        return 0;
    slot = (str_slot *)(t->dk_indices + ((size_t)1 << t->dk_log2_index_bytes));
    if (slot[0].me_key != str_key || slot[0].me_value != Py_None)
        return 0;
    for (i = 0; i < d->n; i++)
        if (slot[2 + i].me_key != d->exts[i] || slot[2 + i].me_value != Py_None)
            return 0;
    Py_INCREF(d->base.key);
    slot[0].me_value = d->base.key;
    Py_DECREF(Py_None);
    for (i = 0; i < d->n; i++) {
        Py_INCREF(d->values[i]);
        slot[2 + i].me_value = d->values[i];
        Py_DECREF(Py_None);
    }
    return 1;
#else
    (void)d;
    (void)out;
    return 0;
#endif
}

/* The complete sample of the pending fields: a copy of the template, its values replaced. */
static PyObject *complete_dict(dict_sink *d)
{
    PyObject *out;
    if (!same_shape(d) && new_shape(d) < 0)
        return NULL;
    out = PyDict_Copy(d->shape);
    if (out == NULL)
        return NULL;
    if (write_values(d, out))
        return out;
    if (PyDict_SetItem(out, str_key, d->base.key) < 0)
        goto fail;
    for (int i = 0; i < d->n; i++)
        if (PyDict_SetItem(out, d->exts[i], d->values[i]) < 0)
            goto fail;
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static int dict_has(sink *s, PyObject *ext)
{
    dict_sink *d = (dict_sink *)s;
    if (d->current != NULL)
        return PyDict_Contains(d->current, ext);
    for (int i = 0; i < d->n; i++) {
        int r = same_name(d->exts[i], ext);
        if (r != 0)
            return r;
    }
    return 0;
}

static int dict_add(sink *s, PyObject *ext, const char *data, Py_ssize_t size)
{
    dict_sink *d = (dict_sink *)s;
    PyObject *value = PyBytes_FromStringAndSize(data, size);
    int r;
    if (value == NULL)
        return -1;
    if (d->current == NULL && d->n == PENDING && to_dict(d) < 0) {
        Py_DECREF(value);
        return -1;
    }
    if (d->current == NULL) {
        Py_INCREF(ext);
        d->exts[d->n] = ext;
        d->values[d->n++] = value;
        return 0;
    }
    r = PyDict_SetItem(d->current, ext, value);
    Py_DECREF(value);
    return r;
}

static int dict_done(sink *s, int *stop)
{
    dict_sink *d = (dict_sink *)s;
    PyObject *sample;
    int r;
    (void)stop;
    if (d->current != NULL) {
        if (d->local != Py_None && PyDict_SetItem(d->current, str_local, d->local) < 0)
            return -1;
        sample = d->current;
        d->current = NULL;
    } else {
        sample = complete_dict(d);
        if (sample == NULL)
            return -1;
        drop_pending(d);
    }
    r = PyList_Append(d->samples, sample);
    Py_DECREF(sample);
    return r < 0 ? -1 : 1;
}

static int dict_start(sink *s, PyObject *key, PyObject *ext, const char *data, Py_ssize_t size)
{
    dict_sink *d = (dict_sink *)s;
    Py_XSETREF(s->key, key);
    Py_CLEAR(d->current);
    drop_pending(d);
    return dict_add(s, ext, data, size);
}

PyObject *scan_samples(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, need = 0;
    PyObject *current, *current_key, *result = NULL;
    grouping g = {NULL, Py_None, NULL, {{NULL}, 0, 0, 0}};
    dict_sink d;

    (void)self;
    memset(&d, 0, sizeof d);
    d.base = (sink){.has = dict_has, .add = dict_add, .done = dict_done, .start = dict_start};
    d.local = Py_None;
    if (!PyArg_ParseTuple(args, "y*nOO!OOO|OO", &view, &pos, &d.url, &PySet_Type, &g.seen, &current, &current_key,
                          &g.split, &g.keys, &d.local))
        return NULL;
    if (check_walk(&view, pos, current, current_key, g.keys, "scan_samples") < 0)
        return NULL;
    if (current != Py_None) {
        Py_INCREF(current);
        Py_INCREF(current_key);
        d.current = current;
        d.base.key = current_key;
    }
    d.samples = PyList_New(0);
    if (d.samples != NULL) {
        pos = group_members(view.buf, view.len, pos, &g, &d.base, &need);
        if (pos >= 0 && d.base.key != NULL && d.current == NULL && to_dict(&d) < 0)
            pos = -1;
        if (pos >= 0)
            result = Py_BuildValue("(OnOOn)", d.samples, pos, d.current ? d.current : Py_None,
                                   d.base.key ? d.base.key : Py_None, need);
    }
    drop_pending(&d);
    Py_XDECREF(d.shape);
    Py_XDECREF(d.samples);
    Py_XDECREF(d.current);
    Py_XDECREF(d.base.key);
    clear_cache(&g.cache);
    PyBuffer_Release(&view);
    return result;
}
