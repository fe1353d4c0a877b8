/* fg_msg_selftest.c - the protocol's self-test (czmq style): a sample of
 * every message type round-trips through encode/decode and over ROUTER/DEALER
 * pairs on inproc:// and ipc://; malformed inputs (every truncation, wrong
 * magic or version, lengths and counts past the end, trailing bytes, unknown
 * type, embedded NUL) decode to -2. Run by tests/runtime. The samples also
 * seed the fuzzer's corpus (fg_msg_write_samples). */
#include "fg_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fg_msg_selftest: FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static fg_shm_handle H(uint32_t s, uint64_t o, uint64_t n) {
    fg_shm_handle h = {s, o, n};
    return h;
}

/* One filled-in sample per type, with values that exercise every byte. */
static void sample(int type, fg_msg *m) {
    fg_msg_init(m, (fg_msg_type)type);
    m->seq = 0x0102030405060708ull + (uint64_t)type;
    if (fg_msg_is_command(type)) m->after[0] = m->seq - 1, m->after[1] = 3;
    m->flags = type == FG_MSG_COPY ? FG_MSG_F_REISSUE | FG_MSG_F_BARRIER : 0;
    switch (type) {
    case FG_MSG_READY:
        m->u.ready.role = FG_ROLE_DISK;
        m->u.ready.proto_version = FG_PROTO_VERSION;
        m->u.ready.pid = 123456;
        m->u.ready.threads = 4;
        m->u.ready.caps = FG_CAP_DISK | FG_CAP_COPY | (1ull << 63);
        snprintf(m->u.ready.info, sizeof m->u.ready.info, "pread/pwrite disk worker");
        break;
    case FG_MSG_DONE:
        m->u.done.status = -7;
        m->u.done.start_ns = 0xfffffffffffffff0ull;
        m->u.done.end_ns = 0xfffffffffffffff1ull;
        m->u.done.busy_ns = 42;
        break;
    case FG_MSG_ERROR:
        m->u.error.code = FG_MSG_EUNSUPPORTED;
        memset(m->u.error.text, 'e', FG_MSG_TEXT_MAX);  /* the longest text */
        m->u.error.text[FG_MSG_TEXT_MAX] = 0;
        break;
    case FG_MSG_SHM_MAP:
        m->u.map.segment = 3;
        m->u.map.size = 1ull << 40;
        snprintf(m->u.map.name, sizeof m->u.map.name, "/flexgen-0123456789abcdef-weights");
        break;
    case FG_MSG_COPY:
        for (int i = 0; i < FG_MSG_MAX_HANDLES; i++)
            fg_msg_copy_add(m, H((uint32_t)i, 4096ull * (uint64_t)(i + 1), 1000 + (uint64_t)i),
                            H((uint32_t)i + 1, 1ull << 45, 1000 + (uint64_t)i));
        break;
    case FG_MSG_DISK_READ:
    case FG_MSG_DISK_WRITE:
        m->u.disk.file_id = 77;
        m->u.disk.file_offset = 1ull << 50;
        m->u.disk.buf = H(2, 8192, 1 << 20);
        if (type == FG_MSG_DISK_READ) {
            memset(m->u.disk.path, 'p', FG_MSG_PATH_MAX);
            m->u.disk.path[FG_MSG_PATH_MAX] = 0;
        }
        break;
    case FG_MSG_COMPUTE:
    case FG_MSG_CPU_ATTN: {
        m->u.compute.op = type == FG_MSG_COMPUTE ? FG_OP_AXPY : FG_OP_ENGINE_FIRST + 5;
        m->u.compute.layer = 95;
        m->u.compute.gpu_batch = 7;
        for (int i = 0; i < 3; i++) fg_msg_compute_add_in(m, H(1, 4096 * (uint64_t)i, 64));
        for (int i = 0; i < FG_MSG_MAX_HANDLES; i++) fg_msg_compute_add_out(m, H(2, 0, (uint64_t)i));
        uint8_t p[FG_MSG_MAX_PARAMS];
        for (int i = 0; i < FG_MSG_MAX_PARAMS; i++) p[i] = (uint8_t)(i * 7);
        fg_msg_compute_set_params(m, p, type == FG_MSG_COMPUTE ? 4 : FG_MSG_MAX_PARAMS);
        break;
    }
    default:
        break;
    }
}

/* Equal messages have equal encodings (the wire form is canonical and
 * covers every field); comparing structs would compare padding. */
static int same(const fg_msg *a, const fg_msg *b) {
    uint8_t ea[FG_MSG_MAX_BYTES], eb[FG_MSG_MAX_BYTES];
    size_t la = 0, lb = 0;
    if (fg_msg_encode(a, ea, sizeof ea, &la) || fg_msg_encode(b, eb, sizeof eb, &lb)) return 0;
    return a->version == b->version && la == lb && !memcmp(ea, eb, la);
}

