/* fg_devsize.c - devices by name: which are built, which is present, and
 * each one's workspace (see fg_devsize.h). */
#include "fg_devsize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef FG_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#endif

#include "fg_opt.h"

#ifdef FG_HAVE_CUDA
#define CUDA_BUILT 1
#else
#define CUDA_BUILT 0
#endif

static const struct {
    const char *name;
    int built;   /* a backend of this build; the others are sized only */
    uint64_t (*workspace)(const fg_model_config *c, uint32_t max_rows);
} devices[] = {
    {"host", 1, fg_devsize_host_bytes},
    {"cuda", CUDA_BUILT, fg_devsize_cuda_bytes},
};
#define NDEVICES (sizeof devices / sizeof devices[0])

static int find(const char *name) {
    for (size_t i = 0; i < NDEVICES; i++)
        if (!strcmp(devices[i].name, name)) return (int)i;
    return -1;
}

fg_status fg_devsize_known(const char *name) {
    int i = find(name);
    if (i >= 0 && devices[i].built) return FG_OK;
    char built[128] = "", absent[128] = "";
    for (size_t k = 0; k < NDEVICES; k++) {
        char *list = devices[k].built ? built : absent;
        snprintf(list + strlen(list), sizeof built - strlen(list), "%s%s", list[0] ? ", " : "", devices[k].name);
    }
    if (i >= 0)
        return fg_err_set(FG_EINPUT, "--device %s: this build has no %s backend (its toolkit was not found when "
                          "it was configured; built: %s)", name, name, built);
    return fg_err_set(FG_EINPUT, "--device %s: no such backend (built: %s%s%s%s)", name, built,
                      absent[0] ? "; " : "", absent, absent[0] ? " where its toolkit is found" : "");
}

#ifdef FG_HAVE_CUDA
static int gpu_present;
static pthread_once_t gpu_asked = PTHREAD_ONCE_INIT;

/* A GPU the driver can open: cuInit and cuDeviceGetCount from libcuda,
 * without the runtime or cuBLAS. libcuda stays loaded: a driver once
 * started is not unloaded. */
static void ask_driver(void) {
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(unsigned) = drv ? (int (*)(unsigned))dlsym(drv, "cuInit") : NULL;
    int (*count)(int *) = drv ? (int (*)(int *))dlsym(drv, "cuDeviceGetCount") : NULL;
    int n = 0;
    gpu_present = init && count && init(0) == 0 && count(&n) == 0 && n > 0;
}

static int cuda_device_present(void) {
    pthread_once(&gpu_asked, ask_driver);
    return gpu_present;
}
#endif

fg_status fg_devsize_usable(const char *name) {
    fg_status st = fg_devsize_known(name);
#ifdef FG_HAVE_CUDA
    if (!st && !strcmp(name, "cuda") && !cuda_device_present())
        st = fg_err_set(FG_EINPUT, "--device cuda: no CUDA device can be opened here (no GPU, no driver, or "
                        "CUDA_VISIBLE_DEVICES hides it); --device host runs on the CPU");
#endif
    return st;
}

const char *fg_devsize_default(void) {
    static const char *chosen;
    if (chosen) return chosen;
    const char *env = getenv("FLEXGEN_DEVICE");
    if (env && *env) return chosen = env;
#ifdef FG_HAVE_CUDA
    if (cuda_device_present()) return chosen = "cuda";
#endif
    return chosen = "host";
}

fg_status fg_devsize_workspace_bytes(const char *name, const fg_model_config *c, uint32_t max_rows, uint64_t *bytes) {
    int i = find(name);
    if (i < 0) return fg_devsize_known(name);
    *bytes = devices[i].workspace(c, max_rows);
    return FG_OK;
}

uint64_t fg_devsize_host_bytes(const fg_model_config *c, uint32_t max_rows) {
    return fg_opt_ws_bytes(c, (int)max_rows) + sizeof(float) * (uint64_t)max_rows * (uint64_t)c->hidden +
           2 * sizeof(float) * (uint64_t)c->vocab_size;
}

