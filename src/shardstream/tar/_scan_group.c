#include "_scan.h"

/* ---- grouping members into samples with the default key rule (samples.py is its definition) ----
 *
 * The rule, for a name made of ASCII characters: the key is the name up to the first '.' after the last '/',
 * the extension is the rest, ASCII lower-cased (= str.lower() on ASCII). Names with other bytes go through the
 * Python splitter the caller passes (DEFAULT_RULE.split), so the rule has one definition for them too.
 *
 * Only the clean transitions of samples.group_samples are made here: a new field of the current sample, or a
 * new sample whose key was not seen before. Anything else (no extension, an empty one, one starting with "__",
 * a repeated extension, a key seen before) stops the walk before that member, and Python's grouping goes on
 * from the same state (seen keys, current sample, current key): every error decision is Python's. */


static PyObject *cached_ext(ext_cache *c, const unsigned char *ext, Py_ssize_t len)
{
    unsigned char lower[256];
    PyObject *s;
    Py_ssize_t i;
    int k;

    if (len > (Py_ssize_t)sizeof lower) {
        s = PyUnicode_New(len, 127);
        if (s == NULL)
            return NULL;
        for (i = 0; i < len; i++)
            PyUnicode_1BYTE_DATA(s)[i] = (ext[i] >= 'A' && ext[i] <= 'Z') ? ext[i] + 32 : ext[i];
        return s; /* new reference */
    }
    for (i = 0; i < len; i++)
        lower[i] = (ext[i] >= 'A' && ext[i] <= 'Z') ? ext[i] + 32 : ext[i];
    for (k = 0; k < c->n; k++) {
        s = c->strs[k];
        if (PyUnicode_GET_LENGTH(s) == len && memcmp(PyUnicode_1BYTE_DATA(s), lower, (size_t)len) == 0) {
            Py_INCREF(s);
            return s;
        }
    }
    s = PyUnicode_New(len, 127);
    if (s == NULL)
        return NULL;
    memcpy(PyUnicode_1BYTE_DATA(s), lower, (size_t)len);
    if (c->n < EXT_CACHE) {
        c->strs[c->n++] = s;
    } else {
        Py_DECREF(c->strs[c->next]);
        c->strs[c->next] = s;
        c->next = (c->next + 1) % EXT_CACHE;
    }
    Py_INCREF(s);
    return s;
}

void clear_cache(ext_cache *c)
{
    int k;
    for (k = 0; k < c->n; k++)
        Py_DECREF(c->strs[k]);
    c->n = 0;
}

/* In one pass over a name: whether it is all ASCII, and *dot, the position of its first '.' after the last '/'
 * (len when there is none). */
static int ascii_split(const unsigned char *p, Py_ssize_t len, Py_ssize_t *dot)
{
    Py_ssize_t i, first = -1;
    unsigned char acc = 0;
    for (i = 0; i < len; i++) {
        unsigned char c = p[i];
        acc |= c;
        if (c == '/')
            first = -1;
        else if (c == '.' && first < 0)
            first = i;
    }
    *dot = first < 0 ? len : first;
    return acc < 0x80;
}

PyObject *str_key, *str_url, *str_local;


/* The key and the extension of a member named ``name`` by the default rule. Returns 1: *ext is set (a new
 * reference), and *key (a new reference) unless the key is current_key (then *same = 1 and *key = NULL);
 * 0 when Python's grouping must see the member (no extension, an empty one, one starting with "__"); -1 on error. */
static int split_name(grouping *g, span name, PyObject *current_key, PyObject **key, PyObject **ext, int *same)
{
    const unsigned char *p = name.data;
    Py_ssize_t len = name.len, dot;
    PyObject *text, *parts, *k, *e;

    *key = *ext = NULL;
    if (ascii_split(p, len, &dot)) {
        if (dot >= len - 1 || (len - dot > 2 && p[dot + 1] == '_' && p[dot + 2] == '_'))
            return 0;
        *same = current_key != NULL && PyUnicode_IS_COMPACT_ASCII(current_key) &&
                PyUnicode_GET_LENGTH(current_key) == dot &&
                memcmp(PyUnicode_1BYTE_DATA(current_key), p, (size_t)dot) == 0;
        if (!*same) {
            if ((*key = PyUnicode_New(dot, 127)) == NULL)
                return -1;
            memcpy(PyUnicode_1BYTE_DATA(*key), p, (size_t)dot);
        }
        if ((*ext = cached_ext(&g->cache, p + dot + 1, len - dot - 1)) == NULL) {
            Py_CLEAR(*key);
            return -1;
        }
        return 1;
    }
    text = PyUnicode_DecodeUTF8((const char *)p, len, "surrogateescape");
    if (text == NULL)
        return -1;
    parts = PyObject_CallOneArg(g->split, text);
    Py_DECREF(text);
    if (parts == NULL)
        return -1;
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(parts, 0)) ||
        !PyUnicode_Check(PyTuple_GET_ITEM(parts, 1))) {
        Py_DECREF(parts);
        return 0;
    }
    k = PyTuple_GET_ITEM(parts, 0);
    e = PyTuple_GET_ITEM(parts, 1);
    if (PyUnicode_GET_LENGTH(e) == 0 ||
        (PyUnicode_GET_LENGTH(e) >= 2 && PyUnicode_READ_CHAR(e, 0) == '_' && PyUnicode_READ_CHAR(e, 1) == '_')) {
        Py_DECREF(parts); /* no extension, or one Python must see */
        return 0;
    }
    *same = current_key != NULL ? PyObject_RichCompareBool(k, current_key, Py_EQ) : 0;
    if (*same < 0) {
        Py_DECREF(parts);
        return -1;
    }
    if (!*same) {
        Py_INCREF(k);
        *key = k;
    }
    Py_INCREF(e);
    *ext = e;
    Py_DECREF(parts);
    return 1;
}

