/* The `floor` contender of bench_peers.py: the least work any reader of a tar shard from the page cache must do.
 *
 * floor_walk(path) maps the shard, and for every 512-byte header: sums its bytes and checks the checksum (which
 * touches the whole header, as a reader that validates headers must), parses the size, and skips the payload
 * without reading it; the lines 2 KiB ahead are prefetched, as the library's C walk does. A sample is counted when a regular member's key (its name up to the first dot of the last
 * path component) differs from the previous member's. No object is made: one call per shard returns a count.
 *
 * Only what the benchmark's shards use is read: ustar names (no PAX or GNU long names; their records are skipped,
 * their members keyed by the short name). Built by peers_run.py with the C compiler ($CC, else cc) at -O3 -march=native
 * (the byte sum by AVX2 where the CPU has it).
 */
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#define AHEAD 2048 /* prefetch the header lines this far ahead: two small members, as the library's walk does */

static unsigned int block_sum(const unsigned char *h) {
#ifdef __AVX2__
    __m256i acc = _mm256_setzero_si256(), zero = _mm256_setzero_si256();
    for (int i = 0; i < 512; i += 32)
        acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_loadu_si256((const __m256i *)(h + i)), zero));
    return (unsigned int)(_mm256_extract_epi64(acc, 0) + _mm256_extract_epi64(acc, 1) +
                          _mm256_extract_epi64(acc, 2) + _mm256_extract_epi64(acc, 3));
#else
    unsigned int sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    return sum;
#endif
}

static long long octal(const unsigned char *field, int width) {
    long long value = 0;
    int i = 0;
    while (i < width && (field[i] == ' ' || field[i] == '\0')) i++;
    for (; i < width && field[i] >= '0' && field[i] <= '7'; i++) value = value * 8 + (field[i] - '0');
    return value;
}

static long long walk(const unsigned char *buf, size_t n) {
    size_t pos = 0;
    long long samples = 0;
    const unsigned char *last_key = NULL;
    size_t last_len = 0;
    while (pos + 512 <= n) {
        const unsigned char *h = buf + pos;
        if (pos + AHEAD + 512 <= n)
            for (int line = 0; line < 512; line += 64) __builtin_prefetch(h + AHEAD + line);
        unsigned int sum = block_sum(h);
        if (sum == 0) break; /* a zero block: the end of the archive */
        unsigned int field = 0;
        for (int i = 148; i < 156; i++) field += h[i];
        if ((long long)(sum - field + 8 * ' ') != octal(h + 148, 8)) return -1;
        long long size = octal(h + 124, 12);
        if (h[156] == '0' || h[156] == '\0') {
            size_t key_len = 0, i = 0; /* the name up to the first dot after its last slash */
            int dotted = 0;
            for (; i < 100 && h[i] != '\0'; i++) {
                if (h[i] == '/') dotted = 0;
                else if (h[i] == '.' && !dotted) dotted = 1, key_len = i;
            }
            if (!dotted) key_len = i;
            if (last_key == NULL || key_len != last_len || memcmp(h, last_key, key_len) != 0) samples++;
            last_key = h, last_len = key_len;
        }
        pos += 512 + (((size_t)size + 511) & ~(size_t)511);
    }
    return samples;
}

long long floor_walk(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
        close(fd);
        return -1;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return -1;
    long long samples = walk((const unsigned char *)map, (size_t)st.st_size);
    munmap(map, (size_t)st.st_size);
    return samples;
}
