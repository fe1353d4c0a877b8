/* fg_msg.c - encode and decode protocol messages (the layouts are listed in
 * fg_msg.h). Pure byte handling: no sockets, no allocation, no logging, so
 * the fuzzer can build it alone. Every read goes through a cursor that checks
 * the remaining length first; a decoder failure is always -2. */
#include "fg_msg.h"

#include <stdio.h>
#include <string.h>

uint16_t fg_msg_version = FG_PROTO_VERSION;

static const char *const type_names[FG_MSG_NTYPES] = {
    [FG_MSG_READY] = "READY",         [FG_MSG_HEARTBEAT] = "HEARTBEAT",
    [FG_MSG_DONE] = "DONE",           [FG_MSG_ERROR] = "ERROR",
    [FG_MSG_SHUTDOWN] = "SHUTDOWN",   [FG_MSG_SHM_MAP] = "SHM_MAP",
    [FG_MSG_COPY] = "COPY",           [FG_MSG_DISK_READ] = "DISK_READ",
    [FG_MSG_DISK_WRITE] = "DISK_WRITE", [FG_MSG_COMPUTE] = "COMPUTE",
    [FG_MSG_CPU_ATTN] = "CPU_ATTN",
};

const char *fg_msg_type_name(int type) {
    return type > 0 && type < FG_MSG_NTYPES && type_names[type] ? type_names[type] : "?";
}

static const char *const role_names[FG_NROLES] = {"gpu", "cpu", "disk"};

const char *fg_role_name(int role) {
    return role >= 0 && role < FG_NROLES ? role_names[role] : "?";
}

int fg_role_from_name(const char *name) {
    for (int r = 0; r < FG_NROLES; r++)
        if (!strcmp(name, role_names[r])) return r;
    return -1;
}

int fg_msg_is_command(int type) {
    return type == FG_MSG_SHM_MAP || type == FG_MSG_COPY || type == FG_MSG_DISK_READ ||
           type == FG_MSG_DISK_WRITE || type == FG_MSG_COMPUTE || type == FG_MSG_CPU_ATTN;
}

void fg_msg_init(fg_msg *m, fg_msg_type type) {
    memset(m, 0, sizeof *m);
    m->version = fg_msg_version;
    m->type = (uint16_t)type;
}

int fg_msg_copy_add(fg_msg *m, fg_shm_handle src, fg_shm_handle dst) {
    if (m->u.copy.n >= FG_MSG_MAX_HANDLES) return -2;
    m->u.copy.src[m->u.copy.n] = src;
    m->u.copy.dst[m->u.copy.n] = dst;
    m->u.copy.n++;
    return 0;
}

int fg_msg_compute_add_in(fg_msg *m, fg_shm_handle h) {
    if (m->u.compute.n_in >= FG_MSG_MAX_HANDLES) return -2;
    m->u.compute.in[m->u.compute.n_in++] = h;
    return 0;
}

int fg_msg_compute_add_out(fg_msg *m, fg_shm_handle h) {
    if (m->u.compute.n_out >= FG_MSG_MAX_HANDLES) return -2;
    m->u.compute.out[m->u.compute.n_out++] = h;
    return 0;
}

int fg_msg_compute_set_params(fg_msg *m, const void *p, uint32_t len) {
    if (len > FG_MSG_MAX_PARAMS) return -2;
    memcpy(m->u.compute.params, p, len);
    m->u.compute.params_len = len;
    return 0;
}

/* ---- writer ----------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t cap, len;
    int err;  /* 0, -1 too small, -2 malformed */
} wcur;

static void put(wcur *w, const void *src, size_t n) {
    if (w->err) return;
    if (n > w->cap - w->len) {
        w->err = -1;
        return;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void put_u16(wcur *w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(w, b, 2);
}

static void put_u32(wcur *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 4);
}

static void put_u64(wcur *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 8);
}

