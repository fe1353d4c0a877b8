/* fg_store.c - the tier store as a whole (format in fg_store.h): its
 * identity, opening it (check every file against this build's layout and
 * the source's identity, rebuild what is not valid, under a lock), the
 * read-only open, reads with checksum verification, repair and the
 * accessors. Leaves a file's bytes to fg_store_format.c, conversion to
 * fg_store_build.c, the I/O engine to aio/, the checksum's arithmetic to
 * libxxhash and the weight formats to model/. */
#define _GNU_SOURCE
#include "fg_store_int.h"
#include "fg_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define STORE_QD_DEFAULT 32            /* fg_store_opts.qd 0 */
#define STORE_REQ_DEFAULT (1u << 20)   /* fg_store_opts.req_bytes 0 */
#define STORE_MAX_LAYERS 100000        /* a globals header claiming more is not believed (it sizes an allocation) */
#define IDENTITY_COMP_BYTES 32         /* the compression name in the identity's input (fg_store.h) */

/* XXH3 from libxxhash: the reference implementation, with its SIMD paths,
 * rather than a hand-written hash the tests must keep comparing with one. */
uint64_t fg_store_checksum(const void *p, size_t n) { return XXH3_64bits(p, n); }

sfile *fg_store_file_of(const fg_store *s, int file) {
    FG_ASSERT(file >= FG_STORE_GLOBALS && file < s->n_layers);
    return &s->files[file + 1];
}

/* The store's identity: the weight source's own (model/fg_weights.h: its
 * kind, config, file headers, sizes and mtimes) with what this build makes
 * of it, the format version and the compression. Files whose header carries
 * another identity are stale. */
static uint64_t store_identity(const fg_wsrc *ws, const char *compression) {
    uint8_t b[8 + 4 + IDENTITY_COMP_BYTES];
    put64(b, fg_wsrc_identity(ws));
    put32(b + 8, FG_STORE_IDENTITY_VERSION);
    put_str(b + 12, IDENTITY_COMP_BYTES, compression);
    uint64_t id = fg_store_checksum(b, sizeof b);
    fg_debug("tier store identity %016" PRIx64 ": source %016" PRIx64 " (%s), identity v%d, compression %s", id,
             get64(b), fg_wsrc_describe(ws), FG_STORE_IDENTITY_VERSION, compression);
    return id;
}

fg_status fg_store_verify(const fg_store *s, int file, const void *data) {
    const sfile *sf = fg_store_file_of(s, file);
    const uint8_t *base = data;
    for (int i = 0; i < sf->n; i++) {
        const fg_store_tensor *t = &sf->t[i];
        uint64_t h = fg_store_checksum(base + (t->offset - sf->header_bytes), t->nbytes);
        if (h != t->checksum)
            return fg_err_set(FG_ERUNTIME, "%s: tensor %s (%" PRIu64 " bytes at offset %" PRIu64
                              "): checksum mismatch (stored %016" PRIx64 ", read %016" PRIx64
                              "): the tier store file is damaged (HINT: it is rebuilt by the next "
                              "flexgen run, or delete it)", sf->path, t->name, t->nbytes, t->offset, t->checksum, h);
    }
    return FG_OK;
}

fg_status fg_store_read(const fg_store *s, fg_aio *aio, int file, void *buf, int verify) {
    const sfile *sf = fg_store_file_of(s, file);
    fg_aio_file f;
    fg_status st = fg_aio_file_open(sf->path, O_RDONLY, 0, &f);
    if (st) return st;
    st = fg_aio_read(aio, &f, sf->header_bytes, buf, sf->file_bytes - sf->header_bytes);
    fg_aio_file_close(&f);
    if (!st && verify) st = fg_store_verify(s, file, buf);
    return st;
}

static void remove_partials(const char *root) {
    DIR *d = opendir(root);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        size_t sl = strlen(FG_FS_PARTIAL_SUFFIX);
        if (l > sl && !strcmp(e->d_name + l - sl, FG_FS_PARTIAL_SUFFIX)) {
            char p[PATH_MAX];
            int pn = snprintf(p, sizeof p, "%s/%s", root, e->d_name);
            if (pn < 0 || (size_t)pn >= sizeof p) continue;
            fg_info("tier store: removing an interrupted conversion %s", p);
            unlink(p);
        }
    }
    closedir(d);
}

