/* shardstream._native._scan, the optional C accelerator (C99, CPython API only): what its files share.
 *
 * _scan_walk.c    the tar header walk (scan; next_member, used by the grouping); _scan_fields.h, which only it
 *                 includes: reading a header block's fields (octal numbers, the byte sum, name lengths)
 * _scan_group.c   grouping members into samples with the default key rule: the walk with sinks (group_members)
 * _scan_samples.c the dict sink (scan_samples)
 * _scan_convert.c values converted by mode (convert_value, slice_column), int columns for numpy (fill_int64)
 * _scan_columns.c the column sink (scan_columns)
 * _scan_gather.c  samples and columns read at indexed offsets (gather_samples), the permutation (permute_positions)
 * _scan_types.c   Chunks, Tally and Relay: base types that pass items on without an interpreter frame (their
 *                 hooks: HOOK_* below)
 * _scan.c         pack_members (the writer's hot loop), the method table and the module
 */
#ifndef SHARDSTREAM_SCAN_H
#define SHARDSTREAM_SCAN_H
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

/* One member as the walk found it: a regular file (name, data position and size), or a no-data type. */
typedef struct {
    span name;
    Py_ssize_t data_pos;
    uint64_t size;
    Py_ssize_t next; /* the position after the member (its padded data included) */
} member;

enum { M_FILE, M_NODATA, M_NEED, M_OTHER };

/* How far ahead of a header the walk prefetches, and how much: when the buffer is a memory map of the page cache
 * (tar/buffers.py, WindowBuffer), the walk is the first to touch each line, and each header depends on the one before;
 * the prefetch overlaps those misses (exported as _scan.PREFETCH_AHEAD: source_for maps files only when it is).
 * 2 KiB ahead is two small members ahead; at 1 KiB (one member) part of the misses stayed in the walk: 5-6 % more
 * CPU for small samples, 3 % for JPEG-sized ones, the same for 8 KiB members
 * (benchmarks/results/per-sample-rows.md). */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_AHEAD 2048
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH_AHEAD 0 /* no prefetch: local files are read with preadv */
#define PREFETCH(p) ((void)(p))
#endif
#define PREFETCH_BYTES 768

#define EXT_CACHE 8

typedef struct {
    PyObject *strs[EXT_CACHE]; /* recent extension strings (owned), compared by their ASCII bytes */
    int n, next, last;         /* how many; the one to replace next when full; the one found last */
} ext_cache;

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

/* a == b for two field names, as the sinks compare them: the same object, or str of the same characters (short
 * compact ASCII ones, the extensions the walk makes, byte by byte inline; others by their hashes first where both
 * are cached, as the names of a template's keys are, then kind, length and bytes); anything else by ==. 1, 0, or -1
 * on error. */
static inline int same_name(PyObject *a, PyObject *b)
{
    Py_ssize_t n, i;
    Py_hash_t ha, hb;
    if (a == b)
        return 1;
    if (!PyUnicode_Check(a) || !PyUnicode_Check(b))
        return PyObject_RichCompareBool(a, b, Py_EQ);
    if (PyUnicode_IS_COMPACT_ASCII(a) && PyUnicode_IS_COMPACT_ASCII(b) && (n = PyUnicode_GET_LENGTH(a)) <= 16) {
        if (n != PyUnicode_GET_LENGTH(b))
            return 0;
        for (i = 0; i < n; i++)
            if (PyUnicode_1BYTE_DATA(a)[i] != PyUnicode_1BYTE_DATA(b)[i])
                return 0;
        return 1;
    }
    ha = ((PyASCIIObject *)a)->hash;
    hb = ((PyASCIIObject *)b)->hash;
    if (ha != -1 && hb != -1 && ha != hb)
        return 0;
    n = PyUnicode_GET_LENGTH(a);
    return n == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
}

/* The grouping state of a shard that the walk carries across calls (see scan_samples' docstring). */
typedef struct {
    PyObject *seen, *keys, *split;
    ext_cache cache;
} grouping;

/* _scan_walk.c */
int next_member(const unsigned char *buf, Py_ssize_t end, Py_ssize_t pos, char joined[256], member *m,
                Py_ssize_t *need);
PyObject *scan(PyObject *self, PyObject *args);

/* _scan_group.c */
extern PyObject *str_key, *str_url, *str_local; /* "__key__", "__url__", "__local_path__" (interned) */
int check_walk(Py_buffer *view, Py_ssize_t pos, PyObject *current, PyObject *current_key, PyObject *keys,
               const char *who);
void clear_cache(ext_cache *c);
PyObject *stored_keys(PyObject *self, PyObject *arg);
Py_ssize_t group_members(const unsigned char *buf, Py_ssize_t end, Py_ssize_t pos, grouping *g, sink *s,
                         Py_ssize_t *need);

/* _scan_samples.c */
PyObject *scan_samples(PyObject *self, PyObject *args);

/* _scan_convert.c */
/* One value converted by mode (see slice_column): 1 with *out set (a new reference), 0 when it is not of the mode's
 * simple form (nothing set, no error: the caller leaves it to the Python codec), -1 on error. */
int convert_value(const char *p, Py_ssize_t n, int mode, PyObject **out);
/* Buffers of a and b with the same flags: 0, or -1 with an error set and neither held. */
int get_two_buffers(PyObject *a, Py_buffer *va, PyObject *b, Py_buffer *vb, int flags);
PyObject *slice_column(PyObject *self, PyObject *args);
PyObject *fill_int64(PyObject *self, PyObject *args);

/* _scan_columns.c */
#define MAX_WANTED 16 /* the most fields scan_columns converts in run mode (exported as _scan.MAX_WANTED) */
PyObject *scan_columns(PyObject *self, PyObject *args);

/* _scan_gather.c */
PyObject *gather_samples(PyObject *self, PyObject *args);
PyObject *permute_positions(PyObject *self, PyObject *args);

/* _scan_types.c */
/* The hooks that the base types call on their subclasses (Python methods, by name): the contract with
 * shardstream.pipeline.bases, whose HOOKS table names the same methods. The module exports these as
 * _scan.HOOKS ({"Chunks": "_fill", ...}); tests/native/test_twins.py checks that both tables agree. */
#define HOOK_CHUNKS "_fill"  /* Chunks: the next list is set (True), or the end (False) */
#define HOOK_TALLY "_ended"  /* Tally: upstream ended (may raise) */
#define HOOK_RELAY "_step"   /* Relay: the next item when no chain is being served */
extern PyObject *str_fill, *str_ended, *str_step; /* HOOK_CHUNKS, HOOK_TALLY, HOOK_RELAY (interned) */
extern PyTypeObject ChunksType, TallyType, RelayType;

#endif
