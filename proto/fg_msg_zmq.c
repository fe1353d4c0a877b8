/* fg_msg_zmq.c - protocol messages over ZeroMQ sockets: one frame per
 * message, plus the identity frame on a ROUTER. Framing only; what a message
 * means is up to the worker loop and the supervisor. */
#include "fg_msg.h"

#include <errno.h>
#include <string.h>
#include <zmq.h>

int fg_msg_send(void *sock, const char *identity, const fg_msg *m, int zmq_flags) {
    uint8_t buf[FG_MSG_MAX_BYTES];
    size_t len = 0;
    int rc = fg_msg_encode(m, buf, sizeof buf, &len);
    if (rc != 0) return rc == -1 ? -2 : rc;  /* no valid message outgrows buf */
    if (identity) {
        if (zmq_send(sock, identity, strlen(identity), ZMQ_SNDMORE | zmq_flags) < 0) return -1;
    }
    if (zmq_send(sock, buf, len, zmq_flags) < 0) return -1;
    return 0;
}

/* Drain the rest of a multipart message we did not expect. */
static void drain(void *sock) {
    int more = 1;
    size_t sz = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, sock, 0) < 0) {
            zmq_msg_close(&part);
            return;
        }
        zmq_msg_close(&part);
        sz = sizeof more;
    }
}

int fg_msg_recv(void *sock, char *identity, size_t idcap, fg_msg *m, int zmq_flags) {
    zmq_msg_t frame;
    memset(m, 0, sizeof *m);
    if (identity) {
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, sock, zmq_flags) < 0) {
            zmq_msg_close(&frame);
            return -1;
        }
        size_t n = zmq_msg_size(&frame);
        if (n >= idcap) n = idcap - 1;
        memcpy(identity, zmq_msg_data(&frame), n);
        identity[n] = 0;
        int more = zmq_msg_more(&frame);
        zmq_msg_close(&frame);
        if (!more) return -2;  /* identity with no payload */
        zmq_flags = 0;         /* the rest of a multipart message is already here */
    }
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, sock, zmq_flags) < 0) {
        zmq_msg_close(&frame);
        return -1;
    }
    int more = zmq_msg_more(&frame);
    const uint8_t *data = zmq_msg_data(&frame);
    size_t len = zmq_msg_size(&frame);
    int rc = fg_msg_decode(data, len, m);
    if (rc != 0) {
        uint16_t v = 0, t = 0;
        memset(m, 0, sizeof *m);
        if (fg_msg_peek(data, len, &v, &t) == 0) {
            m->version = v;
            m->type = t;
        }
    }
    zmq_msg_close(&frame);
    if (more) {
        drain(sock);
        return -2;
    }
    return rc;
}