static fg_store *store_alloc(int n_layers) {
    fg_store *s = fg_xcalloc(1, sizeof *s);
    s->n_layers = n_layers;
    s->files = fg_xcalloc((size_t)n_layers + 1, sizeof *s->files);
    s->qd = STORE_QD_DEFAULT;
    s->req = STORE_REQ_DEFAULT;
    return s;
}

void fg_store_destroy(fg_store **p) {
    fg_store *s = *p;
    if (!s) return;
    for (int i = 0; i <= s->n_layers; i++) free(s->files[i].t);
    free(s->files);
    free(s);
    *p = NULL;
}

static void set_path(fg_store *s, sfile *sf) {
    char lab[STORE_ROOT_SLACK];
    /* callers keep root STORE_ROOT_SLACK bytes short of PATH_MAX */
    int n = snprintf(sf->path, sizeof sf->path, "%s/%s", s->root, fg_store_file_label(sf->layer, lab, sizeof lab));
    FG_ASSERT(n > 0 && (size_t)n < sizeof sf->path);
}

/* Check one file against the expected layout (and its data, if asked);
 * on success copy the checksums from its header. */
static int check_file(fg_store *s, sfile *sf, fg_aio *aio, int verify_data, char *why, size_t whyn) {
    hdr_info hi;
    if (fg_store_read_header(sf->path, &hi, why, whyn)) return 0;
    int ok = fg_store_header_matches(s, sf, &hi, why, whyn);
    if (ok)
        for (int i = 0; i < sf->n; i++) sf->t[i].checksum = hi.f.t[i].checksum;
    free(hi.f.t);
    if (ok && verify_data) {
        void *buf = NULL;
        if (posix_memalign(&buf, FG_STORE_ALIGN, sf->file_bytes - sf->header_bytes)) {
            snprintf(why, whyn, "cannot verify: out of memory");
            return 0;
        }
        int file = sf->layer;
        if (fg_store_read(s, aio, file, buf, 1)) {
            snprintf(why, whyn, "damaged: %s", fg_err_msg());
            ok = 0;
        }
        free(buf);
    }
    return ok;
}

/* A store object for ws's model under dir: its directory (made), name,
 * identity and this build's layout of every file. FG_OK with *out, or
 * the reason (nothing on disk is touched but the directory). */
static fg_status store_new(const char *dir, fg_wsrc *ws, const fg_store_opts *o, fg_store **out) {
    *out = NULL;
    /* The config says whether the weights are held 4-bit (compress_weight):
     * a compressed store is its own variant, with its own directory and
     * identity, beside the fp16 one. */
    const fg_model_config *cfg = fg_wsrc_config(ws);
    const char *comp = cfg->compress_weight ? "q4g64" : "none";
    if (o->compression && strcmp(o->compression, comp))
        return fg_err_set(FG_EINPUT, "tier store: compression '%s' does not match the model's weights ('%s')",
                          o->compression, comp);
    fg_store *s = store_alloc(cfg->n_layers);
    if (o->qd > 0) s->qd = o->qd;
    if (o->req_bytes > 0) s->req = o->req_bytes;
    /* The model id is a single path component: "facebook/opt-1.3b" (a
     * config's _name_or_path) becomes "facebook_opt-1.3b". */
    char id[STORE_NAME_BYTES];
    snprintf(id, sizeof id, "%s", cfg->name[0] ? cfg->name : "opt");
    for (char *c = id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
              *c == '_' || (*c == '.' && c != id)))
            *c = '_';
    int n = snprintf(s->root, sizeof s->root, "%s/%s-%s", dir, id, cfg->compress_weight ? "q4g64" : "fp16");
    snprintf(s->name, sizeof s->name, "%s", cfg->name);
    snprintf(s->desc, sizeof s->desc, "%s", fg_wsrc_describe(ws));
    s->compression = cfg->compress_weight ? 1 : 0;
    fg_status st = FG_OK;
    if (n < 0 || (size_t)n >= sizeof s->root - STORE_ROOT_SLACK)
        st = fg_err_set(FG_EINPUT, "tier store: offload directory path too long: %s", dir);
    if (!st) st = fg_fs_mkdirs(s->root, 0700);
    if (st) {
        fg_store_destroy(&s);
        return st;
    }
    s->identity = store_identity(ws, comp);
    const fg_spec *specs = fg_wsrc_specs(ws);
    for (int i = 0; i <= s->n_layers; i++) {
        sfile *sf = &s->files[i];
        sf->layer = i - 1;
        set_path(s, sf);
        fg_store_layout_file(cfg, specs, sf);
    }
    *out = s;
    return FG_OK;
}