/* Record the key of a new sample. While the keys of the shard come in increasing order (as writers write them)
 * they go to the list ``keys``, with no hashing: a key greater than the last one cannot have been seen. At the
 * first key out of order the list moves into the set ``seen``; from then on a set that does not grow already held
 * it. Returns 1 (a new key; *fresh: it went to the list), 0 (a key seen before), -1 on error. */
static int record_key(grouping *g, PyObject *key, int *fresh)
{
    Py_ssize_t i, before;

    *fresh = 0;
    if (g->keys != Py_None && PySet_GET_SIZE(g->seen) == 0) {
        Py_ssize_t n = PyList_GET_SIZE(g->keys);
        int greater = n == 0 || PyUnicode_Compare(key, PyList_GET_ITEM(g->keys, n - 1)) > 0;
        if (PyErr_Occurred())
            return -1;
        if (greater) {
            *fresh = 1;
            return PyList_Append(g->keys, key) < 0 ? -1 : 1;
        }
        for (i = 0; i < n; i++)
            if (PySet_Add(g->seen, PyList_GET_ITEM(g->keys, i)) < 0)
                return -1;
        if (PyList_SetSlice(g->keys, 0, n, NULL) < 0)
            return -1;
    }
    before = PySet_GET_SIZE(g->seen);
    if (PySet_Add(g->seen, key) < 0)
        return -1;
    return PySet_GET_SIZE(g->seen) != before;
}

/* Take back the key record_key made (the walk ends before that sample after all). */
static int unrecord_key(grouping *g, PyObject *key, int fresh)
{
    if (fresh) {
        Py_ssize_t n = PyList_GET_SIZE(g->keys);
        return PyList_SetSlice(g->keys, n - 1, n, NULL);
    }
    return PySet_Discard(g->seen, key) < 0 ? -1 : 0;
}

/* The walk of scan_samples and scan_columns: from pos, the regular members of buf[0:end] grouped into the samples
 * of the sink s by the rule above. Returns the position where it stopped and sets *need as scan_samples' docstring
 * says; -1 on error. */
Py_ssize_t group_members(const unsigned char *buf, Py_ssize_t end, Py_ssize_t pos, grouping *g, sink *s,
                                Py_ssize_t *need)
{
    char joined[256];
    member m;

    for (;;) {
        PyObject *key, *ext;
        const char *data;
        int same = 0, fresh, stop = 0, r, kind = next_member(buf, end, pos, joined, &m, need);

        if (kind == M_NODATA) {
            pos = m.next;
            continue;
        }
        if (kind != M_FILE) {
            if (kind == M_OTHER)
                *need = 0;
            return pos;
        }
        r = split_name(g, m.name, s->key, &key, &ext, &same);
        if (r <= 0) {
            *need = -1;
            return r < 0 ? -1 : pos;
        }
        data = (const char *)buf + m.data_pos;
        if (same) {
            r = s->has(s, ext); /* 1: the same extension twice in one sample */
            if (r == 0)
                r = s->add(s, ext, data, (Py_ssize_t)m.size);
            else if (r > 0)
                *need = -1;
            Py_DECREF(ext);
            if (r != 0)
                return r < 0 ? -1 : pos;
        } else {
            r = record_key(g, key, &fresh);
            if (r == 0) {
                *need = -1; /* a key that reappears after other keys */
            } else if (r > 0 && s->key != NULL) { /* the current sample is complete */
                r = s->done(s, &stop);
                if (r == 0) {
                    *need = -2; /* the walk ends before this sample */
                    if (unrecord_key(g, key, fresh) < 0)
                        r = -1;
                }
            }
            if (r <= 0) {
                Py_DECREF(key);
                Py_DECREF(ext);
                return r < 0 ? -1 : pos;
            }
            r = s->start(s, key, ext, data, (Py_ssize_t)m.size);
            Py_DECREF(ext);
            if (r < 0)
                return -1;
            if (stop) {
                *need = -2;
                return m.next;
            }
        }
        pos = m.next;
    }
}

/* Checks shared by scan_samples and scan_columns; they release the buffer and raise on failure. */
int check_walk(Py_buffer *view, Py_ssize_t pos, PyObject *current, PyObject *current_key, PyObject *keys,
                      const char *who)
{
    const char *problem = NULL;
    if (keys != Py_None && !PyList_CheckExact(keys))
        problem = "keys must be a list or None";
    else if (pos < 0 || pos > view->len)
        problem = "position outside the buffer";
    else if (current != Py_None && !PyDict_CheckExact(current))
        problem = "the current sample must be a dict or None";
    else if (current != Py_None && !PyUnicode_Check(current_key))
        problem = "the current key must be a str";
    if (problem == NULL)
        return 0;
    PyErr_Format(pos < 0 || pos > view->len ? PyExc_ValueError : PyExc_TypeError, "%s: %s", who, problem);
    PyBuffer_Release(view);
    return -1;
}
