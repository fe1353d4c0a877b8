/* rt_after.c - cross-stream dependencies (a command's `after` list) on the
 * gpu worker, whose three executors run the compute and the two copy
 * streams at once.
 *
 * after: a COPY on the host-to-device stream that waits for a long AXPY on
 * the compute stream starts only once the AXPY has ended (the DONE timings
 * say so) and copies the AXPY's result, not what was in the buffer before;
 * a third command on the copy stream behind the waiting one waits too (a
 * stream stays in order); and the supervisor refuses a dependency on a
 * command of another worker or on one never submitted. */
#include <string.h>

#include "rt_test.h"

#define NF (16u << 20)  /* floats per buffer: 64 MB, an AXPY of tens of ms */
#define WAIT_MS 60000

static uint64_t submit(fg_super *sup, fg_msg *m, int stream, uint64_t after) {
    m->flags |= (uint32_t)stream << FG_MSG_STREAM_SHIFT;
    m->after[0] = after;
    uint64_t seq = 0;
    RT_MUST(fg_super_submit(sup, FG_ROLE_GPU, m, NULL, &seq));
    return seq;
}

int rt_test_after(void) {
    fg_super_opts o;
    memset(&o, 0, sizeof o);
    o.roles = 1u << FG_ROLE_GPU | 1u << FG_ROLE_DISK;
    o.worker_path[FG_ROLE_GPU] = rt_worker[FG_ROLE_GPU];
    o.worker_path[FG_ROLE_DISK] = rt_worker[FG_ROLE_DISK];
    fg_super *sup;
    RT_MUST(fg_super_new(&o, &sup));
    uint32_t seg;
    uint64_t B = (uint64_t)NF * 4, stride = (B + 4095) / 4096 * 4096;
    RT_MUST(fg_super_segment_new(sup, "after", 5 * stride, &seg));
    fg_shm_handle x = {seg, FG_SHM_HEADER_BYTES, B}, y = x, out = x, copy = x, small = x;
    y.offset += stride, out.offset += 2 * stride, copy.offset += 3 * stride, small.offset += 4 * stride;
    small.nbytes = 4096;
    float *px = fg_super_ptr(sup, x), *py = fg_super_ptr(sup, y), *po = fg_super_ptr(sup, out);
    for (uint32_t i = 0; i < NF; i++) px[i] = (float)(i % 1000), py[i] = 1.0f, po[i] = -7.0f;

    fg_msg a;
    fg_msg_init(&a, FG_MSG_COMPUTE);
    a.u.compute.op = FG_OP_AXPY;
    float alpha = 2.0f;
    fg_msg_compute_add_in(&a, x);
    fg_msg_compute_add_in(&a, y);
    fg_msg_compute_add_out(&a, out);
    fg_msg_compute_set_params(&a, &alpha, sizeof alpha);
    uint64_t s_axpy = submit(sup, &a, 0, 0);
    fg_msg c;
    fg_msg_init(&c, FG_MSG_COPY);
    fg_msg_copy_add(&c, out, copy);
    uint64_t s_copy = submit(sup, &c, 1, s_axpy);
    fg_msg_init(&c, FG_MSG_COPY);
    fg_msg_copy_add(&c, (fg_shm_handle){seg, x.offset, 4096}, small);
    uint64_t s_next = submit(sup, &c, 1, 0);

    fg_super_done da, dc, dn;
    RT_MUST(fg_super_wait(sup, s_axpy, WAIT_MS, &da));
    RT_MUST(fg_super_wait(sup, s_copy, WAIT_MS, &dc));
    RT_MUST(fg_super_wait(sup, s_next, WAIT_MS, &dn));
    RT_CHECK(dc.start_ns >= da.end_ns, "the COPY started %lld ns before the AXPY it waits for ended",
             (long long)(da.end_ns - dc.start_ns));
    RT_CHECK(dn.start_ns >= dc.end_ns, "the copy stream ran a command past the one waiting");
    const float *pc = fg_super_ptr(sup, copy);
    int bad = 0;
    for (uint32_t i = 0; i < NF && !bad; i += 4099)
        if (pc[i] != 2.0f * (float)(i % 1000) + 1.0f) bad = 1;
    RT_CHECK(!bad, "the COPY read the output before the AXPY wrote it");

    /* refused: a dependency on the disk worker's command, and on the future */
    fg_msg r;
    fg_msg_init(&r, FG_MSG_DISK_READ);
    r.u.disk.buf = small;
    snprintf(r.u.disk.path, sizeof r.u.disk.path, "missing-file");
    uint64_t s_disk = 0;
    RT_MUST(fg_super_submit(sup, FG_ROLE_DISK, &r, NULL, &s_disk));
    fg_msg_init(&c, FG_MSG_COPY);
    fg_msg_copy_add(&c, small, small);
    c.after[0] = s_disk;
    uint64_t s = 0;
    RT_CHECK(fg_super_submit(sup, FG_ROLE_GPU, &c, NULL, &s) == FG_EINPUT && strstr(fg_err_msg(), "same worker"),
             "a dependency on another worker's command was accepted (%s)", fg_err_msg());
    c.after[0] = s_disk + 1000;
    RT_CHECK(fg_super_submit(sup, FG_ROLE_GPU, &c, NULL, &s) == FG_EINPUT && strstr(fg_err_msg(), "never submitted"),
             "a dependency on a command never submitted was accepted (%s)", fg_err_msg());
    fg_super_done dd;
    (void)fg_super_wait(sup, s_disk, WAIT_MS, &dd);   /* fails: the file is missing; that is fine */
    fg_super_destroy(&sup);
    return rt_failures ? 1 : 0;
}
