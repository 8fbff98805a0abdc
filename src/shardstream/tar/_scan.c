/* shardstream.tar._scan: the fast path of the tar header walk (optional; C99, CPython API only).
 *
 * scan(buf, pos, base) -> (members, new_pos)
 *
 * Walks consecutive tar headers in the bytes-like ``buf`` from ``pos`` and returns the regular-file members
 * it passed as ``(name: str, data: bytes, data_offset: int)`` tuples (``data_offset`` = ``base`` + position
 * in ``buf``), exactly as the pure-Python walk in reader.py yields them, and the position where it stopped.
 *
 * It handles only the common, unambiguous cases: ustar / GNU / v7 headers with octal fields and a valid
 * (unsigned or signed) checksum, regular files, no-data types (links, devices, directories, fifos), and the
 * extended headers GNU 'L' / 'K' and PAX 'x' (path and size records). It stops, always at the start of a
 * member (before any extended header of that member), at anything else: the end of the buffer, a zero
 * block, a bad checksum or field, a base-256 number, a PAX 'g' header, a sparse or unknown type, a
 * malformed PAX record. The Python walk then handles that header, so every error and every end-of-archive
 * decision is made by one Python code path. Invariant: this walk never accepts a header that the Python
 * walk would read differently; it may only stop earlier.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

#define BLOCK 512
#define MAX_MEMBER_SIZE ((uint64_t)1 << 48) /* header.MAX_MEMBER_SIZE */

typedef struct {
    const unsigned char *data;
    Py_ssize_t len;
} span;

/* An octal field as header.parse_number reads it (NUL ends it, spaces around, empty is 0).
 * Returns 0 and sets *out, or -1 for anything else (base-256, garbage): left to Python. */
static int parse_octal(const unsigned char *field, size_t width, uint64_t *out)
{
    const unsigned char *nul;
    size_t a = 0, b, i;
    uint64_t value = 0;

    /* the form writers use: octal digits from the start of the field up to a NUL or the field's end */
    for (i = 0; i < width && (unsigned)(field[i] - '0') < 8; i++)
        value = value * 8 + (uint64_t)(field[i] - '0');
    if (i > 0 && (i == width || field[i] == 0)) {
        *out = value;
        return 0;
    }
    value = 0;
    if (field[0] & 0x80)
        return -1;
    nul = memchr(field, 0, width);
    b = nul ? (size_t)(nul - field) : width;
    while (a < b && field[a] == ' ')
        a++;
    while (b > a && field[b - 1] == ' ')
        b--;
    for (i = a; i < b; i++) {
        if (field[i] < '0' || field[i] > '7')
            return -1;
        value = value * 8 + (uint64_t)(field[i] - '0');
    }
    *out = value; /* at most 12 digits: no overflow */
    return 0;
}

/* The sum of the 512 bytes of a header block, as unsigned bytes (SSE2's sum of absolute differences from zero:
 * one instruction per 16 bytes; the plain loop elsewhere). */
static uint32_t block_sum(const unsigned char *h)
{
#if defined(__SSE2__) && defined(__x86_64__)
    const __m128i zero = _mm_setzero_si128();
    __m128i a = zero, b = zero;
    int i;
    for (i = 0; i < BLOCK; i += 32) {
        a = _mm_add_epi64(a, _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(h + i)), zero));
        b = _mm_add_epi64(b, _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(h + i + 16)), zero));
    }
    a = _mm_add_epi64(a, b);
    return (uint32_t)(_mm_cvtsi128_si64(a) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(a, a)));
#else
    uint32_t sum = 0;
    int i;
    for (i = 0; i < BLOCK; i++)
        sum += h[i];
    return sum;
#endif
}

/* The stored checksum equals the unsigned or the signed byte sum (chksum field counted as spaces). */
static int checksum_ok(const unsigned char *h)
{
    uint64_t stored;
    uint32_t unsigned_sum = 8 * ' ';
    int32_t signed_sum = 8 * ' ';
    int i;

    if (parse_octal(h + 148, 8, &stored) < 0)
        return 0;
    unsigned_sum += block_sum(h);
    for (i = 148; i < 156; i++)
        unsigned_sum -= h[i];
    if (stored == unsigned_sum)
        return 1;
    for (i = 0; i < 148; i++)
        signed_sum += (signed char)h[i];
    for (i = 156; i < BLOCK; i++)
        signed_sum += (signed char)h[i];
    return (int64_t)stored == (int64_t)signed_sum;
}

static int is_zero_block(const unsigned char *h)
{
    static const unsigned char zeros[BLOCK];
    return memcmp(h, zeros, BLOCK) == 0;
}

static size_t field_len(const unsigned char *field, size_t width)
{
    const unsigned char *nul = memchr(field, 0, width);
    return nul ? (size_t)(nul - field) : width;
}

/* Parse the records of a PAX 'x' header as header.parse_pax_records does; the last "path" and "size"
 * records win and an empty value unsets. Returns 0, or -1 for anything Python must see (a malformed
 * record, a GNU.sparse key, a size that is not plain decimal or too large). */
static int parse_pax(const unsigned char *d, Py_ssize_t n, span *path, int *has_size, uint64_t *size)
{
    Py_ssize_t pos = 0;

    while (pos < n && d[pos] != 0) {
        Py_ssize_t i = pos, space, equals, stop, key_len, val_len;
        uint64_t length = 0;
        const unsigned char *key, *val;

        while (i < n && i < pos + 21 && d[i] != ' ')
            i++;
        if (i >= n || i >= pos + 21 || i == pos)
            return -1;
        space = i;
        for (i = pos; i < space; i++) {
            if (d[i] < '0' || d[i] > '9' || length > ((uint64_t)1 << 40))
                return -1;
            length = length * 10 + (uint64_t)(d[i] - '0');
        }
        if (length > (uint64_t)(n - pos))
            return -1;
        stop = pos + (Py_ssize_t)length;
        for (equals = space + 1; equals < stop && d[equals] != '='; equals++)
            ;
        if (equals >= stop || equals == space + 1 || d[stop - 1] != '\n')
            return -1;
        key = d + space + 1;
        key_len = equals - space - 1;
        val = d + equals + 1;
        val_len = stop - 1 - (equals + 1);
        if (key_len == 4 && memcmp(key, "path", 4) == 0) {
            path->data = val;
            path->len = val_len;
        } else if (key_len == 4 && memcmp(key, "size", 4) == 0) {
            uint64_t value = 0;
            Py_ssize_t j;
            if (val_len > 15)
                return -1;
            for (j = 0; j < val_len; j++) {
                if (val[j] < '0' || val[j] > '9')
                    return -1;
                value = value * 10 + (uint64_t)(val[j] - '0');
            }
            if (value > MAX_MEMBER_SIZE)
                return -1;
            *has_size = val_len > 0;
            *size = value;
        } else if (key_len >= 11 && memcmp(key, "GNU.sparse.", 11) == 0) {
            return -1;
        }
        pos = stop;
    }
    return 0;
}

