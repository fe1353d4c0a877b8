/* backends.c - the backends of this gpu worker, by name. The host backend
 * is linked in. The cuda backend, where CMake found a toolkit, is a module
 * beside the programs (build/bin/libflexgen-cuda.so, gpu_worker/cuda/)
 * loaded the first time it is asked for by name, so a program that never
 * runs it loads no CUDA library. Which devices are built or present, the
 * default, and their workspaces are fg_devsize's (device/), which the
 * coordinator links without any backend. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#ifdef FG_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#endif

#include "fg_backend.h"
#include "fg_devsize.h"

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
#else
void *fg_backend_cuda_sym(const char *name) { return NULL; }
#endif

const fg_backend *fg_backend_find(const char *name) {
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++)
        if (!strcmp(built[i]->name, name)) return built[i];
#ifdef FG_HAVE_CUDA
    if (!strcmp(name, "cuda")) {
        const fg_backend *be = fg_backend_cuda_sym("fg_backend_cuda");
        if (!be)
            fg_err_set(FG_ERUNTIME, "--device cuda: cannot load the cuda backend (%s beside the program): %s",
                       CUDA_MODULE, cuda_error[0] ? cuda_error : "no fg_backend_cuda in it");
        return be;
    }
#endif
    if (!fg_devsize_known(name))   /* built, yet no table here: the two lists disagree */
        fg_err_set(FG_ERUNTIME, "--device %s: built, but not in the gpu worker's registry (backends.c)", name);
    return NULL;
}
