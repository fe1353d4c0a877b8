/* fg_ring.c - MPI for a pipeline run (fg_ring.h), and its absence: built
 * without MPI, a run is one rank and any call that would need MPI says so. */
#include "fg_ring.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FG_HAVE_MPI
#include <mpi.h>
_Static_assert(sizeof(MPI_Request) <= sizeof(((fg_ring_req *)0)->opaque), "fg_ring_req holds an MPI_Request");
#endif

static int ring_rank, ring_size = 1, ring_mpi, ring_finished;
static double ring_send_s;

double fg_ring_send_seconds(void) { return ring_send_s; }

/* The size mpirun gave this process: OpenMPI, MPICH/Hydra and PMIx say it
 * in the environment; 1 when none does. */
static int launched_size(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 1;
}

#ifdef FG_HAVE_MPI
static char ring_role[64];   /* the log's name of this process */

/* A rank that exits before fg_ring_finish (an error, fg_exit_on) ends
 * every rank: the others would wait for it forever. */
static void abort_others(void) {
    if (!ring_mpi || ring_finished) return;
    fprintf(stderr, "flexgen: error: rank %d of %d ended with an error: ending every rank\n", ring_rank, ring_size);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static fg_status mpi_err(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return FG_OK;
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    return fg_err_set(FG_ERUNTIME, "rank %d: %s: %s", ring_rank, what, s);
}

static fg_status count_of(uint64_t n, int *c) {
    if (n > INT_MAX) return fg_err_set(FG_ERUNTIME, "rank %d: a message of %llu bytes is over MPI's int count",
                                       ring_rank, (unsigned long long)n);
    *c = (int)n;
    return FG_OK;
}
#endif

fg_status fg_ring_init(void) {
    if (ring_mpi) return FG_OK;
    int want = launched_size();
    if (want <= 1) return FG_OK;
#ifdef FG_HAVE_MPI
    int provided;
    /* only the main thread calls MPI (the heartbeat thread never does) */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return fg_err_set(FG_ERUNTIME, "MPI_Init failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &ring_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ring_size);
    ring_mpi = 1;
    atexit(abort_others);
    snprintf(ring_role, sizeof ring_role, "coordinator rank %d/%d", ring_rank, ring_size);
    fg_log_init(ring_role);
    return FG_OK;
#else
    return fg_err_set(FG_EINPUT, "mpirun started %d ranks but this flexgen was built without MPI (install "
                                 "libopenmpi-dev and rebuild: scripts/build.sh)", want);
#endif
}

int fg_ring_rank(void) { return ring_rank; }
int fg_ring_size(void) { return ring_size; }

void fg_ring_finish(void) {
#ifdef FG_HAVE_MPI
    if (ring_mpi && !ring_finished) {
        ring_finished = 1;
        MPI_Finalize();
    }
#endif
}

void fg_ring_stage(int L, int r, int P, int *lo, int *hi) {
    *lo = (int)((long)r * L / P);   /* as the pipeline's cost model splits them (fg_cost_pipe.h) */
    *hi = (int)((long)(r + 1) * L / P);
}

#ifdef FG_HAVE_MPI
#define REQ(r) ((MPI_Request *)(void *)(r)->opaque)

fg_status fg_ring_isend(const void *buf, uint64_t n, int dest, int tag, fg_ring_req *r) {
    int c = 0;
    fg_status st = count_of(n, &c);
    if (st) return st;
    r->active = 1, r->send = 1, r->t0 = fg_now();
    return mpi_err(MPI_Isend(buf, c, MPI_BYTE, dest, tag, MPI_COMM_WORLD, REQ(r)), "MPI_Isend");
}

fg_status fg_ring_irecv(void *buf, uint64_t cap, int src, int tag, fg_ring_req *r) {
    int c = 0;
    fg_status st = count_of(cap, &c);
    if (st) return st;
    r->active = 1, r->send = 0, r->t0 = fg_now();
    return mpi_err(MPI_Irecv(buf, c, MPI_BYTE, src, tag, MPI_COMM_WORLD, REQ(r)), "MPI_Irecv");
}

int fg_ring_test(fg_ring_req *r, uint64_t *n) {
    if (!r->active) return 1;
    int done = 0;
    MPI_Status s;
    if (MPI_Test(REQ(r), &done, &s) != MPI_SUCCESS) done = 1;
    if (!done) return 0;
    int c = 0;
    MPI_Get_count(&s, MPI_BYTE, &c);
    if (n) *n = (uint64_t)(c < 0 ? 0 : c);
    if (r->send) ring_send_s += fg_now() - r->t0;
    r->active = 0;
    return 1;
}

void fg_ring_cancel(fg_ring_req *r) {
    if (!r->active) return;
    MPI_Cancel(REQ(r));
    MPI_Wait(REQ(r), MPI_STATUS_IGNORE);
    r->active = 0;
}

int fg_ring_probe(int src, int tag, uint64_t *n) {
    int flag = 0, c = 0;
    MPI_Status s;
    if (MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &s) != MPI_SUCCESS || !flag) return 0;
    MPI_Get_count(&s, MPI_BYTE, &c);
    *n = (uint64_t)c;
    return 1;
}

fg_status fg_ring_recv(void *buf, uint64_t n, int src, int tag) {
    int c = 0;
    fg_status st = count_of(n, &c);
    return st ? st : mpi_err(MPI_Recv(buf, c, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
}

fg_status fg_ring_bcast(void *buf, uint64_t n, int root) {
    if (!ring_mpi) return FG_OK;   /* one rank: it has what it would get */
    int c = 0;
    fg_status st = count_of(n, &c);
    return st ? st : mpi_err(MPI_Bcast(buf, c, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

fg_status fg_ring_gather(const void *send, uint64_t n, void *recv, int root) {
    if (!ring_mpi) {
        memcpy(recv, send, n);
        return FG_OK;
    }
    int c = 0;
    fg_status st = count_of(n, &c);
    return st ? st : mpi_err(MPI_Gather(send, c, MPI_BYTE, recv, c, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Gather");
}

#else
/* One rank: nothing to send to, nothing to wait for. */
static fg_status no_mpi(void) { return fg_err_set(FG_ERUNTIME, "this flexgen was built without MPI"); }
fg_status fg_ring_isend(const void *buf, uint64_t n, int dest, int tag, fg_ring_req *r) { return no_mpi(); }
fg_status fg_ring_irecv(void *buf, uint64_t cap, int src, int tag, fg_ring_req *r) { return no_mpi(); }
int fg_ring_test(fg_ring_req *r, uint64_t *n) { return 1; }
void fg_ring_cancel(fg_ring_req *r) { r->active = 0; }
int fg_ring_probe(int src, int tag, uint64_t *n) { return 0; }
fg_status fg_ring_recv(void *buf, uint64_t n, int src, int tag) { return no_mpi(); }
fg_status fg_ring_bcast(void *buf, uint64_t n, int root) { return FG_OK; }
fg_status fg_ring_gather(const void *send, uint64_t n, void *recv, int root) {
    memcpy(recv, send, n);
    return FG_OK;
}
#endif
