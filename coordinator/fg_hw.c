/* fg_hw.c - hardware constants from a profile or a preset (see fg_hw.h). */
#include "fg_hw.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fg_config.h"

/* FlexGen's constants for a Google Cloud T4 (its experimental cost model's
 * defaults, fitted there by gradient descent on measured runs). FlexGen
 * writes bandwidths in GiB/s (GB = 2^30) and FLOP/s in 10^12; here they
 * are converted to 10^9 bytes/s. Its decode attention constant bmm_flops_g
 * counts 4*B*ctx*H FLOPs, which is also the k and v bytes read, so its
 * TFLOPS * 1000 is GB/s; its prefill attention counts 4*B*S*S*H FLOPs,
 * twice this model's causal 2*B*S*S*H, so its figure is halved. Its
 * cpu_flops (with a correction for small batches this model does not
 * have) becomes the CPU attention's bytes/s the same way. */
static void preset_t4(fg_hw *hw) {
    const double GiB = 1073741824.0 / 1e9;
    snprintf(hw->backend, sizeof hw->backend, "cuda");
    hw->shares_host_cpu = 0;
    hw->h2d_gbps = 12.89 * GiB;
    hw->d2h_gbps = 4.82 * GiB;          /* gtoc_bdw_hidden */
    hw->d2h_cache_gbps = 0.97 * GiB;    /* gtoc_bdw_cache */
    hw->disk_read_gbps = 0.473 * GiB;   /* dtoc_bdw */
    hw->disk_write_gbps = 2.015 * GiB;  /* ctod_bdw_hidden_p, ctod_bdw_g */
    hw->mm_prefill_tflops = 21.24;
    hw->mm_decode_tflops = 4.3;
    hw->attn_prefill_tflops = 9.97 / 2;
    hw->attn_decode_gbps = 0.079 * 1000;
    hw->cpu_attn_gbps = 0.0123 * 1000;
    hw->cmd_s = 0;
    /* The network between machines (a pipeline, --stages): FlexGen's cost
     * model has no constant for it and the text of its paper was not at hand
     * here, so this is an assumption: the 208 GB T4 machine is a GCP
     * n1-highmem-32, whose egress Google caps at 32 Gbit/s (2 Gbit/s a vCPU),
     * and 100 us a message one way (a same-zone round trip is 100-200 us). */
    hw->net_gbps = 32.0 / 8;
    hw->net_latency_s = 100e-6;
}

int fg_hw_is_preset(const char *what) { return !strcmp(what, "flexgen-t4"); }

/* A number at obj.key, > 0; `required` 0 leaves *out as it was when absent. */
static fg_status num(const char *path, json_t *obj, const char *sect, const char *key, int required, double *out) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v) return required ? fg_err_set(FG_EINPUT, "%s: missing %s.%s (HINT: flexgen profile --reprofile)", path, sect, key)
                            : FG_OK;
    if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
        return fg_err_set(FG_EINPUT, "%s: %s.%s must be a positive number", path, sect, key);
    *out = json_number_value(v);
    return FG_OK;
}

/* mm, an array of 1..FG_HW_MAX_MM {"rows", "TFLOPS"} points, rows
 * ascending, named `key` in messages (absent: an error if required, else
 * t->n = 0). */
static fg_status rates(const char *path, json_t *mm, const char *key, int required, fg_hw_rates *t) {
    size_t n = json_array_size(mm);
    t->n = 0;
    if (!mm && !required) return FG_OK;
    if (n < 1 || n > FG_HW_MAX_MM)
        return fg_err_set(FG_EINPUT, "%s: gpu.%s must be an array of 1..%d {\"rows\", \"TFLOPS\"} points", path, key,
                          FG_HW_MAX_MM);
    char sect[64];
    snprintf(sect, sizeof sect, "gpu.%s[]", key);
    for (size_t i = 0; i < n; i++) {
        double r = 0, x = 0;
        json_t *e = json_array_get(mm, i);
        fg_status st;
        if ((st = num(path, e, sect, "rows", 1, &r)) || (st = num(path, e, sect, "TFLOPS", 1, &x))) return st;
        if (i && r <= t->rows[i - 1]) return fg_err_set(FG_EINPUT, "%s: gpu.%s rows must ascend", path, key);
        t->rows[i] = r, t->tflops[i] = x, t->n = (int)i + 1;
    }
    return FG_OK;
}

