/* shardstream._native._scan: reading the fields of a tar header block, for the header walk (_scan_walk.c includes this
 * file, and only it: static functions, inlined into the walk's hot path). The octal fields, the byte sum of a block
 * (AVX2 where the CPU has it, SSE2, or a plain loop), the checksum test and the lengths of the name fields. */
#ifndef SHARDSTREAM_SCAN_FIELDS_H
#define SHARDSTREAM_SCAN_FIELDS_H
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

#endif