static void set_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- codec ------------------------------------------------------------ */

/* Each type encoded, decoded back, and every damage to its wire form
 * (truncation, magic, version, body length, dependencies, a trailing
 * byte) refused. */
static void codec_round_trips(int verbose) {
    uint8_t buf[FG_MSG_MAX_BYTES + 16], bad[FG_MSG_MAX_BYTES + 16];
    for (int t = 1; t < FG_MSG_NTYPES; t++) {
        fg_msg m, d;
        size_t len = 0;
        sample(t, &m);
        int rc = fg_msg_encode(&m, buf, sizeof buf, &len);
        CHECK(rc == 0, "%s: encode rc %d", fg_msg_type_name(t), rc);
        if (rc) continue;
        CHECK(fg_msg_decode(buf, len, &d) == 0 && same(&m, &d), "%s: round trip differs",
              fg_msg_type_name(t));
        if (verbose) fprintf(stderr, "  %-10s %4zu bytes ok\n", fg_msg_type_name(t), len);

        /* every truncation */
        for (size_t cut = 0; cut < len; cut++)
            CHECK(fg_msg_decode(buf, cut, &d) == -2, "%s: truncated to %zu decoded",
                  fg_msg_type_name(t), cut);
        /* too small an output buffer */
        size_t l2;
        CHECK(fg_msg_encode(&m, bad, len - 1, &l2) == -1, "%s: short buffer not -1",
              fg_msg_type_name(t));

        memcpy(bad, buf, len);
        bad[0] ^= 0x55;
        CHECK(fg_msg_decode(bad, len, &d) == -2, "%s: wrong magic decoded", fg_msg_type_name(t));

        memcpy(bad, buf, len);
        bad[4] = (uint8_t)(FG_PROTO_VERSION + 1);
        uint16_t pv = 0, pt = 0;
        CHECK(fg_msg_decode(bad, len, &d) == -2, "%s: wrong version decoded", fg_msg_type_name(t));
        CHECK(fg_msg_peek(bad, len, &pv, &pt) == 0 && pv == FG_PROTO_VERSION + 1 && pt == t,
              "%s: peek did not report the version", fg_msg_type_name(t));

        memcpy(bad, buf, len);
        set_u32(bad + 20, (uint32_t)(len - FG_MSG_HEADER_BYTES + 1));
        CHECK(fg_msg_decode(bad, len, &d) == -2, "%s: body_len past the end decoded",
              fg_msg_type_name(t));
        set_u32(bad + 20, 0xffffffffu);
        CHECK(fg_msg_decode(bad, len, &d) == -2, "%s: huge body_len decoded", fg_msg_type_name(t));

        /* a dependency on itself or a later command, or in a non-command */
        memcpy(bad, buf, len);
        for (int i = 0; i < 8; i++) bad[24 + i] = buf[8 + i];   /* after[0] = seq */
        CHECK(fg_msg_decode(bad, len, &d) == -2, "%s: after[0] = seq decoded", fg_msg_type_name(t));
        if (!fg_msg_is_command(t)) {
            memcpy(bad, buf, len);
            bad[32] = 1;   /* after[1] = 1 */
            CHECK(fg_msg_decode(bad, len, &d) == -2, "%s: a dependency in a non-command decoded",
                  fg_msg_type_name(t));
        }

        /* a trailing byte, with body_len claiming it */
        memcpy(bad, buf, len);
        bad[len] = 0;
        set_u32(bad + 20, (uint32_t)(len + 1 - FG_MSG_HEADER_BYTES));
        CHECK(fg_msg_decode(bad, len + 1, &d) == -2, "%s: trailing byte decoded",
              fg_msg_type_name(t));
    }
}

/* Counts and lengths inside bodies that point past the end or above the
 * maximum, and unknown types, refused by the decoder. */