/* obj's GEMM tables (the gpu section's, or a shapes[] entry's): mm (F16;
 * required unless the preset figures stand in), mm_q4 (FlexGen 4-bit) and
 * mm_fmt {NAME: table} (ggml formats; a name this build does not know is
 * skipped, as a key for people would be), replacing every table hw had. */
static fg_status fmt_tables(const char *path, json_t *obj, int mm_required, fg_hw *hw) {
    memset(hw->mm, 0, sizeof hw->mm);
    fg_status st;
    if ((st = rates(path, json_object_get(obj, "mm"), "mm", mm_required, &hw->mm[FG_FMT_F16])) ||
        (st = rates(path, json_object_get(obj, "mm_q4"), "mm_q4", 0, &hw->mm[FG_FMT_Q4G64])))
        return st;
    json_t *by = json_object_get(obj, "mm_fmt"), *v;
    const char *name;
    if (by && !json_is_object(by)) return fg_err_set(FG_EINPUT, "%s: gpu.mm_fmt must be an object {FORMAT: points}", path);
    json_object_foreach(by, name, v) {
        int f = fg_fmt_by_name(name);
        if (f < 0) continue;
        char key[48];
        snprintf(key, sizeof key, "mm_fmt.%.32s", name);
        if (!fg_fmt_is_ggml_quant(f))
            return fg_err_set(FG_EINPUT, "%s: gpu.%s: mm_fmt holds ggml quantized formats' tables (F16's is gpu.mm, "
                                         "FlexGen 4-bit's gpu.mm_q4)", path, key);
        if ((st = rates(path, v, key, 1, &hw->mm[f]))) return st;
    }
    return FG_OK;
}

/* A shapes[] entry's layer shape: hidden, q and kv widths, ffn size and
 * kind. Entries written before the widths and kind were kept are OPT's:
 * q = kv = hidden, a ReLU MLP. */
static fg_status shape_key(const char *path, json_t *e, double key[5]) {
    fg_status st;
    if ((st = num(path, e, "shapes[]", "hidden", 1, &key[0])) || (st = num(path, e, "shapes[]", "ffn", 1, &key[3])))
        return st;
    key[1] = key[2] = key[0], key[4] = FG_FFN_RELU;
    if ((st = num(path, e, "shapes[]", "q_dim", 0, &key[1])) || (st = num(path, e, "shapes[]", "kv_dim", 0, &key[2])))
        return st;
    json_t *k = json_object_get(e, "ffn_kind");
    if (k && !json_is_integer(k)) return fg_err_set(FG_EINPUT, "%s: shapes[].ffn_kind must be an integer", path);
    if (k) key[4] = (double)json_integer_value(k);
    return FG_OK;
}

fg_status fg_hw_shape_distance(const char *path, json_t *entry, const fg_model_config *c, double *dist) {
    double key[5];
    fg_status st = shape_key(path, entry, key);
    if (st) return st;
    const double own[4] = {c->hidden, fg_config_q_dim(c), fg_config_kv_dim(c), c->ffn_dim};
    *dist = key[4] == c->ffn_kind ? 0 : FG_HW_SHAPE_OTHER_KIND;
    for (int i = 0; i < 4; i++) *dist += fabs(log(key[i] / own[i]));
    return FG_OK;
}

/* From "shapes" (an array of measured layer shapes), c's own, else the
 * nearest (fg_hw_shape_distance: an MLP of c's kind first, then the sum of
 * the log ratios of the widths): its GEMM tables and attention rates
 * replace the gpu section's. Nothing when c is NULL or there is no array. */
