/* fg_hash.h - XXH64 (Yann Collet's xxHash, 64-bit variant), the tier
 * store's checksum: portable C, ~10 GB/s per core, bit-identical to the
 * reference library (tests/disk compares against libxxhash). */
#ifndef FG_HASH_H
#define FG_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t fg_xxh64(const void *data, size_t len, uint64_t seed);

#endif
