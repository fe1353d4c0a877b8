/* backends.c - the backends built into this gpu worker, by name. A backend
 * joins by adding its table here; the coordinator links this too, for the
 * workspace sizes its memory plan counts (fg_backend.workspace_bytes). */
#include <string.h>

#include "fg_backend.h"

static const fg_backend *const built[] = {
    &fg_backend_host,
};

const fg_backend *fg_backend_find(const char *name) {
    char names[128] = "";
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++) {
        if (!strcmp(built[i]->name, name)) return built[i];
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", built[i]->name);
    }
    if (!strcmp(name, "cuda"))
        fg_err_set(FG_EINPUT, "--device cuda: this build has no CUDA backend in the gpu worker yet (built: %s)", names);
    else
        fg_err_set(FG_EINPUT, "--device %s: no such backend (built: %s)", name, names);
    return NULL;
}

const char *fg_backend_default(void) { return "host"; }

/* The cuda backend's workspace until it is built into this worker: its fp16
 * intermediates of a step of max_rows rows, as FlexGen's cost model counts
 * a GPU batch's working set (q, k, v, the context, the hidden state and
 * the residual, 9 x H; the MLP's F), without the attention score matrix,
 * which the backend computes in tiles; plus SAMPLE's scratch. A cuda
 * backend allocates within this, so that plans made now stay valid. */
static uint64_t cuda_workspace_bytes(const fg_opt_config *c, uint32_t max_rows) {
    return 2ull * max_rows * (9ull * (uint64_t)c->hidden + (uint64_t)c->ffn_dim) + 8ull * (uint64_t)c->vocab_size;
}

fg_status fg_backend_workspace_bytes(const char *name, const fg_opt_config *c, uint32_t max_rows, uint64_t *bytes) {
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++)
        if (!strcmp(built[i]->name, name)) return *bytes = built[i]->workspace_bytes(c, max_rows), FG_OK;
    if (!strcmp(name, "cuda")) return *bytes = cuda_workspace_bytes(c, max_rows), FG_OK;
    return fg_backend_find(name) ? FG_OK : FG_EINPUT;
}