static fg_status parse_shape(const char *path, json_t *shapes, const fg_model_config *c, fg_hw *hw) {
    size_t n = json_array_size(shapes);
    if (shapes && !json_is_array(shapes)) return fg_err_set(FG_EINPUT, "%s: shapes must be an array", path);
    json_t *best = NULL;
    double best_d = 0;
    for (size_t i = 0; c && i < n; i++) {
        json_t *e = json_array_get(shapes, i);
        double d = 0;
        fg_status st = fg_hw_shape_distance(path, e, c, &d);
        if (st) return st;
        if (!best || d < best_d) best = e, best_d = d;
    }
    if (!best) return FG_OK;
    fg_status st;
    double h = 0;
    if ((st = fmt_tables(path, best, 1, hw)) ||
        (st = num(path, best, "shapes[]", "attn_prefill_TFLOPS", 1, &hw->attn_prefill_tflops)) ||
        (st = num(path, best, "shapes[]", "attn_decode_GBps", 1, &hw->attn_decode_gbps)) ||
        (st = num(path, best, "shapes[]", "hidden", 1, &h)))
        return st;
    const char *m = json_string_value(json_object_get(best, "model"));
    snprintf(hw->shape_model, sizeof hw->shape_model, "%s", m ? m : "?");
    hw->shape_hidden = (int)h, hw->shape_own = best_d == 0;
    return FG_OK;
}

