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


/* Whether the extension ext (len bytes, as named) equals the cached lower-case one: ASCII case-insensitively. */
static int same_ext(const unsigned char *cached, const unsigned char *ext, Py_ssize_t len)
{
    Py_ssize_t i;
    for (i = 0; i < len; i++) {
        unsigned char a = ext[i];
        if (a != cached[i] && !(a >= 'A' && a <= 'Z' && a + 32 == cached[i]))
            return 0;
    }
    return 1;
}

/* The lower-cased extension as a str (a new reference), from the cache when it holds it. The search starts after
 * the entry found last, so the fields of samples of one shape are found at the first try. */
static PyObject *cached_ext(ext_cache *c, const unsigned char *ext, Py_ssize_t len)
{
    PyObject *s;
    Py_ssize_t i;
    int k, at;

    for (k = 0, at = c->last + 1; k < c->n; k++, at++) {
        if (at >= c->n)
            at = 0;
        s = c->strs[at];
        if (PyUnicode_GET_LENGTH(s) == len && same_ext(PyUnicode_1BYTE_DATA(s), ext, len)) {
            c->last = at;
            Py_INCREF(s);
            return s;
        }
    }
    s = PyUnicode_New(len, 127);
    if (s == NULL)
        return NULL;
    for (i = 0; i < len; i++)
        PyUnicode_1BYTE_DATA(s)[i] = (ext[i] >= 'A' && ext[i] <= 'Z') ? ext[i] + 32 : ext[i];
    if (c->n < EXT_CACHE) {
        c->last = c->n;
        c->strs[c->n++] = s;
    } else {
        Py_DECREF(c->strs[c->next]);
        c->strs[c->next] = s;
        c->last = c->next;
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
    c->n = c->last = 0;
}

/* In one pass over a name: whether it is all ASCII, and *dot, the position of its first '.' after the last '/'
 * (len when there is none). With padded, the name's 16-byte chunks (the last one past its end included) may be
 * read: SSE2 takes 16 bytes a step. */
static int ascii_split(const unsigned char *p, Py_ssize_t len, int padded, Py_ssize_t *dot)
{
    Py_ssize_t i, first = -1;
    unsigned char acc = 0;
#if defined(__SSE2__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (padded) {
        const __m128i slash = _mm_set1_epi8('/'), period = _mm_set1_epi8('.');
        unsigned high = 0;
        for (i = 0; i < len; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
            unsigned valid = len - i >= 16 ? 0xFFFFu : (1u << (len - i)) - 1;
            unsigned slashes = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, slash)) & valid;
            unsigned dots = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, period)) & valid;
            high |= (unsigned)_mm_movemask_epi8(v) & valid;
            if (slashes) { /* only the dots after this chunk's last '/' count, and none before it */
                dots &= ~((2u << (31 - __builtin_clz(slashes))) - 1);
                first = dots ? i + __builtin_ctz(dots) : -1;
            } else if (first < 0 && dots) {
                first = i + __builtin_ctz(dots);
            }
        }
        *dot = first < 0 ? len : first;
        return high == 0;
    }
#else
    (void)padded;
#endif
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
 * 0 when Python's grouping must see the member (no extension, an empty one, one starting with "__"); -1 on error.
 * padded: as ascii_split's. */
