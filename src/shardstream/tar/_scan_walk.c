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
#include "_scan.h"

/* The hot path of the walk is one function (next_member); what only extended headers need is kept out of it. */
#if defined(__GNUC__) || defined(__clang__)
#define HOT_INLINE __attribute__((always_inline)) inline
#define COLD __attribute__((noinline))
#else
#define HOT_INLINE inline
#define COLD
#endif

/* An octal field as header.parse_number reads it (NUL ends it, spaces around, empty is 0), for the forms the
 * fast paths below do not take. Returns 0 and sets *out, or -1 for anything else (base-256, garbage): left to
 * Python. */
static int parse_octal(const unsigned char *field, size_t width, uint64_t *out)
{
    const unsigned char *nul;
    size_t a = 0, b, i;
    uint64_t value = 0;

    /* octal digits from the start of the field up to a NUL or the field's end */
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

/* Fast paths for the fixed forms that tar writers (GNU tar, libarchive, Python's tarfile) use: the size as 11
 * octal digits and a NUL, the checksum as 6 octal digits, a NUL and a space. Eight field bytes are read as one
 * little-endian word (the first byte lowest); a byte is an octal digit exactly when (byte & 0xF8) == '0'. Any other
 * form (or a big-endian machine) takes parse_octal, which reads these forms the same way. */
#if (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) || defined(_MSC_VER)
#define OCTAL_WORDS 1
#define DIGIT_BITS 0x0707070707070707ULL

static HOT_INLINE uint64_t load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* The value of 8 octal digits given as byte values 0..7, the first (lowest) byte the most significant: each multiply
 * adds every lane times 8, 64 or 4096 to the next lane up (no lane overflows), joining pairs of digits, then of
 * pairs, then of quads. */
static HOT_INLINE uint64_t octal8(uint64_t d)
{
    d = ((d * 0x801ULL) >> 8) & 0x003F003F003F003FULL;          /* 2 digits in each 16-bit lane */
    d = ((d * 0x400001ULL) >> 16) & 0x00000FFF00000FFFULL;      /* 4 digits in each 32-bit lane */
    return (d * 0x100000000001ULL) >> 32;                        /* 8 digits */
}
#endif

static HOT_INLINE int parse_size(const unsigned char *field, uint64_t *out)
{
#ifdef OCTAL_WORDS
    uint64_t w = load64(field), tail = load64(field + 4) >> 32; /* bytes 0-7 and 8-11 */
    if ((w & 0xF8F8F8F8F8F8F8F8ULL) == 0x3030303030303030ULL && (tail & 0xFFF8F8F8ULL) == 0x00303030ULL) {
        *out = (octal8(w & DIGIT_BITS) << 9) + (((tail & 0x070707ULL) * 0x400801ULL >> 16) & 0x1FF); /* + 3 digits */
        return 0;
    }
#endif
    return parse_octal(field, 12, out);
}

/* The stored checksum of the header h, and the sum of its 8 bytes. */
static HOT_INLINE int parse_checksum(const unsigned char *h, uint64_t *out, uint32_t *field_sum)
{
    int i;
#ifdef OCTAL_WORDS
    uint64_t w = load64(h + 148);
    if ((w & 0xFFFFF8F8F8F8F8F8ULL) == 0x2000303030303030ULL) {
        w &= 0x0000070707070707ULL;
        *field_sum = 6 * '0' + ' ' + (uint32_t)((w * 0x0101010101010101ULL) >> 56); /* the digits: at most 42 */
        *out = octal8(w << 16);
        return 0;
    }
#endif
    *field_sum = 0;
    for (i = 148; i < 156; i++)
        *field_sum += h[i];
    return parse_octal(h + 148, 8, out);
}

/* The sum of the 512 bytes of a header block, as unsigned bytes: SSE2's or AVX2's sum of absolute differences
 * from zero (one instruction per 16 or 32 bytes; AVX2 where the CPU has it, as the loader found), the plain loop
 * elsewhere. Zero exactly for a zero block. */
#if defined(__SSE2__) && defined(__x86_64__)
#define SSE2_WALK 1
#if defined(__GNUC__) || defined(__clang__)
#include <cpuid.h>
#include <immintrin.h>
#define AVX2_DISPATCH 1
static int have_avx2;

/* AVX2 is used when the CPU has it and the OS saves the YMM registers (asked with cpuid and xgetbv, not with
 * __builtin_cpu_supports, whose runtime symbol Apple's toolchain lacks). Run once, as the module is loaded. */
__attribute__((constructor)) static void detect_avx2(void)
{
    unsigned a, b, c, d, xcr0, xcr0_high;

    if (__get_cpuid_max(0, NULL) < 7)
        return;
    __cpuid(1, a, b, c, d);
    if (!(c & (1u << 27)) || !(c & (1u << 28))) /* OSXSAVE, AVX */
        return;
    __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
    if ((xcr0 & 6) != 6) /* XMM and YMM state */
        return;
    __cpuid_count(7, 0, a, b, c, d);
    have_avx2 = (b & (1u << 5)) != 0; /* AVX2 */
}

__attribute__((target("avx2"))) __attribute__((noinline)) static uint32_t block_sum_avx2(const unsigned char *h)
{
    const __m256i zero = _mm256_setzero_si256();
    __m256i a = zero, b = zero;
    __m128i s;
    int i;
    for (i = 0; i < BLOCK; i += 64) {
        a = _mm256_add_epi64(a, _mm256_sad_epu8(zero, _mm256_loadu_si256((const __m256i *)(h + i))));
        b = _mm256_add_epi64(b, _mm256_sad_epu8(zero, _mm256_loadu_si256((const __m256i *)(h + i + 32))));
    }
    a = _mm256_add_epi64(a, b);
    s = _mm_add_epi64(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    return (uint32_t)(_mm_cvtsi128_si64(s) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s)));
}
#endif
#endif