static fg_status parse(const char *path, json_t *root, const fg_model_config *c, fg_hw *hw) {
    json_t *gpu = json_object_get(root, "gpu"), *cpu = json_object_get(root, "cpu"), *disk = json_object_get(root, "disk");
    json_t *rt = json_object_get(root, "runtime");
    if (!json_is_object(gpu) || !json_is_object(cpu) || (disk && !json_is_object(disk)))
        return fg_err_set(FG_EINPUT, "%s: a profile needs objects \"gpu\" and \"cpu\" (and \"disk\", where "
                                     "present, an object)", path);
    const char *be = json_string_value(json_object_get(gpu, "backend"));
    snprintf(hw->backend, sizeof hw->backend, "%s", be ? be : "?");
    hw->shares_host_cpu = json_is_true(json_object_get(gpu, "shares_host_cpu"));
    fg_status st;
    if ((st = num(path, gpu, "gpu", "h2d_GBps", 1, &hw->h2d_gbps)) || (st = num(path, gpu, "gpu", "d2h_GBps", 1, &hw->d2h_gbps)) ||
        (st = num(path, gpu, "gpu", "attn_prefill_TFLOPS", 1, &hw->attn_prefill_tflops)) ||
        (st = num(path, gpu, "gpu", "attn_decode_GBps", 1, &hw->attn_decode_gbps)) ||
        (st = num(path, cpu, "cpu", "attn_decode_GBps", 1, &hw->cpu_attn_gbps)) ||
        (st = num(path, disk, "disk", "disk_read_GBps", disk != NULL, &hw->disk_read_gbps)) ||
        (st = num(path, disk, "disk", "disk_write_GBps", disk != NULL, &hw->disk_write_gbps)) ||
        (st = num(path, disk, "disk", "file_bytes", 0, &hw->disk_test_bytes)) ||
        (st = num(path, gpu, "gpu", "mm_prefill_TFLOPS", 0, &hw->mm_prefill_tflops)) ||
        (st = num(path, gpu, "gpu", "mm_decode_TFLOPS", 0, &hw->mm_decode_tflops)) ||
        (st = num(path, rt, "runtime", "cmd_s", 0, &hw->cmd_s)) || (st = num(path, rt, "runtime", "rtt_s", 0, &hw->rtt_s)))
        return st;
    hw->disk_measured = disk != NULL;
    if (!disk) hw->disk_read_gbps = hw->disk_write_gbps = FG_HW_DISK_UNMEASURED_GBPS;
    /* the disk at the engine's own request size and depth, where measured:
     * the rate a run gets, not the best setting's */
    if ((st = num(path, disk, "disk", "engine_read_GBps", 0, &hw->disk_read_gbps)) ||
        (st = num(path, disk, "disk", "engine_write_GBps", 0, &hw->disk_write_gbps)))
        return st;
    /* the engine's own figures (optional; 0 allowed for the added seconds) */
    json_t *eng = json_object_get(root, "engine");
    const char *factors[5] = {"decode_compute_factor", "prefill_compute_factor", "copy_factor", "prefill_copy_factor",
                              "disk_factor"};
    double *factor_to[5] = {&hw->eng_decode_factor, &hw->eng_prefill_factor, &hw->eng_copy_factor,
                            &hw->eng_prefill_copy_factor, &hw->eng_disk_factor};
    for (int i = 0; eng && i < 5; i++)
        if ((st = num(path, eng, "engine", factors[i], 0, factor_to[i]))) return st;
    const char *adds[3] = {"cpu_attn_unit_s", "cache_load_unit_s", "disk_contention"};
    double *add_to[3] = {&hw->eng_cpu_attn_unit_s, &hw->eng_cache_load_unit_s, &hw->eng_disk_contention};
    for (int i = 0; eng && i < 3; i++) {
        json_t *v = json_object_get(eng, adds[i]);
        double x = json_number_value(v);   /* seconds in [0, 1); the contention, a share in [0, 1] */
        if (v && (!json_is_number(v) || !(x >= 0) || !(i < 2 ? x < 1 : x <= 1)))
            return fg_err_set(FG_EINPUT, "%s: engine.%s must be %s", path, adds[i],
                              i < 2 ? "seconds in [0, 1)" : "a number in [0, 1]");
        if (v) *add_to[i] = x;
    }
    json_t *stream = json_object_get(disk, "stream");   /* optional: what runs measured */
    if ((st = num(path, stream, "disk.stream", "read_GBps", 0, &hw->disk_stream_gbps)) ||
        (st = num(path, stream, "disk.stream", "prefill_read_GBps", 0, &hw->disk_stream_prefill_gbps)) ||
        (st = num(path, stream, "disk.stream", "store_bytes", 0, &hw->disk_stream_bytes)))
        return st;
    hw->d2h_cache_gbps = hw->d2h_gbps;
    if ((st = num(path, gpu, "gpu", "d2h_cache_GBps", 0, &hw->d2h_cache_gbps))) return st;
    json_t *net = json_object_get(root, "network");   /* optional: FG_HW_NET_* stand */
    double lat_us = hw->net_latency_s * 1e6;
    if (net && !json_is_object(net)) return fg_err_set(FG_EINPUT, "%s: \"network\" must be an object", path);
    if ((st = num(path, net, "network", "GBps", 0, &hw->net_gbps)) ||
        (st = num(path, net, "network", "latency_us", 0, &lat_us)))
        return st;
    hw->net_latency_s = lat_us * 1e-6;
    if ((st = fmt_tables(path, gpu, !(hw->mm_prefill_tflops > 0 && hw->mm_decode_tflops > 0), hw))) return st;
    if ((st = parse_shape(path, json_object_get(root, "shapes"), c, hw))) return st;
    /* cpu.attn_points: [{"B", "ctx", "GBps"}], any order; absent: the one rate */
    json_t *pts = json_object_get(cpu, "attn_points");
    size_t n = json_array_size(pts);
    if (pts && (n < 1 || n > FG_HW_MAX_MM))
        return fg_err_set(FG_EINPUT, "%s: cpu.attn_points must be an array of 1..%d {\"B\", \"ctx\", \"GBps\"} points",
                          path, FG_HW_MAX_MM);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(pts, i);
        if ((st = num(path, e, "cpu.attn_points[]", "B", 1, &hw->cpu_attn_B[i])) ||
            (st = num(path, e, "cpu.attn_points[]", "ctx", 1, &hw->cpu_attn_ctx[i])) ||
            (st = num(path, e, "cpu.attn_points[]", "GBps", 1, &hw->cpu_attn_pt_gbps[i])))
            return st;
    }
    hw->n_cpu_attn = (int)n;
    /* by B, then context: each batch size's points a run, contexts ascending */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && (hw->cpu_attn_B[k - 1] > hw->cpu_attn_B[k] ||
                                     (hw->cpu_attn_B[k - 1] == hw->cpu_attn_B[k] &&
                                      hw->cpu_attn_ctx[k - 1] > hw->cpu_attn_ctx[k])); k--) {
            double *col[] = {hw->cpu_attn_B, hw->cpu_attn_ctx, hw->cpu_attn_pt_gbps};
            for (int j = 0; j < 3; j++) {
                double t = col[j][k];
                col[j][k] = col[j][k - 1], col[j][k - 1] = t;
            }
        }
    return FG_OK;
}

