#include "_scan.h"

/* gather_samples(tables, ends, rows, columns=False) -> list[dict] | dict[str, list] | int | None
 *
 * The random-access reader's batch (IndexedDataset.__getitems__ in indexed/dataset.py, whose per-sample path
 * OpenShard.sample gives the same dicts): sample i of the batch is dataset row rows[i], in the shard whose
 * rows end before ends[shard] (ends: every shard's, increasing), read out of that shard's buffer at the
 * offsets of its index, as {"__key__": key, "__url__": url, ext: bytes, ...} (members in archive order).
 * tables maps shard numbers to ShardTable named tuples (indexed/opened.py; read here by position, in this order)
 * (buffer, url, first, offsets, sizes, starts, key_ends, key_bytes, ext_ids, extensions): the shard's memory
 * map, its URL, its first row, the index arrays (8-byte offsets and sizes, 4-byte starts, key ends and
 * extension numbers, the keys end to end) and the extension strings. ends and rows are 8-byte integers.
 * Returns, having made nothing, the number of the first shard of the batch that tables lacks (an int: the
 * caller adds it and calls again), or None when a table or a row does not fit (a row outside the dataset,
 * other item sizes, a member or key outside its arrays or buffer): the caller then reads the batch sample by
 * sample. With columns, the batch as the default collation makes it of those dicts (see gather_columns), or None.
 */
#define GATHER_BUFFERS 7
#undef PREFETCH /* _scan.h's, for the header walk; the gather's own below */
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

PyObject *gather_samples(PyObject *self, PyObject *args)
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
    if (get_two_buffers(endobj, &nums, rowobj, &rows, PyBUF_ND) < 0)
        return NULL;
    if (nums.itemsize != 8 || rows.itemsize != 8) {
        PyErr_SetString(PyExc_ValueError, "gather_samples: ends and rows must be buffers of 8-byte integers");
        goto done;
    }
    n = rows.len / 8;
    which = PyMem_Malloc((size_t)(n + 1) * sizeof *which);
    local = PyMem_Malloc((size_t)(n + 1) * sizeof *local);
    /* at most one table per sample and per shard; each is set up when first used (only the first count are) */
    t = PyMem_Malloc(((size_t)(n < nums.len / 8 ? n : nums.len / 8) + 1) * sizeof *t);
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
                s->held = 0;
                s->table = NULL;
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

PyObject *permute_positions(PyObject *self, PyObject *args)
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
