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
