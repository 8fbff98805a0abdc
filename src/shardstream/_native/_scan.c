/* shardstream._native._scan: the module (its method table and init) and pack_members, the writer's hot loop. The
 * other parts are in _scan_*.c; _scan.h lists them and what they share. */
#include "_scan.h"

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
     "extension, a key seen before). A sample is complete at the header of a member that starts another one: when\n"
     "buf ends in that member's data, the sample is in samples and current is None (the member starts next call).\n"
     "With keys (a bytearray), the keys of a shard whose keys increase are stored in keys as bytes (no str,\n"
     "no hashing) while seen is empty; at the first key out of order they move into seen. The keys seen so far\n"
     "are then seen | set(stored_keys(keys)).\n"
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
     "as odd (its dict), right after the next sample's first member or its header (need == -2, as at limit rows)."},
    {"stored_keys", stored_keys, METH_O,
     "stored_keys(keys) -> list[str]\n\n"
     "The keys scan_samples and scan_columns stored in the bytearray keys, in order."},
    {"slice_column", slice_column, METH_VARARGS,
     "slice_column(buf, offsets, sizes, start, stop, mode) -> list | None\n\n"
     "Rows start..stop of a column at buf[offsets[i]:offsets[i] + sizes[i]] (8-byte integer buffers) as bytes\n"
     "(mode 0), str (1: strict UTF-8; 2: surrogateescape) or int (3: [+-]?[0-9]{1,18} only). Modes 1 and 3\n"
     "return None when a row is not of that simple form: decode the column in Python then."},
    {"fill_int64", fill_int64, METH_VARARGS,
     "fill_int64(column, out) -> bool\n\n"
     "Write the ints of the list column into out (a writable buffer of len(column) 8-byte items, e.g. an empty\n"
     "int64 numpy array): True when every item is an exact int in the int64 range; False at the first that is\n"
     "not (out then partly written)."},
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
    .m_name = "shardstream._native._scan",
    .m_doc = "The optional C accelerator of shardstream: reached only through the wrappers that shardstream._native\n"
              "names (the tar walk and packing, the grouping into samples and columns, the index gather, the\n"
              "permutation, the pipeline's base types).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    str_key = PyUnicode_InternFromString("__key__");
    str_url = PyUnicode_InternFromString("__url__");
    str_local = PyUnicode_InternFromString("__local_path__");
    str_fill = PyUnicode_InternFromString(HOOK_CHUNKS);
    str_ended = PyUnicode_InternFromString(HOOK_TALLY);
    str_step = PyUnicode_InternFromString(HOOK_RELAY);
    if (str_key == NULL || str_url == NULL || str_local == NULL || str_fill == NULL || str_ended == NULL || str_step == NULL ||
        PyType_Ready(&ChunksType) < 0 || PyType_Ready(&TallyType) < 0 || PyType_Ready(&RelayType) < 0)
        return NULL;
    {
        PyObject *m = PyModule_Create(&module);
        PyObject *hooks = Py_BuildValue("{sOsOsO}", "Chunks", str_fill, "Tally", str_ended, "Relay", str_step);
        if (m != NULL && (hooks == NULL || PyModule_AddObjectRef(m, "HOOKS", hooks) < 0 ||
                          PyModule_AddObjectRef(m, "Chunks", (PyObject *)&ChunksType) < 0 ||
                          PyModule_AddObjectRef(m, "Tally", (PyObject *)&TallyType) < 0 ||
                          PyModule_AddObjectRef(m, "Relay", (PyObject *)&RelayType) < 0 ||
                          PyModule_AddIntConstant(m, "PREFETCH_AHEAD", PREFETCH_AHEAD) < 0 ||
                          PyModule_AddIntConstant(m, "MAX_WANTED", MAX_WANTED) < 0))
            Py_CLEAR(m);
        Py_XDECREF(hooks);
        return m;
    }
}

/* pack_members(buf, pos, template, members, direct) -> offsets | None
 *
 * The writer's hot loop (TarStreamWriter.add_many in tar/writer.py, whose pure-Python fast path writes the same
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
