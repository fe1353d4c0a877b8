/* fg_fault.c - FLEXGEN_FAULT (see fg_fault.h): parsed once per process;
 * the damage done to a message happens here, on an encoded copy, so the
 * codec itself (proto/) knows nothing of it. */
#include "fg_fault.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static struct {
    char who[16];
    fg_fault_kind kind;
    uint64_t n;
    char once[512];
} spec;
static pthread_once_t parsed = PTHREAD_ONCE_INIT;

#define BODY_LEN_OFFSET 20   /* the header's body_len field (proto/fg_msg.h): damaged, the message never decodes */
#define GARBLE_MASK 0x5a     /* flips bits in it, never to its own value */
#define TRUNCATE_BYTES 7     /* cut off a message's end: its length field then disagrees with what arrived */
static const char *const kind_names[FG_FAULT_NKINDS] = {"", "crash", "stop", "garble", "truncate", "hang"};

static void parse(void) {
    const char *e = getenv("FLEXGEN_FAULT");
    if (!e || !*e) return;
    char kind[16] = "";
    unsigned long long n = 0;
    int used = 0;
    if (sscanf(e, "%15[^:]:%15[^:]:%llu%n", spec.who, kind, &n, &used) < 3 || n == 0) {
        fg_warn("FLEXGEN_FAULT=%s: expected WHO:KIND:N[:ONCE_FILE]; ignored", e);
        return;
    }
    if (e[used] == ':') snprintf(spec.once, sizeof spec.once, "%s", e + used + 1);
    for (int k = FG_FAULT_NONE + 1; k < FG_FAULT_NKINDS; k++)
        if (!strcmp(kind, kind_names[k])) spec.kind = (fg_fault_kind)k;
    if (!spec.kind) fg_warn("FLEXGEN_FAULT=%s: unknown kind '%s'; ignored", e, kind);
    spec.n = n;
}

fg_fault_kind fg_fault_at(const char *who, uint64_t n) {
    pthread_once(&parsed, parse);
    if (!spec.kind || n != spec.n || strcmp(who, spec.who)) return FG_FAULT_NONE;
    if (spec.once[0]) {
        int fd = open(spec.once, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) return FG_FAULT_NONE;   /* fired before, in an earlier incarnation */
        close(fd);
    }
    fg_warn("fault injection (FLEXGEN_FAULT): %s at command %llu", kind_names[spec.kind],
            (unsigned long long)n);
    return spec.kind;
}

void fg_fault_hang(void) {
    for (;;) pause();
}

int fg_fault_send(void *sock, const char *identity, const fg_msg *m, fg_fault_kind kind) {
    uint8_t buf[FG_MSG_MAX_BYTES];
    size_t len = 0;
    if (fg_msg_encode(m, buf, sizeof buf, &len) != 0) return -2;
    if (kind == FG_FAULT_GARBLE) buf[BODY_LEN_OFFSET] ^= GARBLE_MASK;
    else if (kind == FG_FAULT_TRUNCATE) len = len > TRUNCATE_BYTES ? len - TRUNCATE_BYTES : 0;
    if (identity && zmq_send(sock, identity, strlen(identity), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return -1;
    return zmq_send(sock, buf, len, identity ? ZMQ_DONTWAIT : 0) < 0 ? -1 : 0;
}
