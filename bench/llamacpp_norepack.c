/* llamacpp_norepack.c - an LD_PRELOAD shim for bench/llamacpp_bench.mjs:
 * llama.cpp's model defaults with use_extra_bufts off, which is what
 * llama-cli's --no-repack does and node-llama-cpp has no option for. Its
 * CPU backend otherwise copies every Q4_K/Q6_K weight into a repacked
 * buffer of anonymous memory at load, so a model larger than memory cannot
 * run at all; without the copy the weights stay in the mmapped file and the
 * page cache serves them. Built by bench/llamacpp_norepack.sh against the llama.h
 * of node-llama-cpp's own llama.cpp source (llama/gitRelease.bundle), so
 * the struct is the binary's. The real function is looked up in the
 * libllama the addon loaded (dlopen'ed locally: RTLD_NEXT cannot see it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <string.h>

#include "llama.h"

typedef struct llama_model_params (*defaults_fn)(void);

static int find_real(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    if (!strstr(info->dlpi_name, "/libllama.")) return 0;
    void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (h) *(void **)out = dlsym(h, "llama_model_default_params");
    return *(void **)out != NULL;
}

struct llama_model_params llama_model_default_params(void) {
    void *real = NULL;
    dl_iterate_phdr(find_real, &real);
    struct llama_model_params p = ((defaults_fn)real)();
    p.use_extra_bufts = false;
    return p;
}