static void codec_bad_bodies(void) {
    uint8_t buf[FG_MSG_MAX_BYTES + 16], bad[FG_MSG_MAX_BYTES + 16];
    fg_msg m, d;
    size_t len;
    /* unknown type */
    sample(FG_MSG_HEARTBEAT, &m);
    fg_msg_encode(&m, buf, sizeof buf, &len);
    buf[6] = 99;
    CHECK(fg_msg_decode(buf, len, &d) == -2, "unknown type decoded");
    buf[6] = 0;
    CHECK(fg_msg_decode(buf, len, &d) == -2, "type 0 decoded");

    /* counts past the end: COPY with n=1 on the wire but n claimed 2, 16, 2^32-1 */
    fg_msg_init(&m, FG_MSG_COPY);
    fg_msg_copy_add(&m, H(0, 4096, 8), H(1, 4096, 8));
    fg_msg_encode(&m, buf, sizeof buf, &len);
    uint32_t claims[] = {0, 2, 16, 17, 0xffffffffu};
    for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++) {
        memcpy(bad, buf, len);
        set_u32(bad + FG_MSG_HEADER_BYTES, claims[i]);
        CHECK(fg_msg_decode(bad, len, &d) == -2, "COPY n=%u decoded", claims[i]);
    }

    /* COMPUTE: n_in, n_out and params_len past the end or above the max */
    sample(FG_MSG_COMPUTE, &m);
    m.u.compute.n_out = 1;
    fg_msg_encode(&m, buf, sizeof buf, &len);
    size_t off_nin = FG_MSG_HEADER_BYTES + 12, off_nout = off_nin + 4;
    size_t off_plen = off_nout + 4 + (size_t)(3 + 1) * FG_MSG_HANDLE_BYTES;
    uint32_t vals[] = {4, 17, 0xffffffffu};
    for (size_t i = 0; i < 3; i++) {
        memcpy(bad, buf, len);
        set_u32(bad + off_nin, vals[i]);
        CHECK(fg_msg_decode(bad, len, &d) == -2, "COMPUTE n_in=%u decoded", vals[i]);
        memcpy(bad, buf, len);
        set_u32(bad + off_nout, vals[i]);
        CHECK(fg_msg_decode(bad, len, &d) == -2, "COMPUTE n_out=%u decoded", vals[i]);
    }
    uint32_t plens[] = {5, FG_MSG_MAX_PARAMS + 1, 0xffffffffu};
    for (size_t i = 0; i < 3; i++) {
        memcpy(bad, buf, len);
        set_u32(bad + off_plen, plens[i]);
        CHECK(fg_msg_decode(bad, len, &d) == -2, "COMPUTE params_len=%u decoded", plens[i]);
    }

    /* string lengths past the end, above the max, and an embedded NUL */
    sample(FG_MSG_ERROR, &m);
    snprintf(m.u.error.text, sizeof m.u.error.text, "hello");
    fg_msg_encode(&m, buf, sizeof buf, &len);
    size_t off_slen = FG_MSG_HEADER_BYTES + 4;
    uint16_t slens[] = {6, FG_MSG_TEXT_MAX + 1, 0xffff};
    for (size_t i = 0; i < 3; i++) {
        memcpy(bad, buf, len);
        bad[off_slen] = (uint8_t)slens[i];
        bad[off_slen + 1] = (uint8_t)(slens[i] >> 8);
        CHECK(fg_msg_decode(bad, len, &d) == -2, "ERROR text length %u decoded", slens[i]);
    }
    memcpy(bad, buf, len);
    bad[off_slen + 2 + 2] = 0;
    CHECK(fg_msg_decode(bad, len, &d) == -2, "embedded NUL decoded");
}

/* The encoder refuses malformed structs, and garbage never crashes the
 * decoder. */
static void codec_refusals(void) {
    uint8_t buf[FG_MSG_MAX_BYTES + 16], bad[FG_MSG_MAX_BYTES + 16];
    fg_msg m, d;
    size_t len;
    fg_msg_init(&m, FG_MSG_COPY);
    CHECK(fg_msg_encode(&m, buf, sizeof buf, &len) == -2, "COPY n=0 encoded");
    m.u.copy.n = FG_MSG_MAX_HANDLES + 1;
    CHECK(fg_msg_encode(&m, buf, sizeof buf, &len) == -2, "COPY n=17 encoded");
    fg_msg_init(&m, FG_MSG_COMPUTE);
    m.u.compute.params_len = FG_MSG_MAX_PARAMS + 1;
    CHECK(fg_msg_encode(&m, buf, sizeof buf, &len) == -2, "params_len 257 encoded");
    fg_msg_init(&m, FG_MSG_ERROR);
    memset(m.u.error.text, 'x', sizeof m.u.error.text);  /* no NUL */
    CHECK(fg_msg_encode(&m, buf, sizeof buf, &len) == -2, "unterminated text encoded");
    fg_msg_init(&m, FG_MSG_HEARTBEAT);
    m.type = 99;
    CHECK(fg_msg_encode(&m, buf, sizeof buf, &len) == -2, "type 99 encoded");
    CHECK(fg_msg_compute_set_params(&m, buf, FG_MSG_MAX_PARAMS + 1) == -2, "params overflow taken");

    /* garbage of every length below the max never decodes to a crash */
    for (size_t n = 0; n < 200; n++) {
        for (size_t i = 0; i < n; i++) bad[i] = (uint8_t)(i * 31 + n);
        (void)fg_msg_decode(bad, n, &d);
    }
}