static uint32_t block_sum(const unsigned char *h)
{
#ifdef SSE2_WALK
    const __m128i zero = _mm_setzero_si128();
    __m128i a = zero, b = zero;
    int i;
#ifdef AVX2_DISPATCH
    if (have_avx2)
        return block_sum_avx2(h);
#endif
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

/* The stored checksum equals the unsigned or the signed byte sum (chksum field counted as spaces); ``sum`` is the
 * unsigned sum of the whole block. */
static HOT_INLINE int checksum_ok(const unsigned char *h, uint32_t sum)
{
    uint64_t stored;
    uint32_t field_sum;
    int32_t signed_sum = 8 * ' ';
    int i;

    if (parse_checksum(h, &stored, &field_sum) < 0)
        return 0;
    if (stored == 8 * ' ' + sum - field_sum)
        return 1;
    for (i = 0; i < 148; i++)
        signed_sum += (signed char)h[i];
    for (i = 156; i < BLOCK; i++)
        signed_sum += (signed char)h[i];
    return (int64_t)stored == (int64_t)signed_sum;
}

static size_t field_len(const unsigned char *field, size_t width)
{
    const unsigned char *nul = memchr(field, 0, width);
    return nul ? (size_t)(nul - field) : width;
}

/* field_len of a field inside a header block, ``width`` <= 160 and the field's 16-byte chunks (the last one past
 * its end included) inside the block: the name (0-100) and the ustar prefix (345-500). */
static size_t header_field_len(const unsigned char *field, size_t width)
{
#ifdef SSE2_WALK
    const __m128i zero = _mm_setzero_si128();
    size_t i;
    unsigned nuls;
    for (i = 0; i + 16 <= width; i += 16) {
        nuls = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(field + i)), zero));
        if (nuls)
            return i + (size_t)__builtin_ctz(nuls);
    }
    nuls = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(field + i)), zero));
    nuls &= (1u << (width - i)) - 1; /* the bytes past the field's end are not its own */
    return nuls ? i + (size_t)__builtin_ctz(nuls) : width;
#else
    return field_len(field, width);
#endif
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
 * member does; *need is the number of bytes from ``pos`` known to be needed so far. M_OTHER: a header this
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