static int split_name(grouping *g, span name, int padded, PyObject *current_key, PyObject **key, PyObject **ext,
                      int *same)
{
    const unsigned char *p = name.data;
    Py_ssize_t len = name.len, dot;
    PyObject *text, *parts, *k, *e;

    *key = *ext = NULL;
    if (ascii_split(p, len, padded, &dot)) {
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

/* The keys of a shard while they increase: a bytearray of entries, each a key's ASCII bytes followed by their
 * length (4 bytes, native order), so that the last key is found from the end. Bytes, not str objects: a shard's
 * thousands of keys are neither made nor kept as objects (stored_keys makes them when Python's grouping needs them). */
#define KEY_LEN 4

static const char *last_key(PyObject *keys, Py_ssize_t *len)
{
    Py_ssize_t n = PyByteArray_GET_SIZE(keys);
    uint32_t k;
    memcpy(&k, PyByteArray_AS_STRING(keys) + n - KEY_LEN, KEY_LEN);
    *len = (Py_ssize_t)k;
    return PyByteArray_AS_STRING(keys) + n - KEY_LEN - k;
}

/* stored_keys(keys) -> list[str]: the keys a bytearray of stored keys holds, in order. */
PyObject *stored_keys(PyObject *self, PyObject *arg)
{
    Py_ssize_t n, count = 0;
    PyObject *out;
    (void)self;
    if (!PyByteArray_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "stored_keys: keys must be a bytearray");
        return NULL;
    }
    n = PyByteArray_GET_SIZE(arg);
    if ((out = PyList_New(0)) == NULL)
        return NULL;
    while (n > 0) { /* from the end: each length follows its key */
        Py_ssize_t len;
        const char *k;
        PyObject *s;
        uint32_t v;
        if (n < KEY_LEN)
            goto bad;
        memcpy(&v, PyByteArray_AS_STRING(arg) + n - KEY_LEN, KEY_LEN);
        len = (Py_ssize_t)v;
        if (len > n - KEY_LEN)
            goto bad;
        k = PyByteArray_AS_STRING(arg) + n - KEY_LEN - len;
        if ((s = PyUnicode_DecodeASCII(k, len, NULL)) == NULL || PyList_Append(out, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(s);
        n -= len + KEY_LEN;
        count++;
    }
    if (PyList_Reverse(out) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
bad:
    Py_DECREF(out);
    PyErr_Format(PyExc_ValueError, "stored_keys: not a store of keys (%zd entries read)", count);
    return NULL;
}

/* Move the stored keys into the set seen (the store is then empty). 0, or -1 on error. */
static int move_keys(grouping *g)
{
    PyObject *keys = stored_keys(NULL, g->keys);
    Py_ssize_t i;
    if (keys == NULL)
        return -1;
    for (i = 0; i < PyList_GET_SIZE(keys); i++)
        if (PySet_Add(g->seen, PyList_GET_ITEM(keys, i)) < 0) {
            Py_DECREF(keys);
            return -1;
        }
    Py_DECREF(keys);
    return PyByteArray_Resize(g->keys, 0);
}

/* Record the key of a new sample. While the keys of the shard come in increasing order (as writers write them)
 * they go to the store ``keys`` (above), with no hashing: a key greater than the last one cannot have been seen.
 * At the first key out of order (or the first that is not compact ASCII) the store moves into the set ``seen``;
 * from then on a set that does not grow already held it. Returns 1 (a new key; *fresh: it went to the store), 0 (a
 * key seen before), -1 on error. */
static int record_key(grouping *g, PyObject *key, int *fresh)
{
    Py_ssize_t before;

    *fresh = 0;
    if (g->keys != Py_None && PySet_GET_SIZE(g->seen) == 0) {
        Py_ssize_t n = PyByteArray_GET_SIZE(g->keys), a;
        if (PyUnicode_IS_COMPACT_ASCII(key) && (a = PyUnicode_GET_LENGTH(key)) <= (Py_ssize_t)UINT32_MAX) {
            int greater = n == 0;
            if (!greater) {
                Py_ssize_t b;
                const char *last = last_key(g->keys, &b);
                int c = memcmp(PyUnicode_1BYTE_DATA(key), last, (size_t)(a < b ? a : b));
                greater = c > 0 || (c == 0 && a > b);
            }
            if (greater) {
                uint32_t len = (uint32_t)a;
                if (PyByteArray_Resize(g->keys, n + a + KEY_LEN) < 0)
                    return -1;
                memcpy(PyByteArray_AS_STRING(g->keys) + n, PyUnicode_1BYTE_DATA(key), (size_t)a);
                memcpy(PyByteArray_AS_STRING(g->keys) + n + a, &len, KEY_LEN);
                *fresh = 1;
                return 1;
            }
        }
        if (move_keys(g) < 0)
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
        Py_ssize_t len;
        last_key(g->keys, &len);
        return PyByteArray_Resize(g->keys, PyByteArray_GET_SIZE(g->keys) - len - KEY_LEN);
    }
    return PySet_Discard(g->seen, key) < 0 ? -1 : 0;
}

/* Whether split_name may read the name's 16-byte chunks: a name in the buffer with its last chunk there too, or
 * in joined (256 bytes, names up to 256). */
static int name_padded(span name, const char *joined, const unsigned char *buf, Py_ssize_t end)
{
    return name.data == (const unsigned char *)joined ||
           (name.data >= buf && name.data + ((name.len + 15) & ~(Py_ssize_t)15) <= buf + end);
}

/* The buffer ends in the data of the member at pos, whose headers it holds (its name: name): when the name shows
 * that the member starts a new sample (another key, an extension the grouping takes), the current sample is
 * complete, and is handed to the sink now rather than once that member's data has arrived (a stream's first
 * sample needs no byte of the next one's data). The member is not consumed: the next call starts it, with no
 * current sample. Returns pos, *need as group_members sets it (-2 when the sink ends the walk), or -1 on error. */
static Py_ssize_t close_early(grouping *g, sink *s, span name, int padded, Py_ssize_t pos, Py_ssize_t *need)
{
    PyObject *key, *ext;
    int same = 0, stop = 0, r = split_name(g, name, padded, s->key, &key, &ext, &same);

    if (r <= 0) /* a member Python's grouping must see: it decides once the member is there */
        return r < 0 ? -1 : pos;
    Py_XDECREF(key);
    Py_DECREF(ext);
    if (same)
        return pos;
    r = s->done(s, &stop);
    if (r < 0)
        return -1;
    if (r > 0)
        Py_CLEAR(s->key);
    if (r == 0 || stop)
        *need = -2;
    return pos;
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
        int same = 0, fresh, stop = 0, r, padded, kind;

        m.name.data = NULL;
        kind = next_member(buf, end, pos, joined, &m, need);
        if (kind == M_NODATA) {
            pos = m.next;
            continue;
        }
        if (kind != M_FILE) {
            if (kind == M_OTHER)
                *need = 0;
            else if (m.name.data != NULL && s->key != NULL) /* M_NEED, its header there: maybe a new sample */
                return close_early(g, s, m.name, name_padded(m.name, joined, buf, end), pos, need);
            return pos;
        }
        padded = name_padded(m.name, joined, buf, end);
        r = split_name(g, m.name, padded, s->key, &key, &ext, &same);
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
    if (keys != Py_None && !PyByteArray_CheckExact(keys))
        problem = "keys must be a bytearray (the stored keys) or None";
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
