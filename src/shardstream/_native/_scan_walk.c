/* shardstream._native._scan: the fast path of the tar header walk (optional; C99, CPython API only).
 *
 * scan(buf, pos, base) -> (members, new_pos)
 *
 * Walks consecutive tar headers in the bytes-like ``buf`` from ``pos`` and returns the regular-file members
 * it passed as ``(name: str, data: bytes, data_offset: int)`` tuples (``data_offset`` = ``base`` + position
 * in ``buf``), exactly as the pure-Python walk in tar/reader.py yields them, and the position where it stopped.
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
#include "_scan.h"
#include "_scan_fields.h"

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


enum { HEADER = -1 }; /* read_header: a verified header block (M_NEED and M_OTHER as next_member's) */

/* What the extended headers before a member set: a GNU long name ('L'), a PAX path and size ('x'). */
typedef struct {
    span longname, pax_path;
    int has_pax_size;
    uint64_t pax_size;
} extended;

/* Check the header block at ``pos`` of the member that starts at ``start``, prefetching ahead, and read its size. */
static HOT_INLINE int read_header(const unsigned char *buf, Py_ssize_t end, Py_ssize_t start, Py_ssize_t pos,
                                  uint64_t *size, Py_ssize_t *need)
{
    const unsigned char *h = buf + pos;
    uint32_t sum;

    if (end - pos < BLOCK) {
        *need = pos - start + BLOCK;
        return M_NEED;
    }
    if (PREFETCH_AHEAD && end - pos >= PREFETCH_AHEAD + PREFETCH_BYTES) /* the next member, while this one is read */
        for (int line = 0; line < PREFETCH_BYTES; line += 64)
            PREFETCH(h + PREFETCH_AHEAD + line);
    sum = block_sum(h);
    if (sum == 0 || !checksum_ok(h, sum) || parse_size(h + 124, size) < 0) /* sum 0: a zero block */
        return M_OTHER;
    return HEADER;
}

/* The member of ``start`` whose own header, read at ``pos``, is not an extended one; x: what its extended headers
 * set (NULL: it has none). */
static HOT_INLINE int own_header(const unsigned char *buf, Py_ssize_t end, Py_ssize_t start, Py_ssize_t pos,
                                 uint64_t size, const extended *x, char joined[256], member *m, Py_ssize_t *need)
{
    const unsigned char *h = buf + pos;
    unsigned char type = h[156];
    uint64_t padded;
    span name;

    name.data = h;
    name.len = (Py_ssize_t)header_field_len(h, 100);
    if (h[345] != 0 && memcmp(h + 257, "ustar\0", 6) == 0) {
        size_t prefix_len = header_field_len(h + 345, 155);
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
    if (x != NULL) {
        if (x->pax_path.len)
            name = x->pax_path;
        else if (x->longname.len)
            name = x->longname;
        if (x->has_pax_size)
            size = x->pax_size;
    }
    if (type == '0' || type == 0 || type == '7') {
        padded = (size + BLOCK - 1) & ~(uint64_t)(BLOCK - 1);
        m->name = name; /* known even when its data is not there yet (M_NEED): the grouping may close a sample */
        if (padded > (uint64_t)(end - pos - BLOCK)) {
            *need = padded > (uint64_t)PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : pos - start + BLOCK + (Py_ssize_t)padded;
            return M_NEED;
        }
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

/* next_member of a member whose first header, read at ``pos`` (size: its size field), is an extended one. */
static COLD int extended_member(const unsigned char *buf, Py_ssize_t end, Py_ssize_t pos, uint64_t size,
                                char joined[256], member *m, Py_ssize_t *need)
{
    const Py_ssize_t start = pos;
    extended x = {{NULL, 0}, {NULL, 0}, 0, 0};

    for (;;) {
        const unsigned char *h = buf + pos;
        const unsigned char type = h[156];
        const uint64_t padded = (size + BLOCK - 1) & ~(uint64_t)(BLOCK - 1);
        int kind;

        if (type != 'L' && type != 'K' && type != 'x')
            return own_header(buf, end, start, pos, size, &x, joined, m, need);
        if (padded > (uint64_t)(end - pos - BLOCK)) {
            *need = padded > (uint64_t)PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : pos - start + BLOCK + (Py_ssize_t)padded;
            return M_NEED;
        }
        if (type == 'L') {
            x.longname.data = h + BLOCK;
            x.longname.len = (Py_ssize_t)field_len(h + BLOCK, (size_t)size);
        } else if (type == 'x' && parse_pax(h + BLOCK, (Py_ssize_t)size, &x.pax_path, &x.has_pax_size, &x.pax_size) < 0) {
            return M_OTHER;
        }
        pos += BLOCK + (Py_ssize_t)padded;
        kind = read_header(buf, end, start, pos, &size, need);
        if (kind != HEADER)
            return kind;
    }
}

/* Read the member that starts at ``pos`` (its extended headers first) in buf[0:end].
 * M_FILE / M_NODATA: *m describes it (name may point into ``joined``). M_NEED: the buffer ends before the
 * member does; *need is the number of bytes from ``pos`` known to be needed so far; m->name is set when the buffer
 * holds the headers of a regular file and only its data is missing (the caller sets m->name.data to NULL first). M_OTHER: a header this
 * walk leaves to Python (see the top of the file). The walk never consumes anything when it stops. */
int next_member(const unsigned char *buf, Py_ssize_t end, Py_ssize_t pos, char joined[256], member *m,
                Py_ssize_t *need)
{
    uint64_t size;
    unsigned char type;
    int kind = read_header(buf, end, pos, pos, &size, need);

    if (kind != HEADER)
        return kind;
    type = buf[pos + 156];
    if (type == 'L' || type == 'K' || type == 'x')
        return extended_member(buf, end, pos, size, joined, m, need);
    return own_header(buf, end, pos, pos, size, NULL, joined, m, need);
}

PyObject *scan(PyObject *self, PyObject *args)
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