/* One process checks and builds at a time; others wait, then find the
 * store valid. *lock holds the flock (close it to release). */
static fg_status lock_store(const fg_store *s, int *lock) {
    char lp[PATH_MAX + 8];
    snprintf(lp, sizeof lp, "%s/.lock", s->root);
    *lock = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (*lock < 0) return fg_err_set(FG_ERUNTIME, "%s: cannot create lock file: %s", lp, strerror(errno));
    if (flock(*lock, LOCK_EX | LOCK_NB) != 0) {
        fg_info("tier store %s: another process is checking or building it; waiting", s->root);
        while (flock(*lock, LOCK_EX) != 0 && errno == EINTR) {}
    }
    return FG_OK;
}

/* Every file checked (its data too with verify_data): todo[i] set for
 * each one to rebuild, *n_todo of them, *n_missing of those absent. */
static void check_files(fg_store *s, fg_aio *aio, const fg_store_opts *o, int *todo, int *n_todo, int *n_missing) {
    int verify_data = o->verify_data, lo = o->layers_lo, hi = o->layers_hi ? o->layers_hi : s->n_layers;
    *n_todo = *n_missing = 0;
    for (int i = 0; i <= s->n_layers; i++) {
        char why[512];
        sfile *sf = &s->files[i];
        if (i == 0 ? o->skip_globals : sf->layer < lo || sf->layer >= hi) continue;   /* another stage's */
        if (check_file(s, sf, aio, verify_data, why, sizeof why)) continue;
        todo[i] = 1;
        ++*n_todo;
        if (!strcmp(why, "missing")) ++*n_missing;
        else fg_warn("tier store: %s is %s; rebuilding it", sf->path, why);
    }
}

fg_status fg_store_open_or_build(const char *dir, fg_wsrc *ws, fg_store **out) {
    return fg_store_open_or_build_ex(dir, ws, NULL, out);
}

fg_status fg_store_open_or_build_ex(const char *dir, fg_wsrc *ws, const fg_store_opts *o, fg_store **out) {
    fg_store_opts defaults = {0};
    if (!o) o = &defaults;
    fg_store *s;
    fg_status st = store_new(dir, ws, o, &s);
    *out = NULL;
    if (st) return st;
    fg_store_builder *b = NULL;
    int lock = -1;
    if ((st = lock_store(s, &lock))) goto out;
    remove_partials(s->root);
    if ((st = fg_store_builder_new(s->qd, s->req, &b))) goto out;
    int *todo = fg_xcalloc((size_t)s->n_layers + 1, sizeof *todo);
    int n_todo, n_missing;
    check_files(s, fg_store_builder_aio(b), o, todo, &n_todo, &n_missing);
    if (n_todo) st = fg_store_builder_convert(b, s, ws, todo, n_todo, n_missing, o->quiet);
    free(todo);
out:
    fg_store_builder_free(&b);
    if (lock >= 0) close(lock); /* releases the flock */
    if (st) fg_store_destroy(&s);
    *out = s;
    return st;
}

fg_status fg_store_repair(fg_store *s, fg_wsrc *ws, int file) {
    sfile *sf = fg_store_file_of(s, file);
    const fg_model_config *cfg = fg_wsrc_config(ws);
    if (cfg->n_layers != s->n_layers || strcmp(cfg->name, s->name))
        return fg_err_set(FG_EINPUT, "tier store %s: repair with the weights of another model (%s)", s->root,
                          cfg->name);
    fg_store_builder *b;
    fg_status st = fg_store_builder_new(s->qd, s->req, &b);
    fg_warn("tier store: rebuilding %s", sf->path);
    if (!st) st = fg_store_builder_rebuild(b, s, ws, sf);
    fg_store_builder_free(&b);
    return st;
}