static void put_handle(wcur *w, fg_shm_handle h) {
    put_u32(w, h.segment);
    put_u64(w, h.offset);
    put_u64(w, h.nbytes);
}

/* Strings are NUL-terminated in the struct; memchr bounds the scan so an
 * unterminated field is malformed, not an overread. */
static void put_str(wcur *w, const char *s, size_t max) {
    const char *end = memchr(s, 0, max + 1);
    if (!end) {
        w->err = -2;
        return;
    }
    put_u16(w, (uint16_t)(end - s));
    put(w, s, (size_t)(end - s));
}

static void put_handles(wcur *w, const fg_shm_handle *h, uint32_t n) {
    if (n > FG_MSG_MAX_HANDLES) {
        w->err = -2;
        return;
    }
    for (uint32_t i = 0; i < n; i++) put_handle(w, h[i]);
}

int fg_msg_encode(const fg_msg *m, uint8_t *buf, size_t cap, size_t *len) {
    wcur w = {buf, cap, 0, 0};
    put_u32(&w, FG_PROTO_MAGIC);
    put_u16(&w, fg_msg_version);
    put_u16(&w, m->type);
    put_u64(&w, m->seq);
    put_u32(&w, m->flags);
    put_u32(&w, 0);  /* body_len, patched below */
    for (int i = 0; i < FG_MSG_MAX_AFTER; i++) {
        if (m->after[i] && (!fg_msg_is_command(m->type) || m->after[i] >= m->seq)) return -2;
        put_u64(&w, m->after[i]);
    }
    switch (m->type) {
    case FG_MSG_READY:
        put_u32(&w, m->u.ready.role);
        put_u32(&w, m->u.ready.proto_version);
        put_u32(&w, m->u.ready.pid);
        put_u32(&w, m->u.ready.threads);
        put_u64(&w, m->u.ready.caps);
        put_str(&w, m->u.ready.info, FG_MSG_INFO_MAX);
        break;
    case FG_MSG_HEARTBEAT:
    case FG_MSG_SHUTDOWN:
        break;
    case FG_MSG_DONE:
        put_u32(&w, (uint32_t)m->u.done.status);
        put_u64(&w, m->u.done.start_ns);
        put_u64(&w, m->u.done.end_ns);
        put_u64(&w, m->u.done.busy_ns);
        break;
    case FG_MSG_ERROR:
        put_u32(&w, (uint32_t)m->u.error.code);
        put_str(&w, m->u.error.text, FG_MSG_TEXT_MAX);
        break;
    case FG_MSG_SHM_MAP:
        put_u32(&w, m->u.map.segment);
        put_u64(&w, m->u.map.size);
        put_str(&w, m->u.map.name, FG_MSG_NAME_MAX);
        break;
    case FG_MSG_COPY:
        if (m->u.copy.n == 0 || m->u.copy.n > FG_MSG_MAX_HANDLES) return -2;
        put_u32(&w, m->u.copy.n);
        for (uint32_t i = 0; i < m->u.copy.n; i++) {
            put_handle(&w, m->u.copy.src[i]);
            put_handle(&w, m->u.copy.dst[i]);
        }
        break;
    case FG_MSG_DISK_READ:
    case FG_MSG_DISK_WRITE:
        put_u32(&w, m->u.disk.file_id);
        put_u64(&w, m->u.disk.file_offset);
        put_handle(&w, m->u.disk.buf);
        put_str(&w, m->u.disk.path, FG_MSG_PATH_MAX);
        break;
    case FG_MSG_COMPUTE:
    case FG_MSG_CPU_ATTN: {
        const fg_msg_compute *c = &m->u.compute;
        if (c->params_len > FG_MSG_MAX_PARAMS) return -2;
        put_u32(&w, c->op);
        put_u32(&w, c->layer);
        put_u32(&w, c->gpu_batch);
        put_u32(&w, c->n_in);
        put_u32(&w, c->n_out);
        put_handles(&w, c->in, c->n_in);
        put_handles(&w, c->out, c->n_out);
        put_u32(&w, c->params_len);
        put(&w, c->params, c->params_len);
        break;
    }
    default:
        return -2;
    }
    if (w.err) return w.err;
    uint32_t body = (uint32_t)(w.len - FG_MSG_HEADER_BYTES);
    for (int i = 0; i < 4; i++) buf[20 + i] = (uint8_t)(body >> (8 * i));
    *len = w.len;
    return 0;
}

