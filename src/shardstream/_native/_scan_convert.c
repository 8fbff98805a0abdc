/* Values converted by mode: one value (convert_value, also used by the column sink), a column of rows at offsets
 * in a buffer (slice_column), and a column of Python ints packed into an int64 array for numpy (fill_int64). */
#include "_scan.h"

/* Whether the n bytes at p are all ASCII: 32 bytes a step with SSE2 (x86-64), 8 elsewhere and for the tail. */
static int all_ascii(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    uint64_t word = 0, x;
#if defined(__SSE2__) && defined(__x86_64__)
    __m128i acc = _mm_setzero_si128();
    for (; i + 32 <= n; i += 32)
        acc = _mm_or_si128(acc, _mm_or_si128(_mm_loadu_si128((const __m128i *)(p + i)),
                                              _mm_loadu_si128((const __m128i *)(p + i + 16))));
    if (_mm_movemask_epi8(acc))
        return 0;
#endif
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, p + i, 8);
        word |= x;
    }
    for (; i < n; i++)
        word |= p[i];
    return (word & 0x8080808080808080ULL) == 0;
}

/* The str of n bytes of UTF-8 (errors: NULL for strict, or "surrogateescape"). ASCII text, the common case, is
 * checked and copied into a new compact ASCII str, the object PyUnicode_DecodeUTF8 makes of it, without the
 * decoder's own copy loop (8 bytes a step); other text (and 0 or 1 byte, which the decoder serves from its singletons) goes
 * through PyUnicode_DecodeUTF8. */
static PyObject *utf8_str(const char *p, Py_ssize_t n, const char *errors)
{
    PyObject *s;
    if (n < 2 || !all_ascii((const unsigned char *)p, n))
        return PyUnicode_DecodeUTF8(p, n, errors);
    if ((s = PyUnicode_New(n, 127)) != NULL)
        memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

int get_two_buffers(PyObject *a, Py_buffer *va, PyObject *b, Py_buffer *vb, int flags)
{
    if (PyObject_GetBuffer(a, va, flags) < 0)
        return -1;
    if (PyObject_GetBuffer(b, vb, flags) < 0) {
        PyBuffer_Release(va);
        return -1;
    }
    return 0;
}

/* One value of a column, converted by mode (_scan.h says what it returns). */
int convert_value(const char *p, Py_ssize_t n, int mode, PyObject **out)
{
    if (mode == 0) {
        *out = PyBytes_FromStringAndSize(p, n);
    } else if (mode == 1 || mode == 2) {
        *out = utf8_str(p, n, mode == 2 ? "surrogateescape" : NULL);
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
PyObject *slice_column(PyObject *self, PyObject *args)
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
    if (get_two_buffers(offobj, &off, sizeobj, &size, PyBUF_C_CONTIGUOUS) < 0) {
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

/* fill_int64(column, out) -> bool
 *
 * Write the Python ints of the list column into out (a writable C-contiguous buffer of len(column) 8-byte
 * items, e.g. an empty int64 numpy array) when every item is an exact int in the int64 range: True. False, with
 * out partly written, at the first item that is not (a bool, a float, a larger int...): np.array(column) then
 * gives what numpy makes of the column. */
PyObject *fill_int64(PyObject *self, PyObject *args)
{
    PyObject *column, *outobj, *result = Py_False;
    Py_buffer out;
    Py_ssize_t i, n;
    int overflow;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &column, &outobj))
        return NULL;
    if (PyObject_GetBuffer(outobj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    n = PyList_GET_SIZE(column);
    if (out.itemsize != 8 || out.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "fill_int64: out must hold one 8-byte item per item of the column");
        PyBuffer_Release(&out);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(column, i);
        long long value;
        if (!PyLong_CheckExact(item))
            goto done;
        value = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow)
            goto done;
        ((int64_t *)out.buf)[i] = (int64_t)value;
    }
    result = Py_True;
done:
    PyBuffer_Release(&out);
    Py_INCREF(result);
    return result;
}