/* Append (name, data, data_offset) to members, or (name, size, data_offset) when headers_only;
   -1 with an exception set on failure. */
static int emit(PyObject *members, const unsigned char *buf, span name, Py_ssize_t data_pos, uint64_t size,
                long long base, int headers_only)
{
    PyObject *text, *data, *offset, *item;

    text = PyUnicode_DecodeUTF8((const char *)name.data, name.len, "surrogateescape");
    data = headers_only ? PyLong_FromUnsignedLongLong(size)
                        : PyBytes_FromStringAndSize((const char *)buf + data_pos, (Py_ssize_t)size);
    offset = PyLong_FromLongLong(base + (long long)data_pos);
    if (text == NULL || data == NULL || offset == NULL) {
        Py_XDECREF(text);
        Py_XDECREF(data);
        Py_XDECREF(offset);
        return -1;
    }
    item = PyTuple_Pack(3, text, data, offset);
    Py_DECREF(text);
    Py_DECREF(data);
    Py_DECREF(offset);
    if (item == NULL || PyList_Append(members, item) < 0) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    return 0;
}

/* One member as the walk found it: a regular file (name, data position and size), or a no-data type. */
typedef struct {
    span name;
    Py_ssize_t data_pos;
    uint64_t size;
    Py_ssize_t next; /* the position after the member (its padded data included) */
} member;

enum { M_FILE, M_NODATA, M_NEED, M_OTHER };

/* How far ahead of a header the walk prefetches, and how much: when the buffer is a memory map of the page cache
 * (buffers.WindowBuffer), the walk is the first to touch each line, and each header depends on the one before;
 * the prefetch overlaps those misses (exported as _scan.PREFETCH_AHEAD: source_for maps files only when it is). */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_AHEAD 1024
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH_AHEAD 0 /* no prefetch: local files are read with preadv */
#define PREFETCH(p) ((void)(p))
#endif
#define PREFETCH_BYTES 768

/* Read the member that starts at ``pos`` (its extended headers first) in buf[0:end].
 * M_FILE / M_NODATA: *m describes it (name may point into ``joined``). M_NEED: the buffer ends before the
 * member does; *need is the number of bytes from ``pos`` known to be needed so far. M_OTHER: a header this
 * walk leaves to Python (see the top of the file). The walk never consumes anything when it stops. */