/* ---- reader ----------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    int bad;
} rcur;

static int take(rcur *r, void *dst, size_t n) {
    if (r->bad || n > r->len - r->pos) {
        r->bad = 1;
        if (dst) memset(dst, 0, n);
        return -1;
    }
    if (dst) memcpy(dst, r->p + r->pos, n);
    r->pos += n;
    return 0;
}

static uint16_t get_u16(rcur *r) {
    uint8_t b[2];
    if (take(r, b, 2)) return 0;
    return (uint16_t)(b[0] | b[1] << 8);
}

static uint32_t get_u32(rcur *r) {
    uint8_t b[4];
    if (take(r, b, 4)) return 0;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t get_u64(rcur *r) {
    uint8_t b[8];
    if (take(r, b, 8)) return 0;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static fg_shm_handle get_handle(rcur *r) {
    fg_shm_handle h;
    h.segment = get_u32(r);
    h.offset = get_u64(r);
    h.nbytes = get_u64(r);
    return h;
}

/* Length first, checked against the field's maximum and what is left, then
 * the bytes; an embedded NUL is malformed (the C string must be the wire
 * string). */
static void get_str(rcur *r, char *dst, size_t max) {
    uint16_t n = get_u16(r);
    if (r->bad || n > max || n > r->len - r->pos) {
        r->bad = 1;
        dst[0] = 0;
        return;
    }
    memcpy(dst, r->p + r->pos, n);
    dst[n] = 0;
    if (memchr(dst, 0, n)) r->bad = 1;
    r->pos += n;
}

static void get_handles(rcur *r, fg_shm_handle *h, uint32_t n) {
    for (uint32_t i = 0; i < n && !r->bad; i++) h[i] = get_handle(r);
}

int fg_msg_peek(const uint8_t *buf, size_t len, uint16_t *version, uint16_t *type) {
    if (!buf || len < 8) return -2;
    uint32_t magic = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
                     (uint32_t)buf[3] << 24;
    if (magic != FG_PROTO_MAGIC) return -2;
    *version = (uint16_t)(buf[4] | buf[5] << 8);
    *type = (uint16_t)(buf[6] | buf[7] << 8);
    return 0;
}