fg_status fg_hw_load(const char *what, fg_hw *hw) { return fg_hw_load_for(what, NULL, hw); }

fg_status fg_hw_load_for(const char *what, const fg_model_config *c, fg_hw *hw) {
    memset(hw, 0, sizeof *hw);
    /* no engine figures: the tiers' alone */
    hw->eng_decode_factor = hw->eng_prefill_factor = hw->eng_copy_factor = hw->eng_prefill_copy_factor = 1;
    hw->eng_disk_factor = 1;
    hw->net_gbps = FG_HW_NET_GBPS, hw->net_latency_s = FG_HW_NET_LATENCY_S;
    if (fg_hw_is_preset(what)) {
        snprintf(hw->source, sizeof hw->source, "preset %s", what);
        preset_t4(hw);
        return FG_OK;
    }
    snprintf(hw->source, sizeof hw->source, "%s", what);
    json_t *root = NULL;
    fg_status st = fg_json_load_file(what, &root);
    if (st) return st;
    st = json_is_object(root) ? parse(what, root, c, hw) : fg_err_set(FG_EINPUT, "%s: a profile is a JSON object", what);
    json_decref(root);
    return st;
}

/* A rate table at `rows`, linear in log(rows) between its points. */
static double interp(const fg_hw_rates *t, double rows) {
    if (t->n == 0) return 0;
    if (rows <= t->rows[0]) return t->tflops[0] * rows / t->rows[0];   /* fewer rows: same time, fewer FLOPs */
    return fg_log_interp(t->rows, t->tflops, t->n, rows);
}

int fg_hw_fmt_measured(const fg_hw *hw, int fmt) {
    if (fmt < 0 || fmt >= FG_FMT_COUNT) return 0;
    return hw->mm[fmt].n > 0 || (fmt == FG_FMT_F16 && hw->mm_prefill_tflops > 0 && hw->mm_decode_tflops > 0);
}

double fg_hw_fmt_tflops(const fg_hw *hw, int fmt, double rows, int prefill) {
    double fixed = prefill ? hw->mm_prefill_tflops : hw->mm_decode_tflops;
    if (fixed > 0) return fixed;
    return interp(&hw->mm[fmt >= 0 && fmt < FG_FMT_COUNT && hw->mm[fmt].n > 0 ? fmt : FG_FMT_F16], rows);
}

double fg_hw_cpu_attn_gbps(const fg_hw *hw, double B, double ctx) {
    if (hw->n_cpu_attn == 0) return hw->cpu_attn_gbps;
    int first = 0;   /* the run of the batch size nearest B (points sorted at load) */
    for (int i = 1; i < hw->n_cpu_attn; i++)
        if (fabs(log(hw->cpu_attn_B[i] / B)) < fabs(log(hw->cpu_attn_B[first] / B))) first = i;
    int n = 0;
    while (first + n < hw->n_cpu_attn && hw->cpu_attn_B[first + n] == hw->cpu_attn_B[first]) n++;
    return fg_log_interp(hw->cpu_attn_ctx + first, hw->cpu_attn_pt_gbps + first, n, ctx);
}

int fg_hw_disk_streamed(fg_hw *hw, uint64_t disk_bytes) {
    if (!(hw->disk_stream_gbps > 0) || !(hw->disk_test_bytes > 0) || !((double)disk_bytes > hw->disk_test_bytes))
        return 0;
    hw->disk_read_gbps = hw->disk_stream_gbps;
    hw->disk_read_prefill_gbps = hw->disk_stream_prefill_gbps > 0 ? hw->disk_stream_prefill_gbps : hw->disk_stream_gbps;
    return 1;
}
