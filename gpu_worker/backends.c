/* backends.c - the backends built into this gpu worker, by name, and the
 * default. A backend joins by adding its table here; the coordinator links
 * this too, for the workspace sizes its memory plan counts
 * (fg_backend.workspace_bytes) and for the default --device. */
#include <stdlib.h>
#include <string.h>

#include "fg_backend.h"
#ifdef FG_HAVE_CUDA
#include "fg_cuda.h"
#endif

static const fg_backend *const built[] = {
    &fg_backend_host,
#ifdef FG_HAVE_CUDA
    &fg_backend_cuda,
#endif
};

const fg_backend *fg_backend_find(const char *name) {
    char names[128] = "";
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++) {
        if (!strcmp(built[i]->name, name)) return built[i];
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", built[i]->name);
    }
    if (!strcmp(name, "cuda"))
        fg_err_set(FG_EINPUT, "--device cuda: this build has no CUDA backend (no CUDA toolkit when it was "
                   "configured; built: %s)", names);
    else
        fg_err_set(FG_EINPUT, "--device %s: no such backend (built: %s)", name, names);
    return NULL;
}

fg_status fg_backend_usable(const char *name) {
    if (!fg_backend_find(name)) return FG_EINPUT;
#ifdef FG_HAVE_CUDA
    if (!strcmp(name, "cuda") && !fg_cuda_available(NULL, 0))
        return fg_err_set(FG_EINPUT, "--device cuda: no CUDA device can be opened here (no GPU, no driver, or "
                          "CUDA_VISIBLE_DEVICES hides it); --device host runs on the CPU");
#endif
    return FG_OK;
}

/* The CUDA runtime is asked once per process (cudaGetDeviceCount: a driver
 * start, some 100 ms on a GPU machine; an immediate "no device" on CI). */
const char *fg_backend_default(void) {
    static const char *chosen;
    if (chosen) return chosen;
    const char *env = getenv("FLEXGEN_DEVICE");
    if (env && *env) return chosen = env;
#ifdef FG_HAVE_CUDA
    if (fg_cuda_available(NULL, 0)) return chosen = "cuda";
#endif
    return chosen = "host";
}

static uint64_t up256(uint64_t n) { return (n + 255) / 256 * 256; }

void fg_cuda_ws_layout(const fg_opt_config *c, uint32_t max_rows, fg_cuda_ws *ws) {
    uint64_t R = max_rows, H = (uint64_t)c->hidden, F = (uint64_t)c->ffn_dim, D = (uint64_t)c->word_embed_proj_dim;
    uint64_t P = (uint64_t)c->max_pos + 2, off = 0;
    ws->x16 = off, off += up256(2 * R * (H > D ? H : D));
    ws->q16 = off, off += up256(2 * R * H);
    ws->k16 = off, off += up256(2 * R * H);
    ws->v16 = off, off += up256(2 * R * H);
    ws->y32_bytes = up256(4 * R * H > 6 * P ? 4 * R * H : 6 * P);
    ws->y32 = off, off += ws->y32_bytes;
    ws->ff16 = off, off += up256(2 * R * (F > D ? F : D));
    ws->flags = off, off += 256;
    ws->blas = off, off += FG_CUDA_BLAS_WS_BYTES;
    ws->total = off;
}

fg_status fg_backend_workspace_bytes(const char *name, const fg_opt_config *c, uint32_t max_rows, uint64_t *bytes) {
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++)
        if (!strcmp(built[i]->name, name)) return *bytes = built[i]->workspace_bytes(c, max_rows), FG_OK;
    if (!strcmp(name, "cuda")) {
        /* not built here: plan for a GPU elsewhere (a preset, another
         * machine's profile) with the backend's own layout */
        fg_cuda_ws ws;
        fg_cuda_ws_layout(c, max_rows, &ws);
        return *bytes = ws.total, FG_OK;
    }
    return fg_backend_find(name) ? FG_OK : FG_EINPUT;
}