static int next_member(const unsigned char *buf, Py_ssize_t end, Py_ssize_t pos, char joined[256], member *m,
                       Py_ssize_t *need)
{
    const Py_ssize_t start = pos;
    span longname = {NULL, 0}, pax_path = {NULL, 0};
    int has_pax_size = 0;
    uint64_t pax_size = 0;

    for (;;) {
        const unsigned char *h = buf + pos;
        uint64_t size, padded;
        unsigned char type;
        span name;

        if (end - pos < BLOCK) {
            *need = pos - start + BLOCK;
            return M_NEED;
        }
        if (PREFETCH_AHEAD && end - pos >= PREFETCH_AHEAD + PREFETCH_BYTES) /* the next member, while this one is read */
            for (int line = 0; line < PREFETCH_BYTES; line += 64)
                PREFETCH(h + PREFETCH_AHEAD + line);
        type = h[156];
        if (is_zero_block(h) || !checksum_ok(h) || parse_octal(h + 124, 12, &size) < 0)
            return M_OTHER;
        padded = (size + BLOCK - 1) & ~(uint64_t)(BLOCK - 1);
        if (type == 'L' || type == 'K' || type == 'x') {
            if (padded > (uint64_t)(end - pos - BLOCK)) {
                *need = padded > (uint64_t)PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : pos - start + BLOCK + (Py_ssize_t)padded;
                return M_NEED;
            }
            if (type == 'L') {
                longname.data = h + BLOCK;
                longname.len = (Py_ssize_t)field_len(h + BLOCK, (size_t)size);
            } else if (type == 'x' && parse_pax(h + BLOCK, (Py_ssize_t)size, &pax_path, &has_pax_size, &pax_size) < 0) {
                return M_OTHER;
            }
            pos += BLOCK + (Py_ssize_t)padded;
            continue;
        }
        name.data = h;
        name.len = (Py_ssize_t)field_len(h, 100);
        if (memcmp(h + 257, "ustar\0", 6) == 0) {
            size_t prefix_len = field_len(h + 345, 155);
            if (prefix_len) {
                memcpy(joined, h + 345, prefix_len);
                joined[prefix_len] = '/';
                memcpy(joined + prefix_len + 1, h, (size_t)name.len);
                name.data = (const unsigned char *)joined;
                name.len += (Py_ssize_t)prefix_len + 1;
            }
        }
        if (type == 0 && name.len > 0 && name.data[name.len - 1] == '/')
            type = '5'; /* a v7 directory */
        if (pax_path.len)
            name = pax_path;
        else if (longname.len)
            name = longname;
        if (has_pax_size) {
            size = pax_size;
            padded = (size + BLOCK - 1) & ~(uint64_t)(BLOCK - 1);
        }
        if (type == '0' || type == 0 || type == '7') {
            if (padded > (uint64_t)(end - pos - BLOCK)) {
                *need = padded > (uint64_t)PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : pos - start + BLOCK + (Py_ssize_t)padded;
                return M_NEED;
            }
            m->name = name;
            m->data_pos = pos + BLOCK;
            m->size = size;
            m->next = pos + BLOCK + (Py_ssize_t)padded;
            return M_FILE;
        }
        if (type >= '1' && type <= '6') {
            m->next = pos + BLOCK; /* no data blocks follow links, devices, directories, fifos */
            return M_NODATA;
        }
        return M_OTHER; /* 'g', sparse, vendor and unknown types: the Python walk decides */
    }
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, need;
    long long base;
    int headers_only = 0;
    PyObject *members;
    char joined[256]; /* ustar prefix "/" name: at most 155 + 1 + 100 bytes */
    member m;

    (void)self;
    if (!PyArg_ParseTuple(args, "y*nL|p", &view, &pos, &base, &headers_only))
        return NULL;
    if (pos < 0 || pos > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: position outside the buffer");
        return NULL;
    }
    members = PyList_New(0);
    if (members == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    for (;;) {
        int kind = next_member(view.buf, view.len, pos, joined, &m, &need);
        if (kind == M_FILE) {
            if (emit(members, view.buf, m.name, m.data_pos, m.size, base, headers_only) < 0) {
                Py_DECREF(members);
                PyBuffer_Release(&view);
                return NULL;
            }
        } else if (kind != M_NODATA) {
            break;
        }
        pos = m.next;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", members, pos);
}

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

#define EXT_CACHE 8

typedef struct {
    PyObject *strs[EXT_CACHE]; /* recent extension strings (owned), compared by their ASCII bytes */
    int n, next;
} ext_cache;

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

static void clear_cache(ext_cache *c)
{
    int k;
    for (k = 0; k < c->n; k++)
        Py_DECREF(c->strs[k]);
    c->n = 0;
}

static int is_ascii(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i;
    unsigned char acc = 0;
    for (i = 0; i < n; i++)
        acc |= p[i];
    return acc < 0x80;
}

static PyObject *str_key, *str_url, *str_local; /* "__key__", "__url__", "__local_path__" (interned) */

/* Where the walk puts what it groups: the current sample and what becomes of it when complete. Two sinks share
 * the walk (group_members), which makes every grouping decision: the dict sink (scan_samples: sample dicts) and
 * the column sink (scan_columns, below slice_column: values appended straight to columns). */
typedef struct sink sink;
struct sink {
    PyObject *key; /* the current sample's key (owned); NULL when there is no current sample */
    /* 1 when the current sample has the field ext, 0 when not, -1 on error */
    int (*has)(sink *s, PyObject *ext);
    /* add a field to the current sample: 0, or -1 on error */
    int (*add)(sink *s, PyObject *ext, const char *data, Py_ssize_t size);
    /* the current sample is complete: 1 taken (*stop set: the walk ends once the next sample has started), 0 the
     * walk ends before the next sample (the current one stays current), -1 on error */
    int (*done)(sink *s, int *stop);
    /* a new current sample (key: a reference given to the sink) with its first field: 0, or -1 on error */
    int (*start)(sink *s, PyObject *key, PyObject *ext, const char *data, Py_ssize_t size);
};

/* The grouping state of a shard that the walk carries across calls (see scan_samples' docstring). */
typedef struct {
    PyObject *seen, *keys, *split;
    ext_cache cache;
} grouping;

/* The key and the extension of a member named ``name`` by the default rule. Returns 1: *ext is set (a new
 * reference), and *key (a new reference) unless the key is current_key (then *same = 1 and *key = NULL);
 * 0 when Python's grouping must see the member (no extension, an empty one, one starting with "__"); -1 on error. */
static int split_name(grouping *g, span name, PyObject *current_key, PyObject **key, PyObject **ext, int *same)
{
    const unsigned char *p = name.data;
    Py_ssize_t len = name.len, slash, dot;
    PyObject *text, *parts, *k, *e;

    *key = *ext = NULL;
    if (is_ascii(p, len)) {
        for (slash = len - 1; slash >= 0 && p[slash] != '/'; slash--)
            ;
        for (dot = slash + 1; dot < len && p[dot] != '.'; dot++)
            ;
        if (dot >= len - 1 || (len - dot > 2 && p[dot + 1] == '_' && p[dot + 2] == '_'))
            return 0;
        *same = current_key != NULL && PyUnicode_IS_COMPACT_ASCII(current_key) &&
                PyUnicode_GET_LENGTH(current_key) == dot &&
                memcmp(PyUnicode_1BYTE_DATA(current_key), p, (size_t)dot) == 0;
        if (!*same && (*key = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, p, dot)) == NULL)
            return -1;
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
static Py_ssize_t group_members(const unsigned char *buf, Py_ssize_t end, Py_ssize_t pos, grouping *g, sink *s,
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
static int check_walk(Py_buffer *view, Py_ssize_t pos, PyObject *current, PyObject *current_key, PyObject *keys,
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

/* The dict sink: samples as {"__key__": key, "__url__": url, ext: bytes, ...}, complete ones appended to a list. */
typedef struct {
    sink base;
    PyObject *url, *current, *samples; /* current: the sample in progress (owned), or NULL */
    PyObject *local; /* the shard's local file: "__local_path__" of each complete sample (None: not set) */
} dict_sink;

static int dict_has(sink *s, PyObject *ext)
{
    return PyDict_Contains(((dict_sink *)s)->current, ext);
}

static int dict_add(sink *s, PyObject *ext, const char *data, Py_ssize_t size)
{
    PyObject *value = PyBytes_FromStringAndSize(data, size);
    int r;
    if (value == NULL)
        return -1;
    r = PyDict_SetItem(((dict_sink *)s)->current, ext, value);
    Py_DECREF(value);
    return r;
}

static int dict_done(sink *s, int *stop)
{
    dict_sink *d = (dict_sink *)s;
    (void)stop;
    if (d->local != Py_None && PyDict_SetItem(d->current, str_local, d->local) < 0)
        return -1;
    return PyList_Append(d->samples, d->current) < 0 ? -1 : 1;
}

static int dict_start(sink *s, PyObject *key, PyObject *ext, const char *data, Py_ssize_t size)
{
    dict_sink *d = (dict_sink *)s;
    PyObject *sample = PyDict_New();
    Py_XSETREF(s->key, key);
    if (sample == NULL)
        return -1;
    Py_XSETREF(d->current, sample);
    if (PyDict_SetItem(sample, str_key, key) < 0 || PyDict_SetItem(sample, str_url, d->url) < 0)
        return -1;
    return dict_add(s, ext, data, size);
}

static PyObject *scan_samples(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, need = 0;
    PyObject *current, *current_key, *result = NULL;
    grouping g = {NULL, Py_None, NULL, {{NULL}, 0, 0}};
    dict_sink d = {{NULL, dict_has, dict_add, dict_done, dict_start}, NULL, NULL, NULL, Py_None};

    (void)self;
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
        if (pos >= 0)
            result = Py_BuildValue("(OnOOn)", d.samples, pos, d.current ? d.current : Py_None,
                                   d.base.key ? d.base.key : Py_None, need);
    }
    Py_XDECREF(d.samples);
    Py_XDECREF(d.current);
    Py_XDECREF(d.base.key);
    clear_cache(&g.cache);
    PyBuffer_Release(&view);
    return result;
}

/* One value of a column, converted by mode (see slice_column): 1 with *out set (a new reference), 0 when the value
 * is not of the mode's simple form (nothing set, no error: the caller leaves the value to the Python codec), -1 on
 * error. */
static int convert_value(const char *p, Py_ssize_t n, int mode, PyObject **out)
{
    if (mode == 0) {
        *out = PyBytes_FromStringAndSize(p, n);
    } else if (mode == 1 || mode == 2) {
        *out = PyUnicode_DecodeUTF8(p, n, mode == 2 ? "surrogateescape" : NULL);
        if (*out == NULL && mode == 1 && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return 0;
        }
    } else {
        Py_ssize_t k = 0;
        int64_t value = 0;
        int negative = 0;
        if (n > 0 && (p[0] == '-' || p[0] == '+')) {
            negative = p[0] == '-';
            k = 1;
        }
        if (n - k < 1 || n - k > 18)
            return 0;
        for (; k < n; k++) {
            unsigned d = (unsigned char)p[k] - '0';
            if (d > 9)
                return 0;
            value = value * 10 + d;
        }
        *out = PyLong_FromLongLong(negative ? -value : value);
    }
    return *out == NULL ? -1 : 1;
}

/* slice_column(buf, offsets, sizes, start, stop, mode) -> list | None
 *
 * The column of rows start..stop of one field whose row i lies at buf[offsets[i] : offsets[i] + sizes[i]]
 * (offsets, sizes: contiguous 1-D buffers of 8-byte integers, e.g. int64 numpy arrays). mode 0: bytes;
 * 1: str, strict UTF-8 (= bytes.decode); 2: str, UTF-8 with surrogateescape (keys); 3: int from ASCII
 * decimal, only [+-]?[0-9]{1,18} (= int(bytes) on those). Modes 1 and 3 return None when a row is not of
 * that simple form (invalid UTF-8; spaces, underscores, long or non-numeric text): the caller then decodes
 * the column with the Python codec, which gives the value or the error. */
static PyObject *slice_column(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *offobj, *sizeobj, *list = NULL;
    Py_ssize_t start, stop;
    int mode;
    Py_buffer buf, off, size;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOnni", &bufobj, &offobj, &sizeobj, &start, &stop, &mode))
        return NULL;
    if (mode < 0 || mode > 3) {
        PyErr_SetString(PyExc_ValueError, "slice_column: mode must be 0, 1, 2 or 3");
        return NULL;
    }
    if (PyObject_GetBuffer(bufobj, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(offobj, &off, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (PyObject_GetBuffer(sizeobj, &size, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&off);
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (off.itemsize != 8 || size.itemsize != 8 || off.len != size.len || start < 0 || stop < start ||
        stop > off.len / 8) {
        PyErr_SetString(PyExc_ValueError, "slice_column: offsets and sizes must be equal-length buffers of "
                                          "8-byte integers holding rows start..stop");
        goto done;
    }
    const int64_t *offsets = (const int64_t *)off.buf, *sizes = (const int64_t *)size.buf;
    const char *data = (const char *)buf.buf;
    list = PyList_New(stop - start);
    if (list == NULL)
        goto done;
    for (Py_ssize_t i = start; i < stop; i++) {
        int64_t o = offsets[i], n = sizes[i];
        PyObject *item;
        int r;
        if (o < 0 || n < 0 || o > buf.len || n > buf.len - o) {
            PyErr_Format(PyExc_ValueError, "slice_column: row %zd (offset %lld, size %lld) is outside the buffer",
                         i, (long long)o, (long long)n);
            Py_CLEAR(list);
            goto done;
        }
        r = convert_value(data + o, (Py_ssize_t)n, mode, &item);
        if (r <= 0) {
            Py_CLEAR(list);
            if (r == 0) { /* not simple: the Python codec decodes the column */
                Py_INCREF(Py_None);
                list = Py_None;
            }
            goto done;
        }
        PyList_SET_ITEM(list, i - start, item);
    }
done:
    PyBuffer_Release(&size);
    PyBuffer_Release(&off);
    PyBuffer_Release(&buf);
    return list;
}

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
#define MAX_WANTED 16

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

static int same_str(PyObject *a, PyObject *b)
{
    return a == b || (PyUnicode_GET_LENGTH(a) == PyUnicode_GET_LENGTH(b) && PyUnicode_Compare(a, b) == 0);
}

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
    for (i = 0; i < c->n; i++)
        if (same_str(c->f[i].ext, ext))
            return 1;
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
        if (same_str(c->f[i].ext, want)) {
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
        if (PyUnicode_Check(k) && (same_str(k, str_key) || same_str(k, str_url)))
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

static PyObject *scan_columns(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, need = 0, j;
    PyObject *current, *current_key, *out, *fields = Py_None, *modes = NULL, *result = NULL, *now = NULL;
    int exact = 1;
    grouping g = {NULL, Py_None, NULL, {{NULL}, 0, 0}};
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

/* gather_samples(tables, ends, rows, columns=False) -> list[dict] | dict[str, list] | int | None
 *
 * The random-access reader's batch (IndexedDataset.__getitems__ in indexed/dataset.py, whose per-sample path
 * OpenShard.sample gives the same dicts): sample i of the batch is dataset row rows[i], in the shard whose
 * rows end before ends[shard] (ends: every shard's, increasing), read out of that shard's buffer at the
 * offsets of its index, as {"__key__": key, "__url__": url, ext: bytes, ...} (members in archive order).
 * tables maps shard numbers to tuples
 * (buffer, url, first, offsets, sizes, starts, key_ends, key_bytes, ext_ids, extensions): the shard's memory
 * map, its URL, its first row, the index arrays (8-byte offsets and sizes, 4-byte starts, key ends and
 * extension numbers, the keys end to end) and the extension strings. ends and rows are 8-byte integers.
 * Returns, having made nothing, the number of the first shard of the batch that tables lacks (an int: the
 * caller adds it and calls again), or None when a table or a row does not fit (a row outside the dataset,
 * other item sizes, a member or key outside its arrays or buffer): the caller then reads the batch sample by
 * sample. With columns, the batch as the default collation makes it of those dicts (see gather_columns), or None.
 */
#define GATHER_BUFFERS 7
#if (defined(__GNUC__) || defined(__clang__)) && !defined(GATHER_NO_PREFETCH)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

typedef struct {
    long long number, first;
    Py_buffer b[GATHER_BUFFERS]; /* data, offsets, sizes, starts, key_ends, key_bytes, ext_ids */
    int held;                    /* how many of b are held */
    PyObject *table, *url, *exts; /* the table tuple (held for the call) and two of its items */
} gather_table;

static int gather_open(gather_table *t, long long number, PyObject *table)
{
    static const Py_ssize_t items[GATHER_BUFFERS] = {1, 8, 8, 4, 4, 1, 4};
    static const int slots[GATHER_BUFFERS] = {0, 3, 4, 5, 6, 7, 8};
    int k;

    t->number = number;
    if (!PyTuple_Check(table) || PyTuple_GET_SIZE(table) != 10)
        return 0;
    Py_INCREF(table);
    t->table = table;
    t->first = PyLong_AsLongLong(PyTuple_GET_ITEM(table, 2));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    t->url = PyTuple_GET_ITEM(table, 1);
    t->exts = PyTuple_GET_ITEM(table, 9);
    if (!PyUnicode_Check(t->url) || !PyTuple_Check(t->exts))
        return 0;
    for (k = 0; k < GATHER_BUFFERS; k++) {
        Py_buffer *b = &t->b[k];
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(table, slots[k]), b, items[k] == 1 ? PyBUF_SIMPLE : PyBUF_ND) < 0) {
            PyErr_Clear();
            return 0;
        }
        t->held++;
        if (b->itemsize != items[k] || (items[k] > 1 && b->len % items[k]))
            return 0;
    }
    return 1;
}

/* gather_samples' columns: the batch as {"__key__": [...], "__url__": [...], ext: [...], ...} when every sample
 * has the fields of the first one in the same order, none twice and none named like the two above (else None,
 * making nothing). */
static PyObject *gather_columns(gather_table *t, const Py_ssize_t *which, const long long *local, Py_ssize_t n)
{
    PyObject *out = NULL, *names[64], *cols[66];
    Py_ssize_t nf, i, j;
    gather_table *s = &t[which[0]];
    const uint32_t *starts = (const uint32_t *)s->b[3].buf, *ext_ids = (const uint32_t *)s->b[6].buf;

    nf = (Py_ssize_t)(starts[local[0] + 1] - starts[local[0]]);
    if (nf > 64)
        goto none;
    for (j = 0; j < nf; j++) {
        names[j] = PyTuple_GET_ITEM(s->exts, ext_ids[starts[local[0]] + j]);
        if (!PyUnicode_Check(names[j]) || PyUnicode_Compare(names[j], str_key) == 0 ||
            PyUnicode_Compare(names[j], str_url) == 0)
            goto none;
        for (i = 0; i < j; i++)
            if (PyUnicode_Compare(names[i], names[j]) == 0)
                goto none;
    }
    for (i = 1; i < n; i++) { /* the same fields everywhere */
        gather_table *u = &t[which[i]];
        const uint32_t *st = (const uint32_t *)u->b[3].buf, *ids = (const uint32_t *)u->b[6].buf;
        if ((Py_ssize_t)(st[local[i] + 1] - st[local[i]]) != nf)
            goto none;
        for (j = 0; j < nf; j++) {
            PyObject *name = PyTuple_GET_ITEM(u->exts, ids[st[local[i]] + j]);
            if (name != names[j] && (!PyUnicode_Check(name) || PyUnicode_Compare(name, names[j]) != 0))
                goto none;
        }
    }
    if (PyErr_Occurred())
        return NULL;
    out = PyDict_New();
    if (out == NULL)
        return NULL;
    for (j = 0; j < nf + 2; j++) {
        cols[j] = PyList_New(n);
        if (cols[j] == NULL || PyDict_SetItem(out, j == 0 ? str_key : j == 1 ? str_url : names[j - 2], cols[j]) < 0) {
            Py_XDECREF(cols[j]);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(cols[j]); /* out holds it */
    }
    for (i = 0; i < n; i++) {
        gather_table *u = &t[which[i]];
        const uint32_t *st = (const uint32_t *)u->b[3].buf, *key_ends = (const uint32_t *)u->b[4].buf;
        const uint64_t *offsets = (const uint64_t *)u->b[1].buf, *sizes = (const uint64_t *)u->b[2].buf;
        const char *data = (const char *)u->b[0].buf, *keys = (const char *)u->b[5].buf;
        long long row = local[i];
        PyObject *value = PyUnicode_DecodeUTF8(keys + key_ends[row], (Py_ssize_t)(key_ends[row + 1] - key_ends[row]),
                                               "surrogateescape");
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(cols[0], i, value);
        Py_INCREF(u->url);
        PyList_SET_ITEM(cols[1], i, u->url);
        for (j = 0; j < nf; j++) {
            uint32_t m = st[row] + (uint32_t)j;
            value = PyBytes_FromStringAndSize(data + offsets[m], (Py_ssize_t)sizes[m]);
            if (value == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyList_SET_ITEM(cols[j + 2], i, value);
        }
    }
    return out;
none:
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *gather_samples(PyObject *self, PyObject *args)
{
    PyObject *tables, *endobj, *rowobj, *list = NULL;
    Py_buffer nums = {0}, rows = {0}; /* nums: the shards' ends */
    gather_table *t = NULL;
    Py_ssize_t count = 0, n, i, last = 0;
    Py_ssize_t *which = NULL; /* per sample: its table */
    long long *local = NULL;  /* per sample: its row in its shard */
    int columns = 0;

    (void)self;
    if (!PyArg_ParseTuple(args, "O!OO|p", &PyDict_Type, &tables, &endobj, &rowobj, &columns))
        return NULL;
    if (PyObject_GetBuffer(endobj, &nums, PyBUF_ND) < 0)
        return NULL;
    if (PyObject_GetBuffer(rowobj, &rows, PyBUF_ND) < 0) {
        PyBuffer_Release(&nums);
        return NULL;
    }
    if (nums.itemsize != 8 || rows.itemsize != 8) {
        PyErr_SetString(PyExc_ValueError, "gather_samples: ends and rows must be buffers of 8-byte integers");
        goto done;
    }
    n = rows.len / 8;
    which = PyMem_Malloc((size_t)(n + 1) * sizeof *which);
    local = PyMem_Malloc((size_t)(n + 1) * sizeof *local);
    t = PyMem_Calloc((size_t)n + 1, sizeof *t); /* at most one table per sample */
    if (t == NULL || which == NULL || local == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* The batch is read in passes over all of its samples, each prefetching what the next one reads (index
     * entries, then member entries, then the data): the cache misses of a random batch overlap instead of
     * following one another. Pass 1: each sample's table (taken from tables at its first use) and row. */
    for (i = 0; i < n; i++) {
        const long long *ends = (const long long *)nums.buf, at = ((const long long *)rows.buf)[i];
        Py_ssize_t lo = 0, hi = nums.len / 8;
        long long want, row;
        gather_table *s;
        if (count > 0 && at < ends[t[last].number] && (t[last].number == 0 || at >= ends[t[last].number - 1]))
            lo = hi = t[last].number; /* the shard of the sample before */
        while (lo < hi) { /* the first shard whose end is past the row (bisect_right) */
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (ends[mid] <= at)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (at < 0 || lo >= nums.len / 8)
            goto none;
        want = lo;
        if (count == 0 || t[last].number != want) {
            Py_ssize_t j;
            for (j = 0; j < count && t[j].number != want; j++)
                ;
            if (j == count) {
                PyObject *key = PyLong_FromLongLong(want), *table;
                Py_ssize_t samples, members;
                if (key == NULL)
                    goto done;
                table = PyDict_GetItemWithError(tables, key);
                Py_DECREF(key);
                if (table == NULL) {
                    if (PyErr_Occurred())
                        goto done;
                    list = PyLong_FromLongLong(want); /* missing: the caller adds it and calls again */
                    goto done;
                }
                s = &t[count++];
                if (!gather_open(s, want, table))
                    goto none;
                samples = s->b[3].len / 4 - 1;
                members = s->b[1].len / 8;
                if (samples < 0 || s->b[4].len / 4 != samples + 1 || s->b[2].len / 8 != members ||
                    s->b[6].len / 4 != members)
                    goto none;
            }
            last = j;
        }
        s = &t[last];
        row = at - s->first;
        if (row < 0 || row >= s->b[3].len / 4 - 1)
            goto none;
        which[i] = last;
        local[i] = row;
        PREFETCH((const uint32_t *)s->b[3].buf + row);
        PREFETCH((const uint32_t *)s->b[4].buf + row);
    }
    for (i = 0; i < n; i++) {
        gather_table *s = &t[which[i]];
        const uint32_t *starts = (const uint32_t *)s->b[3].buf, *key_ends = (const uint32_t *)s->b[4].buf;
        long long row = local[i];
        uint32_t m = starts[row];
        if (m > starts[row + 1] || starts[row + 1] > (uint64_t)(s->b[1].len / 8) || key_ends[row] > key_ends[row + 1] ||
            key_ends[row + 1] > (uint64_t)s->b[5].len)
            goto none;
        PREFETCH((const uint64_t *)s->b[1].buf + m);
        PREFETCH((const uint64_t *)s->b[2].buf + m);
        PREFETCH((const uint32_t *)s->b[6].buf + m);
        PREFETCH((const char *)s->b[5].buf + key_ends[row]);
    }
    for (i = 0; i < n; i++) {
        gather_table *s = &t[which[i]];
        const uint32_t *starts = (const uint32_t *)s->b[3].buf, *ext_ids = (const uint32_t *)s->b[6].buf;
        const uint64_t *offsets = (const uint64_t *)s->b[1].buf, *sizes = (const uint64_t *)s->b[2].buf;
        const char *data = (const char *)s->b[0].buf;
        uint64_t len = (uint64_t)s->b[0].len, m;
        for (m = starts[local[i]]; m < starts[local[i] + 1]; m++) {
            uint64_t o = offsets[m], z = sizes[m], k;
            if (ext_ids[m] >= (uint64_t)PyTuple_GET_SIZE(s->exts) || o > len || z > len - o)
                goto none;
            for (k = 0; k < z && k < 512; k += 64)
                PREFETCH(data + o + k);
        }
    }
    if (columns) {
        list = n > 0 ? gather_columns(t, which, local, n) : (Py_INCREF(Py_None), Py_None);
        goto done;
    }
    list = PyList_New(n);
    if (list == NULL)
        goto done;
    for (i = 0; i < n; i++) {
        gather_table *s = &t[which[i]];
        const uint32_t *starts = (const uint32_t *)s->b[3].buf, *key_ends = (const uint32_t *)s->b[4].buf;
        const uint32_t *ext_ids = (const uint32_t *)s->b[6].buf;
        const uint64_t *offsets = (const uint64_t *)s->b[1].buf, *sizes = (const uint64_t *)s->b[2].buf;
        const char *data = (const char *)s->b[0].buf, *keys = (const char *)s->b[5].buf;
        long long row = local[i];
        uint32_t m;
        PyObject *sample = PyDict_New(), *value;

        if (sample == NULL)
            goto fail;
        PyList_SET_ITEM(list, i, sample);
        value = PyUnicode_DecodeUTF8(keys + key_ends[row], (Py_ssize_t)(key_ends[row + 1] - key_ends[row]),
                                     "surrogateescape");
        if (value == NULL || PyDict_SetItem(sample, str_key, value) < 0) {
            Py_XDECREF(value);
            goto fail;
        }
        Py_DECREF(value);
        if (PyDict_SetItem(sample, str_url, s->url) < 0)
            goto fail;
        for (m = starts[row]; m < starts[row + 1]; m++) {
            value = PyBytes_FromStringAndSize(data + offsets[m], (Py_ssize_t)sizes[m]);
            if (value == NULL || PyDict_SetItem(sample, PyTuple_GET_ITEM(s->exts, ext_ids[m]), value) < 0) {
                Py_XDECREF(value);
                goto fail;
            }
            Py_DECREF(value);
        }
    }
    goto done;
none:
    Py_CLEAR(list);
    Py_INCREF(Py_None);
    list = Py_None;
    goto done;
fail:
    Py_CLEAR(list);
done:
    if (t != NULL) {
        for (i = 0; i < count; i++) {
            while (t[i].held > 0)
                PyBuffer_Release(&t[i].b[--t[i].held]);
            Py_XDECREF(t[i].table);
        }
        PyMem_Free(t);
    }
    PyMem_Free(which);
    PyMem_Free(local);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&nums);
    return list;
}

/* permute_positions(n, rounds, positions, out) -> None
 *
 * order/permute.py's Permutation in C, the same bijection bit for bit: out[i] = perm(positions[i]) for a keyed
 * Feistel network of len(rounds) / 5 rounds over the power of two above n, with cycle walking (a value >= n is
 * encrypted again). rounds holds per round (right bits, right mask, left mask, left bits, key) as uint64;
 * positions (int64, each in 0..n-1: checked by the caller) and out (int64, writable) have the same length. */
static uint64_t splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static PyObject *permute_positions(PyObject *self, PyObject *args)
{
    unsigned long long n;
    PyObject *roundobj, *posobj, *outobj, *result = NULL;
    Py_buffer rounds = {0}, pos = {0}, out = {0};
    Py_ssize_t i, k, nr;

    (void)self;
    if (!PyArg_ParseTuple(args, "KOOO", &n, &roundobj, &posobj, &outobj))
        return NULL;
    if (PyObject_GetBuffer(roundobj, &rounds, PyBUF_ND) < 0)
        return NULL;
    if (PyObject_GetBuffer(posobj, &pos, PyBUF_ND) < 0)
        goto done;
    if (PyObject_GetBuffer(outobj, &out, PyBUF_ND | PyBUF_WRITABLE) < 0)
        goto done;
    if (rounds.itemsize != 8 || rounds.len % 40 || pos.itemsize != 8 || out.itemsize != 8 || pos.len != out.len) {
        PyErr_SetString(PyExc_ValueError, "permute_positions: rounds of 5 uint64, positions and out of equal "
                                          "length, 8-byte items");
        goto done;
    }
    nr = rounds.len / 40;
    {
        const uint64_t *r = (const uint64_t *)rounds.buf;
        const uint64_t *p = (const uint64_t *)pos.buf;
        uint64_t *o = (uint64_t *)out.buf;
        for (i = 0; i < pos.len / 8; i++) {
            uint64_t x = p[i];
            do {
                for (k = 0; k < nr; k++) {
                    const uint64_t *q = r + 5 * k; /* right bits, right mask, left mask, left bits, key */
                    uint64_t left = x >> q[0], right = x & q[1];
                    x = (right << q[3]) | (left ^ (splitmix_mix(right ^ q[4]) & q[2]));
                }
            } while (x >= n && n > 0);
            o[i] = x;
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    if (out.obj != NULL)
        PyBuffer_Release(&out);
    if (pos.obj != NULL)
        PyBuffer_Release(&pos);
    PyBuffer_Release(&rounds);
    return result;
}
/* ---- Chunks: serving the samples of lists one by one (the reader cursor's __next__) ----
 *
 * A base type for the pipeline's shard reader (pipeline/stages/reading.py, ReaderCursor): ``_chunk`` (a list),
 * ``_i`` (the next item of it) and ``_count`` (items served) are its attributes; ``next()`` serves
 * ``_chunk[_i]`` and advances both, and at the end of the list calls ``self._fill()``, which sets the next list
 * (and ``_i``) and returns True, or returns False at the end (StopIteration). The same as the pure-Python
 * ``shardstream.tar.native.PyChunks``, without an interpreter frame per item. */

typedef struct {
    PyObject_HEAD
    PyObject *chunk;
    Py_ssize_t i, count;
} ChunksObject;

static PyObject *str_fill; /* "_fill" (interned) */

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

static PyTypeObject ChunksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shardstream.tar._scan.Chunks",
    .tp_basicsize = sizeof(ChunksObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Serves the items of lists one by one; self._fill() gives the next list (see _scan.c).",
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
 * with the same behaviour, are shardstream.tar.native.PyTally and PyRelay. */

static PyObject *str_ended, *str_step; /* "_ended", "_step" (interned) */

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

static PyTypeObject TallyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shardstream.tar._scan.Tally",
    .tp_basicsize = sizeof(TallyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Keeps every count-th item of upstream from index; self._ended() at its end (see _scan.c).",
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

static PyTypeObject RelayType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shardstream.tar._scan.Relay",
    .tp_basicsize = sizeof(RelayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Serves the items of self._chain once started; self._step() otherwise (see _scan.c).",
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)relay_dealloc,
    .tp_traverse = (traverseproc)relay_traverse,
    .tp_clear = (inquiry)relay_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)relay_next,
    .tp_members = relay_members,
};

static PyObject *pack_members(PyObject *self, PyObject *args); /* at the end of the file */

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buf, pos, base, headers_only=False) -> (members, new_pos)\n\n"
     "Walk plain tar headers in buf from pos; members are (name, data, base + data position) tuples,\n"
     "or (name, size, base + data position) with headers_only (the data is checked to be in buf, not copied).\n"
     "Stops at the start of the first member it does not handle (or that the buffer does not hold)."},
    {"scan_samples", scan_samples, METH_VARARGS,
     "scan_samples(buf, pos, url, seen, current, current_key, split, keys=None, local=None)\n"
     "    -> (samples, new_pos, current, current_key, need)\n\n"
     "Walk plain tar headers in buf from pos as scan() does and group the regular members into sample dicts\n"
     "with the default key rule (split: the Python splitter, used for non-ASCII names). seen (a set of the keys\n"
     "so far, updated), current (the sample in progress or None) and current_key carry the grouping state across\n"
     "calls. samples are the samples completed in this call. It stops before the first member it does not handle:\n"
     "need > 0: the buffer must hold need bytes from new_pos to go on; need == 0: a header the Python walk must\n"
     "read; need == -1: a member Python's grouping must see (missing, empty or '__' extension, a repeated\n"
     "extension, a key seen before).\n"
     "With keys (a list), the keys of a shard whose keys increase go to keys (no hashing) while seen is empty;\n"
     "at the first key out of order they move into seen. The keys seen so far are then seen | set(keys).\n"
     "With local (not None), each complete sample gets '__local_path__': local, after its fields."},
    {"scan_columns", scan_columns, METH_VARARGS,
     "scan_columns(buf, pos, url, seen, current, current_key, split, keys, out, limit, fields=None, modes=b'',\n"
     "             exact=True) -> (rows, new_pos, current, current_key, need, odd)\n\n"
     "The walk and grouping of scan_samples (same state, same stops), complete samples appended to columns\n"
     "instead of returned as dicts; rows: the samples added in this call.\n"
     "fields None (batch mode): out is the batch {field: list} being filled, as ColumnBatches.add fills it\n"
     "('__key__', '__url__' and the fields, bytes); need == -2: the batch holds limit rows, or the next sample\n"
     "has other fields (the batch ends before it).\n"
     "fields a tuple of str (run mode): out holds a list per field; a sample with each of the fields (and no\n"
     "other one, with exact) whose values all convert by their mode (modes: a byte per field, 0 bytes, 1 str\n"
     "= bytes.decode, 3 int of [+-]?[0-9]{1,18}, as slice_column) adds a row; any other sample ends the walk\n"
     "as odd (its dict), right after the next sample's first member (need == -2, as at limit rows)."},
    {"slice_column", slice_column, METH_VARARGS,
     "slice_column(buf, offsets, sizes, start, stop, mode) -> list | None\n\n"
     "Rows start..stop of a column at buf[offsets[i]:offsets[i] + sizes[i]] (8-byte integer buffers) as bytes\n"
     "(mode 0), str (1: strict UTF-8; 2: surrogateescape) or int (3: [+-]?[0-9]{1,18} only). Modes 1 and 3\n"
     "return None when a row is not of that simple form: decode the column in Python then."},
    {"gather_samples", gather_samples, METH_VARARGS,
     "gather_samples(tables, ends, rows, columns=False) -> list[dict] | dict[str, list] | int | None\n\n"
     "Sample i is dataset row rows[i], in the shard whose rows end before ends[shard] (8-byte integer buffers),\n"
     "read at the offsets of the shard's index as {'__key__': key, '__url__': url, ext: bytes, ...}; tables maps shard numbers to\n"
     "(buffer, url, first, offsets, sizes, starts, key_ends, key_bytes, ext_ids, extensions). Returns the number\n"
     "of a shard that tables lacks (add it, call again), or None when a table or row does not fit: read the\n"
     "samples one by one then. columns: the batch as {field: [value, ...]} (None unless every sample has the\n"
     "first one's fields in the same order)."},
    {"permute_positions", permute_positions, METH_VARARGS,
     "permute_positions(n, rounds, positions, out) -> None\n\n"
     "order.Permutation's keyed Feistel bijection of range(n) in C: out[i] = perm(positions[i]) (int64 buffers;\n"
     "rounds: uint64 (right bits, right mask, left mask, left bits, key) per round; positions checked by the caller)."},
    {"pack_members", pack_members, METH_VARARGS,
     "pack_members(buf, pos, template, members, direct) -> offsets | None\n\n"
     "Append regular-file members (name: bytes, data: bytes-like) to the bytearray buf as one-block ustar\n"
     "headers filled into template (512 bytes) + data + NUL padding; returns the data offsets (pos + position).\n"
     "Returns None, appending nothing, when a member needs the Python path (a name empty, over 100 bytes or with\n"
     "NUL; data of direct bytes or more)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "shardstream.tar._scan",
    .m_doc = "C fast path of the tar header walk (see reader.py) and of the default sample grouping (samples.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    str_key = PyUnicode_InternFromString("__key__");
    str_url = PyUnicode_InternFromString("__url__");
    str_local = PyUnicode_InternFromString("__local_path__");
    str_fill = PyUnicode_InternFromString("_fill");
    str_ended = PyUnicode_InternFromString("_ended");
    str_step = PyUnicode_InternFromString("_step");
    if (str_key == NULL || str_url == NULL || str_local == NULL || str_fill == NULL || str_ended == NULL || str_step == NULL ||
        PyType_Ready(&ChunksType) < 0 || PyType_Ready(&TallyType) < 0 || PyType_Ready(&RelayType) < 0)
        return NULL;
    {
        PyObject *m = PyModule_Create(&module);
        if (m != NULL && (PyModule_AddObjectRef(m, "Chunks", (PyObject *)&ChunksType) < 0 ||
                          PyModule_AddObjectRef(m, "Tally", (PyObject *)&TallyType) < 0 ||
                          PyModule_AddObjectRef(m, "Relay", (PyObject *)&RelayType) < 0 ||
                          PyModule_AddIntConstant(m, "PREFETCH_AHEAD", PREFETCH_AHEAD) < 0))
            Py_CLEAR(m);
        return m;
    }
}

/* pack_members(buf, pos, template, members, direct) -> offsets | None
 *
 * The writer's hot loop (TarStreamWriter.add_many in writer.py, whose pure-Python fast path writes the same
 * bytes): for each (name, data) member, a ustar header (template with name, size and checksum filled in), the
 * data and NULs to the next 512-byte boundary, appended to the bytearray buf. All or nothing: a member the C
 * path does not take (see the docstring) makes it return None before anything is appended. */
#define PACK_STACK 16

static PyObject *pack_members(PyObject *self, PyObject *args)
{
    PyObject *buf, *members, *seq = NULL, *offsets = NULL, *result = NULL;
    Py_ssize_t pos, direct, n, i, taken = 0, old, total = 0;
    Py_buffer tpl = {0};
    Py_buffer stack[PACK_STACK];
    Py_buffer *views = stack;
    (void)self;

    if (!PyArg_ParseTuple(args, "O!ny*On", &PyByteArray_Type, &buf, &pos, &tpl, &members, &direct))
        return NULL;
    if (tpl.len != BLOCK) {
        PyErr_SetString(PyExc_ValueError, "template must be 512 bytes");
        goto done;
    }
    seq = PySequence_Fast(members, "members must be a sequence of (name, data)");
    if (seq == NULL)
        goto done;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n > PACK_STACK) {
        views = PyMem_Malloc(sizeof(Py_buffer) * (size_t)n);
        if (views == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (i = 0; i < n; i++) { /* check every member and take its buffer before anything is written */
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *name;
        Py_ssize_t len;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2)
            goto python;
        name = PyTuple_GET_ITEM(item, 0);
        if (!PyBytes_Check(name))
            goto python;
        len = PyBytes_GET_SIZE(name);
        if (len == 0 || len > 100 || memchr(PyBytes_AS_STRING(name), 0, (size_t)len) != NULL)
            goto python;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &views[i], PyBUF_SIMPLE) < 0) {
            PyErr_Clear(); /* not bytes-like: the Python path says so in its own words */
            goto python;
        }
        taken++;
        if (views[i].len >= direct) /* also keeps every size below 8**11: no PAX record */
            goto python;
        total += BLOCK + views[i].len + (-views[i].len & (BLOCK - 1));
    }
    offsets = PyList_New(n);
    if (offsets == NULL)
        goto done;
    {
        Py_ssize_t at = 0;
        for (i = 0; i < n; i++) { /* the offsets first: once the buffer grows, nothing may fail */
            PyObject *offset = PyLong_FromSsize_t(pos + at + BLOCK);
            if (offset == NULL)
                goto done;
            PyList_SET_ITEM(offsets, i, offset);
            at += BLOCK + views[i].len + (-views[i].len & (BLOCK - 1));
        }
    }
    old = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, old + total) < 0)
        goto done;
    {
        unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(buf) + old;
        for (i = 0; i < n; i++) {
            PyObject *name = PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(seq, i), 0);
            unsigned char *h = out;
            Py_ssize_t size = views[i].len, pad = -size & (BLOCK - 1), k;
            uint64_t v = (uint64_t)size;
            unsigned long sum = 0;
            memcpy(h, tpl.buf, BLOCK);
            memcpy(h, PyBytes_AS_STRING(name), (size_t)PyBytes_GET_SIZE(name));
            for (k = 10; k >= 0; k--) { /* "%011o\0" */
                h[124 + k] = (unsigned char)('0' + (v & 7));
                v >>= 3;
            }
            h[135] = 0;
            for (k = 0; k < BLOCK; k++) /* the checksum field holds spaces in the template */
                sum += h[k];
            for (k = 5; k >= 0; k--) { /* "%06o\0 " */
                h[148 + k] = (unsigned char)('0' + (sum & 7));
                sum >>= 3;
            }
            h[154] = 0;
            h[155] = ' ';
            memcpy(out + BLOCK, views[i].buf, (size_t)size);
            memset(out + BLOCK + size, 0, (size_t)pad);
            out += BLOCK + size + pad;
        }
    }
    result = offsets;
    offsets = NULL;
    goto done;
python:
    result = Py_None;
    Py_INCREF(result);
done:
    for (i = 0; i < taken; i++)
        PyBuffer_Release(&views[i]);
    if (views != stack)
        PyMem_Free(views);
    Py_XDECREF(offsets);
    Py_XDECREF(seq);
    PyBuffer_Release(&tpl);
    return result;
}
