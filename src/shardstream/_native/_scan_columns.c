#include "_scan.h"

/* ---- scan_columns: the walk of scan_samples, its samples appended straight to columns ----
 *
 * The column sink keeps the current sample as (extension, data) pairs pointing into the scanned buffer, and
 * makes a dict only of what leaves C as a sample: the sample in progress when the call ends, and in run mode a
 * sample that does not fit. Two modes:
 * - batch mode (ColumnBatches, reading.py): complete samples go to the batch {"__key__": [...], "__url__": [...],
 *   ext: [bytes, ...]}, which an empty batch takes from its first sample (fields in member order); a sample with
 *   other fields ends the walk before it; the walk also ends when the batch holds `limit` rows. With mode_of
 *   (field -> mode), a field's values are converted by its mode where they are simple, else left bytes, and the
 *   field named in the list returned (the caller decodes those values with the Python codec).
 * - run mode (the pipeline's reader, for fused plans): rows of the wanted fields, each converted by its mode as
 *   slice_column does, appended to one list per field. A sample without one of them (or, with exact, with other
 *   fields too), or with a value that does not convert simply, is handed back as its dict ("odd") and ends the
 *   walk once the next sample has started; the caller's dict path makes its row (or its error). */

#define INLINE_FIELDS 8

typedef struct {
    PyObject *ext;   /* owned */
    const char *data;
    Py_ssize_t size;
    PyObject *owner; /* the bytes object that holds data (owned; a sample carried in from Python), or NULL */
} field;

typedef struct {
    sink base;
    PyObject *url;
    field *f, inline_f[INLINE_FIELDS]; /* the fields of the current sample */
    Py_ssize_t n, cap;
    Py_ssize_t rows, limit;        /* rows added in this call; where to stop */
    PyObject *batch;               /* batch mode: the batch (a dict); NULL in run mode */
    PyObject *key_list, *url_list; /* batch mode: its "__key__" and "__url__" columns (borrowed) */
    PyObject *fields, *lists;      /* run mode: the wanted fields (a tuple of str), their columns (a list of lists) */
    const char *modes;             /* run mode: a conversion mode per wanted field */
    int exact;                     /* run mode: no field besides the wanted ones */
    PyObject *hint[MAX_WANTED];    /* per wanted field (run mode) or position (batch mode): the extension object
                                      last matched (owned), compared by identity before by value */
    PyObject *hint_list[MAX_WANTED]; /* batch mode: that extension's column (borrowed from the batch) */
    int hint_mode[MAX_WANTED];     /* batch mode: and its conversion mode */
    PyObject *mode_of;             /* batch mode: field -> conversion mode (a callable), or NULL: bytes */
    PyObject *raw;                 /* batch mode with mode_of: the fields that got a value left as bytes (a list) */
    PyObject *odd;                 /* run mode: the sample that did not fit (a dict), or NULL */
} column_sink;

static void clear_fields(column_sink *c)
{
    Py_ssize_t i;
    for (i = 0; i < c->n; i++) {
        Py_DECREF(c->f[i].ext);
        Py_XDECREF(c->f[i].owner);
    }
    c->n = 0;
}

static int col_has(sink *s, PyObject *ext)
{
    column_sink *c = (column_sink *)s;
    Py_ssize_t i;
    for (i = 0; i < c->n; i++) {
        int r = same_name(c->f[i].ext, ext);
        if (r != 0)
            return r;
    }
    return 0;
}

