/* fuzz_store.c - libFuzzer target for the tier store's file headers
 * (store/fg_store_format.c, fg_store_read_header) through fg_store_open,
 * what the disk worker calls on <offload-dir>/<model-id>. The input's first byte holds
 * flags; the rest is split at "\nFGSTORE-NEXT\n" into globals.bin,
 * layer-000.bin, layer-001.bin, ...
 *
 * A fuzzer cannot forge XXH3, so unless a flag says otherwise each file is
 * made what a writer would make of it: zero-padded to its header size, its
 * header checksum set, and its length set to the header's file_bytes (up to
 * 16 MiB); the checks are then all the reader's other ones.
 * Properties: no crash or leak (ASan); a store that opens describes, for
 * every file, tensors that lie inside the file's data region, whose sizes
 * are their shapes' (no overflow), and checking a file's data against them
 * (fg_store_verify, as the disk worker does after a read) stays in bounds. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "fg_store.h"
#include "fuzz_util.h"

#define MAX_FILES 4
#define MAX_BYTES (16u << 20)
#define F_RAW_CHECKSUM 1   /* keep the input's header checksum */
#define F_RAW_SIZE 2       /* keep the input's length */

static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void write_file(int k, const fz_part *part, unsigned flags) {
    char name[32];
    if (k == 0) snprintf(name, sizeof name, "globals.bin");
    else snprintf(name, sizeof name, "layer-%03d.bin", k - 1);
    size_t n = part->n;
    uint32_t hb = n >= 16 ? get32(part->p + 12) : 0;   /* header_bytes */
    size_t len = n;
    if (!(flags & F_RAW_SIZE)) {
        len = len < FG_STORE_ALIGN ? FG_STORE_ALIGN : len;
        if (hb >= FG_STORE_ALIGN && hb % FG_STORE_ALIGN == 0 && hb <= (1u << 20) && hb > len) len = hb;
    }
    uint8_t *buf = calloc(1, len ? len : 1);
    memcpy(buf, part->p, n);
    if (!(flags & F_RAW_CHECKSUM) && hb >= FG_STORE_ALIGN && hb <= len) {
        memset(buf + 72, 0, 8);
        uint64_t sum = XXH3_64bits(buf, hb);
        for (int i = 0; i < 8; i++) buf[72 + i] = (uint8_t)(sum >> (8 * i));
    }
    const char *path = fz_write(0, name, buf, len);
    if (!(flags & F_RAW_SIZE) && len >= 56) {
        uint64_t fb = get64(buf + 48);
        if (fb > len && fb <= MAX_BYTES && truncate(path, (off_t)fb) != 0) abort();
    }
    free(buf);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)fz_dir();
    return 0;
}

static void check_file(const fg_store *s, int file) {
    int n;
    const fg_store_tensor *t = fg_store_tensors(s, file, &n);
    uint64_t off, nbytes;
    fg_store_data_range(s, file, &off, &nbytes);
    for (int i = 0; i < n; i++) {
        uint64_t numel, bytes;
        if (t[i].dims[0] <= 0 || t[i].dims[1] <= 0 ||
            __builtin_mul_overflow((uint64_t)t[i].dims[0], (uint64_t)t[i].dims[1], &numel) ||
            __builtin_mul_overflow(numel, 2, &bytes) || bytes != t[i].nbytes)
            abort();   /* a size that is not its shape's */
        if (t[i].offset < off || t[i].nbytes > nbytes || t[i].offset - off > nbytes - t[i].nbytes)
            abort();   /* a tensor outside the file's data region */
    }
    if (nbytes > MAX_BYTES) return;
    uint8_t *data = calloc(1, nbytes ? nbytes : 1);
    int fd = open(fg_store_path(s, file), O_RDONLY);
    if (fd >= 0) {
        if (pread(fd, data, nbytes, (off_t)off) < 0) abort();
        close(fd);
    }
    (void)fg_store_verify(s, file, data);
    free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned flags = data[0];
    fz_part part[MAX_FILES];
    int k = fz_split(data + 1, size - 1, "\nFGSTORE-NEXT\n", part, MAX_FILES);
    for (int i = 0; i < MAX_FILES; i++) {
        if (i < k) {
            write_file(i, &part[i], flags);
        } else {
            char name[32];
            snprintf(name, sizeof name, i ? "layer-%03d.bin" : "globals.bin", i - 1);
            fz_remove(name);
        }
    }
    fg_store *s = NULL;
    if (fg_store_open(fz_dir(), &s) != FG_OK) return 0;
    for (int f = FG_STORE_GLOBALS; f < fg_store_n_layers(s); f++) check_file(s, f);
    (void)fg_store_max_data_bytes(s);
    (void)fg_store_total_bytes(s);
    (void)fg_store_identity(s);
    fg_store_destroy(&s);
    return 0;
}