fg_status fg_store_invalidate(fg_store *s, int file) {
    const sfile *sf = fg_store_file_of(s, file);
    if (unlink(sf->path) != 0 && errno != ENOENT)
        return fg_err_set(FG_ERUNTIME, "%s: cannot remove the damaged file: %s", sf->path, strerror(errno));
    fg_warn("tier store: removed damaged %s; the next open rebuilds it", sf->path);
    return FG_OK;
}

fg_status fg_store_open(const char *model_dir, fg_store **out) {
    *out = NULL;
    char path[PATH_MAX], why[512];
    hdr_info g;
    if (strlen(model_dir) >= PATH_MAX - STORE_ROOT_SLACK)
        return fg_err_set(FG_EINPUT, "tier store: directory path too long: %s", model_dir);
    snprintf(path, sizeof path, "%s/globals.bin", model_dir);
    if (fg_store_read_header(path, &g, why, sizeof why))
        return fg_err_set(FG_ERUNTIME, "tier store: %s is %s", path, why);
    if (g.f.layer != FG_STORE_GLOBALS || g.n_layers > STORE_MAX_LAYERS) {
        free(g.f.t);
        return fg_err_set(FG_ERUNTIME, "tier store: %s: not a globals file", path);
    }
    fg_store *s = store_alloc((int)g.n_layers);
    snprintf(s->root, sizeof s->root - STORE_ROOT_SLACK, "%s", model_dir);
    snprintf(s->name, sizeof s->name, "%s", g.name);
    snprintf(s->desc, sizeof s->desc, "%s", g.desc);
    s->identity = g.identity;
    s->compression = (int)g.compression;
    s->files[0] = g.f;
    set_path(s, &s->files[0]);
    for (int l = 0; l < s->n_layers; l++) {
        sfile *sf = &s->files[l + 1];
        sf->layer = l;
        set_path(s, sf);
        hdr_info hi;
        fg_status st = FG_OK;
        if (fg_store_read_header(sf->path, &hi, why, sizeof why))
            st = fg_err_set(FG_ERUNTIME, "tier store: %s is %s", sf->path, why);
        else if (hi.identity != g.identity || hi.f.layer != l || hi.n_layers != g.n_layers)
            st = fg_err_set(FG_ERUNTIME, "tier store: %s does not belong with %s (another model or layer)",
                            sf->path, path);
        if (st) {
            free(hi.f.t);
            fg_store_destroy(&s);
            return st;
        }
        sf->n = hi.f.n;
        sf->t = hi.f.t;
        sf->header_bytes = hi.f.header_bytes;
        sf->file_bytes = hi.f.file_bytes;
    }
    *out = s;
    return FG_OK;
}

/* ---- accessors ---- */

const char *fg_store_dir(const fg_store *s) { return s->root; }
uint64_t fg_store_identity(const fg_store *s) { return s->identity; }
int fg_store_n_layers(const fg_store *s) { return s->n_layers; }
const char *fg_store_path(const fg_store *s, int file) { return fg_store_file_of(s, file)->path; }

const fg_store_tensor *fg_store_tensors(const fg_store *s, int file, int *n) {
    const sfile *sf = fg_store_file_of(s, file);
    *n = sf->n;
    return sf->t;
}

void fg_store_data_range(const fg_store *s, int file, uint64_t *offset, uint64_t *nbytes) {
    const sfile *sf = fg_store_file_of(s, file);
    *offset = sf->header_bytes;
    *nbytes = sf->file_bytes - sf->header_bytes;
}

uint64_t fg_store_max_data_bytes(const fg_store *s) {
    uint64_t m = 0;
    for (int i = 0; i <= s->n_layers; i++)
        if (s->files[i].file_bytes - s->files[i].header_bytes > m) m = s->files[i].file_bytes - s->files[i].header_bytes;
    return m;
}

uint64_t fg_store_total_bytes(const fg_store *s) {
    uint64_t t = 0;
    for (int i = 0; i <= s->n_layers; i++) t += s->files[i].file_bytes - s->files[i].header_bytes;
    return t;
}