int fg_msg_decode(const uint8_t *buf, size_t len, fg_msg *m) {
    memset(m, 0, sizeof *m);
    if (!buf || len < FG_MSG_HEADER_BYTES || len > FG_MSG_MAX_BYTES) return -2;
    rcur r = {buf, len, 0, 0};
    if (get_u32(&r) != FG_PROTO_MAGIC) return -2;
    m->version = get_u16(&r);
    m->type = get_u16(&r);
    m->seq = get_u64(&r);
    m->flags = get_u32(&r);
    uint32_t body = get_u32(&r);
    for (int i = 0; i < FG_MSG_MAX_AFTER; i++) m->after[i] = get_u64(&r);
    if (m->version != fg_msg_version) return -2;
    for (int i = 0; i < FG_MSG_MAX_AFTER; i++)   /* only commands wait, and only for earlier ones */
        if (m->after[i] && (!fg_msg_is_command(m->type) || m->after[i] >= m->seq)) return -2;
    if (body != len - FG_MSG_HEADER_BYTES) return -2;
    switch (m->type) {
    case FG_MSG_READY:
        m->u.ready.role = get_u32(&r);
        m->u.ready.proto_version = get_u32(&r);
        m->u.ready.pid = get_u32(&r);
        m->u.ready.threads = get_u32(&r);
        m->u.ready.caps = get_u64(&r);
        get_str(&r, m->u.ready.info, FG_MSG_INFO_MAX);
        break;
    case FG_MSG_HEARTBEAT:
    case FG_MSG_SHUTDOWN:
        break;
    case FG_MSG_DONE:
        m->u.done.status = (int32_t)get_u32(&r);
        m->u.done.start_ns = get_u64(&r);
        m->u.done.end_ns = get_u64(&r);
        m->u.done.busy_ns = get_u64(&r);
        break;
    case FG_MSG_ERROR:
        m->u.error.code = (int32_t)get_u32(&r);
        get_str(&r, m->u.error.text, FG_MSG_TEXT_MAX);
        break;
    case FG_MSG_SHM_MAP:
        m->u.map.segment = get_u32(&r);
        m->u.map.size = get_u64(&r);
        get_str(&r, m->u.map.name, FG_MSG_NAME_MAX);
        break;
    case FG_MSG_COPY:
        m->u.copy.n = get_u32(&r);
        if (m->u.copy.n == 0 || m->u.copy.n > FG_MSG_MAX_HANDLES) return -2;
        for (uint32_t i = 0; i < m->u.copy.n && !r.bad; i++) {
            m->u.copy.src[i] = get_handle(&r);
            m->u.copy.dst[i] = get_handle(&r);
        }
        break;
    case FG_MSG_DISK_READ:
    case FG_MSG_DISK_WRITE:
        m->u.disk.file_id = get_u32(&r);
        m->u.disk.file_offset = get_u64(&r);
        m->u.disk.buf = get_handle(&r);
        get_str(&r, m->u.disk.path, FG_MSG_PATH_MAX);
        break;
    case FG_MSG_COMPUTE:
    case FG_MSG_CPU_ATTN: {
        fg_msg_compute *c = &m->u.compute;
        c->op = get_u32(&r);
        c->layer = get_u32(&r);
        c->gpu_batch = get_u32(&r);
        c->n_in = get_u32(&r);
        c->n_out = get_u32(&r);
        if (c->n_in > FG_MSG_MAX_HANDLES || c->n_out > FG_MSG_MAX_HANDLES) return -2;
        get_handles(&r, c->in, c->n_in);
        get_handles(&r, c->out, c->n_out);
        c->params_len = get_u32(&r);
        if (c->params_len > FG_MSG_MAX_PARAMS) return -2;
        take(&r, c->params, c->params_len);
        break;
    }
    default:
        return -2;
    }
    if (r.bad || r.pos != len) return -2;  /* short, or trailing bytes */
    return 0;
}

void fg_msg_describe(const fg_msg *m, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s seq=%llu", fg_msg_type_name(m->type),
                     (unsigned long long)m->seq);
    if (n < 0 || (size_t)n >= cap) return;
    switch (m->type) {
    case FG_MSG_COPY:
        snprintf(out + n, cap - (size_t)n, " n=%u", m->u.copy.n);
        break;
    case FG_MSG_COMPUTE:
    case FG_MSG_CPU_ATTN:
        snprintf(out + n, cap - (size_t)n, " op=%u layer=%u batch=%u in=%u out=%u",
                 m->u.compute.op, m->u.compute.layer, m->u.compute.gpu_batch,
                 m->u.compute.n_in, m->u.compute.n_out);
        break;
    case FG_MSG_DISK_READ:
    case FG_MSG_DISK_WRITE:
        snprintf(out + n, cap - (size_t)n, " file=%s off=%llu bytes=%llu",
                 m->u.disk.path[0] ? m->u.disk.path : "(id)",
                 (unsigned long long)m->u.disk.file_offset,
                 (unsigned long long)m->u.disk.buf.nbytes);
        break;
    case FG_MSG_ERROR:
        snprintf(out + n, cap - (size_t)n, " code=%d \"%s\"", m->u.error.code, m->u.error.text);
        break;
    default:
        break;
    }
}