uint64_t fg_devsize_cuda_bytes(const fg_model_config *c, uint32_t max_rows) {
    fg_cuda_ws ws;
    fg_devsize_cuda_layout(c, max_rows, &ws);
    return ws.total;
}

static uint64_t up(uint64_t n) { return (n + FG_CUDA_WS_ALIGN - 1) / FG_CUDA_WS_ALIGN * FG_CUDA_WS_ALIGN; }
static uint64_t max2(uint64_t a, uint64_t b) { return a > b ? a : b; }

void fg_devsize_cuda_layout(const fg_model_config *c, uint32_t max_rows, fg_cuda_ws *ws) {
    uint64_t R = max_rows, H = (uint64_t)c->hidden, D = (uint64_t)c->word_embed_proj_dim;
    uint64_t F = max2((uint64_t)c->ffn_dim, c->n_experts ? (uint64_t)c->moe_ffn_dim : 0);   /* dense or an expert's */
    uint64_t E = (uint64_t)c->n_experts, k = E ? (uint64_t)c->experts_per_token : 0;
    uint64_t Q = (uint64_t)fg_config_q_dim(c), KV = (uint64_t)fg_config_kv_dim(c);
    uint64_t FF = (uint64_t)(fg_config_ffn_mats(c) - 1) * F;   /* fc1's output, or a gated MLP's gate and up */
    uint64_t P = (uint64_t)c->max_pos + 2, off = 0;
    const uint64_t h16 = sizeof(uint16_t);   /* an fp16 element */
    ws->x16 = off, off += up(h16 * R * max2(max2(H, D), Q));
    ws->q16 = off, off += up(h16 * R * Q);
    ws->k16 = off, off += up(h16 * R * KV);
    ws->v16 = off, off += up(h16 * R * KV);
    ws->y32_bytes = up(max2(sizeof(float) * R * max2(H, Q), FG_CUDA_SCORE_BYTES * P));
    ws->y32 = off, off += ws->y32_bytes;
    ws->ff16 = off, off += up(h16 * R * max2(FF, D));
    /* the largest matrix: q (Q, H), fc1/up (F, H), fc2 (H, F), the embedding or head (V, D), project_in/out
     * (H, D); k, v (KV, H) and o (H, Q) are no larger than q */
    uint64_t area = max2(max2(Q * H, F * H), max2((uint64_t)c->vocab_size * D, D * H));
    ws->w16_bytes = R > FG_CUDA_GEMV_MAX_ROWS ? up(h16 * area < FG_CUDA_DQ_TILE_MAX ? h16 * area : FG_CUDA_DQ_TILE_MAX)
                                             : 0;
    ws->w16 = off, off += ws->w16_bytes;
    ws->flags = off, off += FG_CUDA_FLAGS_BYTES;
    const uint64_t i32 = sizeof(int32_t), f32 = sizeof(float);
    ws->moe_logits = off, off += up(f32 * R * E);
    ws->moe_sel = off, off += up(i32 * R * k);
    ws->moe_wt = off, off += up(f32 * R * k);
    ws->moe_order = off, off += up(i32 * R * k);
    ws->moe_counts = off, off += E ? up(i32 * (2 * E + 1)) : 0;
    ws->moe_x16 = off, off += E ? up(h16 * R * H) : 0;
    ws->moe_y32 = off, off += E ? up(f32 * R * H) : 0;
    ws->kv16_bytes = c->compress_cache ? up(2 * h16 * P * (uint64_t)c->head_dim) : 0;
    ws->kv16 = off, off += ws->kv16_bytes;
    uint64_t blas = up(sizeof(float) * R * max2(max2(F, H), Q));
    ws->blas_bytes = blas < FG_CUDA_BLAS_WS_MAX ? blas : FG_CUDA_BLAS_WS_MAX;
    ws->blas = off, off += ws->blas_bytes;
    ws->total = off;
}
