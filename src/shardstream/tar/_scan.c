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
#include <stdint.h>
#include <string.h>

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

/* The stored checksum equals the unsigned or the signed byte sum (chksum field counted as spaces). */
static int checksum_ok(const unsigned char *h)
{
    uint64_t stored;
    int64_t unsigned_sum = 8 * ' ', signed_sum = 8 * ' ';
    int i;

    if (parse_octal(h + 148, 8, &stored) < 0)
        return 0;
    for (i = 0; i < BLOCK; i++) {
        if (i == 148)
            i = 156;
        unsigned_sum += h[i];
        signed_sum += (signed char)h[i];
    }
    return (int64_t)stored == unsigned_sum || (int64_t)stored == signed_sum;
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

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, start, end;
    long long base;
    int headers_only = 0;
    const unsigned char *buf;
    PyObject *members;
    /* extended-header state of the member being read, reset at each member start */
    span longname = {NULL, 0}, pax_path = {NULL, 0};
    int has_pax_size = 0;
    uint64_t pax_size = 0;
    char joined[256]; /* ustar prefix "/" name: at most 155 + 1 + 100 bytes */

    (void)self;
    if (!PyArg_ParseTuple(args, "y*nL|p", &view, &pos, &base, &headers_only))
        return NULL;
    buf = view.buf;
    end = view.len;
    if (pos < 0 || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: position outside the buffer");
        return NULL;
    }
    members = PyList_New(0);
    if (members == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    start = pos; /* the first header of the current member (its extended headers included) */
    while (end - pos >= BLOCK) {
        const unsigned char *h = buf + pos;
        uint64_t size, padded;
        unsigned char type = h[156];
        span name;

        if (is_zero_block(h) || !checksum_ok(h) || parse_octal(h + 124, 12, &size) < 0)
            break;
        padded = (size + BLOCK - 1) & ~(uint64_t)(BLOCK - 1);
        if (type == 'L' || type == 'K' || type == 'x') {
            if (padded > (uint64_t)(end - pos - BLOCK))
                break;
            if (type == 'L') {
                longname.data = h + BLOCK;
                longname.len = (Py_ssize_t)field_len(h + BLOCK, (size_t)size);
            } else if (type == 'x' && parse_pax(h + BLOCK, (Py_ssize_t)size, &pax_path, &has_pax_size, &pax_size) < 0) {
                break;
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
            if (padded > (uint64_t)(end - pos - BLOCK))
                break;
            if (emit(members, buf, name, pos + BLOCK, size, base, headers_only) < 0) {
                Py_DECREF(members);
                PyBuffer_Release(&view);
                return NULL;
            }
            pos += BLOCK + (Py_ssize_t)padded;
        } else if (type >= '1' && type <= '6') {
            pos += BLOCK; /* no data blocks follow links, devices, directories, fifos */
        } else {
            break; /* 'g', sparse, vendor and unknown types: the Python walk decides */
        }
        start = pos;
        longname.len = pax_path.len = 0;
        has_pax_size = 0;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", members, start);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buf, pos, base, headers_only=False) -> (members, new_pos)\n\n"
     "Walk plain tar headers in buf from pos; members are (name, data, base + data position) tuples,\n"
     "or (name, size, base + data position) with headers_only (the data is checked to be in buf, not copied).\n"
     "Stops at the start of the first member it does not handle (or that the buffer does not hold)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "shardstream.tar._scan",
    .m_doc = "C fast path of the tar header walk (see reader.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    return PyModule_Create(&module);
}
