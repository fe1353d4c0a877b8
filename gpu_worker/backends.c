/* backends.c - the backends of this gpu worker, by name, and the default.
 * The host backend is linked in. The cuda backend, where CMake found a
 * toolkit, is a module beside the programs (build/bin/libflexgen-cuda.so,
 * gpu_worker/cuda/) loaded the first time it is asked for by name, so a
 * program that never runs it loads no CUDA library; whether a GPU is there
 * is asked of the driver itself (libcuda, also loaded on demand). The
 * coordinator links this too, for the workspace sizes its memory plan
 * counts (the cuda backend's own layout function is here) and the default
 * --device. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#ifdef FG_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#endif

#include "fg_backend.h"

static const fg_backend *const built[] = {
    &fg_backend_host,
};

#ifdef FG_HAVE_CUDA
#define CUDA_MODULE "libflexgen-cuda.so"

static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static void *cuda_module;
static char cuda_error[512];

/* Load the module from the directory of this program's executable, once;
 * NULL with cuda_error set when it cannot be. */
static void *cuda_open_module(void) {
    pthread_mutex_lock(&cuda_lock);
    if (!cuda_module && !cuda_error[0]) {
        char path[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - sizeof CUDA_MODULE - 1);
        char *slash = n > 0 ? (path[n] = 0, strrchr(path, '/')) : NULL;
        if (!slash) {
            snprintf(cuda_error, sizeof cuda_error, "cannot find this program's directory for %s", CUDA_MODULE);
        } else {
            strcpy(slash + 1, CUDA_MODULE);
            if (!(cuda_module = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
                snprintf(cuda_error, sizeof cuda_error, "%s", dlerror());
        }
    }
    void *m = cuda_module;
    pthread_mutex_unlock(&cuda_lock);
    return m;
}

void *fg_backend_cuda_sym(const char *name) {
    void *m = cuda_open_module();
    return m ? dlsym(m, name) : NULL;
}

/* A GPU the driver can open: cuInit and cuDeviceGetCount from libcuda,
 * without the runtime or cuBLAS. Honors CUDA_VISIBLE_DEVICES. */
static int cuda_device_present(void) {
    static int known = -1;
    pthread_mutex_lock(&cuda_lock);
    if (known < 0) {
        known = 0;
        void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        int (*init)(unsigned) = drv ? (int (*)(unsigned))dlsym(drv, "cuInit") : NULL;
        int (*count)(int *) = drv ? (int (*)(int *))dlsym(drv, "cuDeviceGetCount") : NULL;
        int n = 0;
        if (init && count && init(0) == 0 && count(&n) == 0) known = n > 0;
        /* libcuda stays loaded: a driver once started is not unloaded */
    }
    int k = known;
    pthread_mutex_unlock(&cuda_lock);
    return k;
}
#else
void *fg_backend_cuda_sym(const char *name) { return NULL; }
#endif

const fg_backend *fg_backend_find(const char *name) {
    char names[128] = "";
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++) {
        if (!strcmp(built[i]->name, name)) return built[i];
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", built[i]->name);
    }
#ifdef FG_HAVE_CUDA
    if (!strcmp(name, "cuda")) {
        const fg_backend *be = fg_backend_cuda_sym("fg_backend_cuda");
        if (!be)
            fg_err_set(FG_ERUNTIME, "--device cuda: cannot load the cuda backend (%s beside the program): %s",
                       CUDA_MODULE, cuda_error[0] ? cuda_error : "no fg_backend_cuda in it");
        return be;
    }
#endif
    if (!strcmp(name, "cuda"))
        fg_err_set(FG_EINPUT, "--device cuda: this build has no CUDA backend (no CUDA toolkit when it was "
                   "configured; built: %s)", names);
    else
        fg_err_set(FG_EINPUT, "--device %s: no such backend (built: %s, cuda where a toolkit is found)", name, names);
    return NULL;
}

fg_status fg_backend_known(const char *name) {
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++)
        if (!strcmp(built[i]->name, name)) return FG_OK;
#ifdef FG_HAVE_CUDA
    if (!strcmp(name, "cuda")) return FG_OK;
#endif
    return fg_backend_find(name) ? FG_OK : FG_EINPUT;   /* its message */
}

fg_status fg_backend_usable(const char *name) {
    fg_status st = fg_backend_known(name);
#ifdef FG_HAVE_CUDA
    if (!st && !strcmp(name, "cuda") && !cuda_device_present())
        st = fg_err_set(FG_EINPUT, "--device cuda: no CUDA device can be opened here (no GPU, no driver, or "
                        "CUDA_VISIBLE_DEVICES hides it); --device host runs on the CPU");
#endif
    return st;
}

/* Asked once per process. */
const char *fg_backend_default(void) {
    static const char *chosen;
    if (chosen) return chosen;
    const char *env = getenv("FLEXGEN_DEVICE");
    if (env && *env) return chosen = env;
#ifdef FG_HAVE_CUDA
    if (cuda_device_present()) return chosen = "cuda";
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
    uint64_t blas = up256(4 * R * (F > H ? F : H));
    ws->blas_bytes = blas < FG_CUDA_BLAS_WS_MAX ? blas : FG_CUDA_BLAS_WS_MAX;
    ws->blas = off, off += ws->blas_bytes;
    ws->total = off;
}

fg_status fg_backend_workspace_bytes(const char *name, const fg_opt_config *c, uint32_t max_rows, uint64_t *bytes) {
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++)
        if (!strcmp(built[i]->name, name)) return *bytes = built[i]->workspace_bytes(c, max_rows), FG_OK;
    if (!strcmp(name, "cuda")) {
        /* the backend's own layout, without loading it (and planning for a
         * GPU elsewhere, from a preset or another machine's profile, works
         * in a build without CUDA too) */
        fg_cuda_ws ws;
        fg_cuda_ws_layout(c, max_rows, &ws);
        return *bytes = ws.total, FG_OK;
    }
    return fg_backend_find(name) ? FG_OK : FG_EINPUT;
}