static int col_add_owned(column_sink *c, PyObject *ext, const char *data, Py_ssize_t size, PyObject *owner)
{
    if (c->n == c->cap) {
        Py_ssize_t cap = c->cap * 2;
        field *f = PyMem_Malloc((size_t)cap * sizeof(field));
        if (f == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(f, c->f, (size_t)c->n * sizeof(field));
        if (c->f != c->inline_f)
            PyMem_Free(c->f);
        c->f = f;
        c->cap = cap;
    }
    Py_INCREF(ext);
    Py_XINCREF(owner);
    c->f[c->n].ext = ext;
    c->f[c->n].data = data;
    c->f[c->n].size = size;
    c->f[c->n].owner = owner;
    c->n++;
    return 0;
}

static int col_add(sink *s, PyObject *ext, const char *data, Py_ssize_t size)
{
    return col_add_owned((column_sink *)s, ext, data, size, NULL);
}

static int col_start(sink *s, PyObject *key, PyObject *ext, const char *data, Py_ssize_t size)
{
    Py_XSETREF(s->key, key);
    clear_fields((column_sink *)s);
    return col_add(s, ext, data, size);
}

/* The current sample as the dict sink makes it: {"__key__": key, "__url__": url, ext: bytes, ...}. */
static PyObject *col_dict(column_sink *c)
{
    PyObject *d = PyDict_New(), *v;
    Py_ssize_t i;
    if (d == NULL || PyDict_SetItem(d, str_key, c->base.key) < 0 || PyDict_SetItem(d, str_url, c->url) < 0)
        goto fail;
    for (i = 0; i < c->n; i++) {
        v = c->f[i].owner;
        if (v != NULL)
            Py_INCREF(v);
        else if ((v = PyBytes_FromStringAndSize(c->f[i].data, c->f[i].size)) == NULL)
            goto fail;
        if (PyDict_SetItem(d, c->f[i].ext, v) < 0) {
            Py_DECREF(v);
            goto fail;
        }
        Py_DECREF(v);
    }
    return d;
fail:
    Py_XDECREF(d);
    return NULL;
}

/* The column of the batch for the current sample's field i (borrowed) and its conversion mode, or NULL (no error
 * set: not a field of the batch; or an error). */
static PyObject *batch_column(column_sink *c, Py_ssize_t i, int *mode)
{
    PyObject *ext = c->f[i].ext, *column, *m;
    long value = 0;
    if (i < MAX_WANTED && c->hint[i] == ext) {
        *mode = c->hint_mode[i];
        return c->hint_list[i];
    }
    column = PyDict_GetItemWithError(c->batch, ext);
    if (column == NULL)
        return NULL;
    if (!PyList_CheckExact(column)) {
        PyErr_SetString(PyExc_TypeError, "scan_columns: the columns of a batch must be lists");
        return NULL;
    }
    if (c->mode_of != NULL) {
        if ((m = PyObject_CallOneArg(c->mode_of, ext)) == NULL)
            return NULL;
        value = PyLong_AsLong(m);
        Py_DECREF(m);
        if (value == -1 && PyErr_Occurred())
            return NULL;
    }
    *mode = value == 1 || value == 3 ? (int)value : 0;
    if (i < MAX_WANTED) {
        Py_INCREF(ext);
        Py_XSETREF(c->hint[i], ext);
        c->hint_list[i] = column;
        c->hint_mode[i] = *mode;
    }
    return column;
}

/* Field i's value for the batch: converted by its mode, or bytes (the field then goes to c->raw). */
static PyObject *batch_value(column_sink *c, Py_ssize_t i, int mode)
{
    PyObject *item = NULL;
    int r = mode ? convert_value(c->f[i].data, c->f[i].size, mode, &item) : 0;
    if (r < 0)
        return NULL;
    if (r == 0) {
        if (mode && (r = PySequence_Contains(c->raw, c->f[i].ext)) != 1 && (r < 0 || PyList_Append(c->raw, c->f[i].ext) < 0))
            return NULL;
        item = PyBytes_FromStringAndSize(c->f[i].data, c->f[i].size);
    }
    return item;
}

static int append_new(PyObject *list, PyObject *item)
{
    int r;
    if (item == NULL)
        return -1;
    r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

static int batch_done(column_sink *c, int *stop)
{
    Py_ssize_t i;
    int mode;
    if (PyDict_GET_SIZE(c->batch) == 0) { /* the first sample: the batch takes its fields */
        c->key_list = c->url_list = NULL;
        for (i = -2; i < c->n; i++) {
            PyObject *column = PyList_New(0);
            int r = column == NULL ? -1 : PyDict_SetItem(c->batch, i == -2 ? str_key : i == -1 ? str_url : c->f[i].ext,
                                                        column);
            Py_XDECREF(column); /* the batch holds it */
            if (r < 0)
                return -1;
        }
    } else if (PyDict_GET_SIZE(c->batch) != c->n + 2) {
        return 0;
    }
    if (c->key_list == NULL) {
        c->key_list = PyDict_GetItemWithError(c->batch, str_key);
        c->url_list = c->key_list == NULL ? NULL : PyDict_GetItemWithError(c->batch, str_url);
        if (c->url_list == NULL || !PyList_CheckExact(c->key_list) || !PyList_CheckExact(c->url_list)) {
            c->key_list = NULL;
            return PyErr_Occurred() ? -1 : 0;
        }
    }
    for (i = 0; i < c->n; i++) /* every field is one of the batch's (as many: the same set) */
        if (batch_column(c, i, &mode) == NULL)
            return PyErr_Occurred() ? -1 : 0;
    if (PyList_Append(c->key_list, c->base.key) < 0 || PyList_Append(c->url_list, c->url) < 0)
        return -1;
    for (i = 0; i < c->n; i++) {
        PyObject *column = batch_column(c, i, &mode);
        if (column == NULL || append_new(column, batch_value(c, i, mode)) < 0)
            return -1;
    }
    c->rows++;
    *stop = PyList_GET_SIZE(c->key_list) >= c->limit;
    return 1;
}

/* The current sample's field named like wanted field j, or NULL. */
static field *wanted_field(column_sink *c, Py_ssize_t j)
{
    PyObject *want = PyTuple_GET_ITEM(c->fields, j);
    Py_ssize_t i;
    for (i = 0; i < c->n; i++)
        if (c->f[i].ext == c->hint[j])
            return &c->f[i];
    for (i = 0; i < c->n; i++)
        if (same_name(c->f[i].ext, want) > 0) {
            Py_INCREF(c->f[i].ext);
            Py_XSETREF(c->hint[j], c->f[i].ext);
            return &c->f[i];
        }
    return NULL;
}

static int run_done(column_sink *c, int *stop)
{
    Py_ssize_t nwant = PyTuple_GET_SIZE(c->fields), j;
    field *found[MAX_WANTED];
    PyObject *items[MAX_WANTED];

    if (c->exact ? c->n != nwant : c->n < nwant)
        goto odd;
    for (j = 0; j < nwant; j++)
        if ((found[j] = wanted_field(c, j)) == NULL)
            goto odd;
    for (j = 0; j < nwant; j++) {
        int r = convert_value(found[j]->data, found[j]->size, c->modes[j], &items[j]);
        if (r <= 0) {
            while (j-- > 0)
                Py_DECREF(items[j]);
            if (r < 0)
                return -1;
            goto odd;
        }
    }
    for (j = 0; j < nwant; j++)
        if (append_new(PyList_GET_ITEM(c->lists, j), items[j]) < 0) {
            while (++j < nwant)
                Py_DECREF(items[j]);
            return -1;
        }
    c->rows++;
    *stop = c->rows >= c->limit;
    return 1;
odd:
    if ((c->odd = col_dict(c)) == NULL)
        return -1;
    *stop = 1;
    return 1;
}

static int col_done(sink *s, int *stop)
{
    column_sink *c = (column_sink *)s;
    return c->batch != NULL ? batch_done(c, stop) : run_done(c, stop);
}

/* Take the sample in progress that Python hands in (a dict made by this module) as the sink's current one. */
static int col_load(column_sink *c, PyObject *current, PyObject *current_key)
{
    Py_ssize_t i = 0;
    PyObject *k, *v;
    Py_INCREF(current_key);
    c->base.key = current_key;
    while (PyDict_Next(current, &i, &k, &v)) {
        if (PyUnicode_Check(k) && (same_name(k, str_key) > 0 || same_name(k, str_url) > 0))
            continue;
        if (!PyUnicode_Check(k) || !PyBytes_CheckExact(v)) {
            PyErr_SetString(PyExc_TypeError, "scan_columns: the current sample's fields must be str: bytes");
            return -1;
        }
        if (col_add_owned(c, k, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), v) < 0)
            return -1;
    }
    return 0;
}

PyObject *scan_columns(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, need = 0, j;
    PyObject *current, *current_key, *out, *fields = Py_None, *modes = NULL, *result = NULL, *now = NULL;
    int exact = 1;
    grouping g = {NULL, Py_None, NULL, {{NULL}, 0, 0, 0}};
    column_sink c;

    (void)self;
    memset(&c, 0, sizeof c);
    c.base.has = col_has;
    c.base.add = col_add;
    c.base.done = col_done;
    c.base.start = col_start;
    c.f = c.inline_f;
    c.cap = INLINE_FIELDS;
    if (!PyArg_ParseTuple(args, "y*nOO!OOOOOn|OOp", &view, &pos, &c.url, &PySet_Type, &g.seen, &current,
                          &current_key, &g.split, &g.keys, &out, &c.limit, &fields, &modes, &exact))
        return NULL;
    if (check_walk(&view, pos, current, current_key, g.keys, "scan_columns") < 0)
        return NULL;
    c.exact = exact;
    if (fields == Py_None) {
        if (!PyDict_CheckExact(out)) {
            PyErr_SetString(PyExc_TypeError, "scan_columns: the batch must be a dict");
            goto done;
        }
        c.batch = out;
        if (modes != NULL && modes != Py_None) {
            if (!PyCallable_Check(modes)) {
                PyErr_SetString(PyExc_TypeError, "scan_columns: a batch's modes must be a callable or None");
                goto done;
            }
            c.mode_of = modes;
            if ((c.raw = PyList_New(0)) == NULL)
                goto done;
        }
    } else {
        if (!PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) < 1 || PyTuple_GET_SIZE(fields) > MAX_WANTED ||
            !PyList_CheckExact(out) || PyList_GET_SIZE(out) != PyTuple_GET_SIZE(fields) || modes == NULL ||
            !PyBytes_Check(modes) || PyBytes_GET_SIZE(modes) != PyTuple_GET_SIZE(fields)) {
            PyErr_Format(PyExc_ValueError, "scan_columns: fields must be a tuple of 1 to %d str, with a list per "
                         "field and a mode per field", MAX_WANTED);
            goto done;
        }
        for (j = 0; j < PyTuple_GET_SIZE(fields); j++) {
            char mode = PyBytes_AS_STRING(modes)[j];
            if (!PyUnicode_Check(PyTuple_GET_ITEM(fields, j)) || !PyList_CheckExact(PyList_GET_ITEM(out, j)) ||
                (mode != 0 && mode != 1 && mode != 3)) {
                PyErr_SetString(PyExc_ValueError, "scan_columns: fields are str, their columns lists, modes 0, 1 or 3");
                goto done;
            }
        }
        c.fields = fields;
        c.lists = out;
        c.modes = PyBytes_AS_STRING(modes);
    }
    if (current != Py_None && col_load(&c, current, current_key) < 0)
        goto done;
    pos = group_members(view.buf, view.len, pos, &g, &c.base, &need);
    if (pos < 0)
        goto done;
    if (c.base.key != NULL && (now = col_dict(&c)) == NULL)
        goto done;
    result = Py_BuildValue("(nnOOnO)", c.rows, pos, now ? now : Py_None, c.base.key ? c.base.key : Py_None, need,
                           c.raw ? c.raw : c.odd ? c.odd : Py_None);
done:
    Py_XDECREF(c.raw);
    Py_XDECREF(now);
    Py_XDECREF(c.odd);
    clear_fields(&c);
    if (c.f != c.inline_f)
        PyMem_Free(c.f);
    Py_XDECREF(c.base.key);
    for (j = 0; j < MAX_WANTED; j++)
        Py_XDECREF(c.hint[j]);
    clear_cache(&g.cache);
    PyBuffer_Release(&view);
    return result;
}
