/* fuzz_msg.c - libFuzzer target for the protocol decoder. Properties: decode
 * never crashes or reads out of bounds (ASan), and the wire form is
 * canonical: whatever decodes re-encodes to exactly the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "fg_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fg_msg m;
    uint16_t v, t;
    (void)fg_msg_peek(data, size, &v, &t);
    if (fg_msg_decode(data, size, &m) != 0) return 0;
    uint8_t buf[FG_MSG_MAX_BYTES];
    size_t len = 0;
    if (fg_msg_encode(&m, buf, sizeof buf, &len) != 0) abort();
    if (len != size || memcmp(buf, data, size) != 0) abort();
    return 0;
}