static void test_codec(int verbose) {
    codec_round_trips(verbose);
    codec_bad_bodies();
    codec_refusals();
}

/* ---- sockets ---------------------------------------------------------- */

static int recv_timed(void *s, char *id, size_t idcap, fg_msg *m) {
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 5000) <= 0) return -3;  /* timeout: a test failure */
    return fg_msg_recv(s, id, idcap, m, 0);
}

static void test_sockets(void *ctx, const char *endpoint, int verbose) {
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    void *dealer = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dealer, ZMQ_ROUTING_ID, "cpu", 3);
    CHECK(zmq_bind(router, endpoint) == 0, "bind %s: %s", endpoint, zmq_strerror(zmq_errno()));
    CHECK(zmq_connect(dealer, endpoint) == 0, "connect %s", endpoint);

    for (int t = 1; t < FG_MSG_NTYPES; t++) {
        fg_msg m, d;
        char id[64];
        sample(t, &m);
        CHECK(fg_msg_send(dealer, NULL, &m, 0) == 0, "%s: dealer send", endpoint);
        int rc = recv_timed(router, id, sizeof id, &d);
        CHECK(rc == 0 && !strcmp(id, "cpu") && same(&m, &d), "%s: %s dealer->router rc %d",
              endpoint, fg_msg_type_name(t), rc);
        CHECK(fg_msg_send(router, "cpu", &m, 0) == 0, "%s: router send", endpoint);
        rc = recv_timed(dealer, NULL, 0, &d);
        CHECK(rc == 0 && same(&m, &d), "%s: %s router->dealer rc %d", endpoint,
              fg_msg_type_name(t), rc);
    }

    /* garbage, a wrong version and an extra frame are dropped as -2, and the
     * socket goes on working */
    fg_msg m, d;
    char id[64];
    zmq_send(dealer, "garbage", 7, 0);
    CHECK(recv_timed(router, id, sizeof id, &d) == -2, "%s: garbage not -2", endpoint);
    uint8_t buf[FG_MSG_MAX_BYTES];
    size_t len;
    sample(FG_MSG_READY, &m);
    fg_msg_encode(&m, buf, sizeof buf, &len);
    buf[4] = 9;
    zmq_send(dealer, buf, len, 0);
    CHECK(recv_timed(router, id, sizeof id, &d) == -2 && d.version == 9 && d.type == FG_MSG_READY,
          "%s: wrong version not reported", endpoint);
    buf[4] = (uint8_t)FG_PROTO_VERSION;
    zmq_send(dealer, buf, len, ZMQ_SNDMORE);
    zmq_send(dealer, "x", 1, 0);
    CHECK(recv_timed(router, id, sizeof id, &d) == -2, "%s: two frames not -2", endpoint);
    sample(FG_MSG_HEARTBEAT, &m);
    fg_msg_send(dealer, NULL, &m, 0);
    CHECK(recv_timed(router, id, sizeof id, &d) == 0 && same(&m, &d),
          "%s: socket unusable after malformed input", endpoint);
    if (verbose) fprintf(stderr, "  %s ok\n", endpoint);
    zmq_close(dealer);
    zmq_close(router);
}

int fg_msg_write_samples(const char *dir) {
    for (int t = 1; t < FG_MSG_NTYPES; t++) {
        fg_msg m;
        uint8_t buf[FG_MSG_MAX_BYTES];
        size_t len;
        sample(t, &m);
        if (fg_msg_encode(&m, buf, sizeof buf, &len) != 0) return -1;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, fg_msg_type_name(t));
        FILE *f = fopen(path, "wb");
        if (!f) return -1;
        size_t n = fwrite(buf, 1, len, f);
        if (fclose(f) != 0 || n != len) return -1;
    }
    return 0;
}

int fg_msg_selftest(int verbose) {
    failures = 0;
    test_codec(verbose);
    void *ctx = zmq_ctx_new();
    test_sockets(ctx, "inproc://fg-msg-selftest", verbose);
    char dir[] = "/tmp/fg-msg-selftest-XXXXXX";
    if (mkdtemp(dir)) {
        char ep[128], path[96];
        snprintf(path, sizeof path, "%s/ctl", dir);
        snprintf(ep, sizeof ep, "ipc://%s", path);
        test_sockets(ctx, ep, verbose);
        unlink(path);
        rmdir(dir);
    } else {
        CHECK(0, "mkdtemp failed");
    }
    zmq_ctx_term(ctx);
    if (verbose || failures)
        fprintf(stderr, "fg_msg_selftest: %s (%d failures)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
