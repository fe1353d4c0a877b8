/* fg_prompts.c - reads a prompts file (plain text or JSONL) into a list of
 * prompts with their ids, and a --prompt-ids file into token id lists;
 * formats and errors are described in fg_prompts.h. */
#include "fg_prompts.h"

#include <jansson.h>
#include <limits.h>
#include <string.h>

#include "fg_config.h"
#include "fg_tokenizer.h"

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\v' && s[i] != '\f') return 0;
    return 1;
}

static char *dup_bytes(const char *s, size_t n) {
    char *d = fg_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static void push(fg_prompt_list *l, size_t *cap, fg_prompt p) {
    if (l->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        fg_prompt *items = fg_xmalloc(*cap * sizeof *items);
        if (l->n) memcpy(items, l->items, l->n * sizeof *items);
        free(l->items);
        l->items = items;
        if (l->req) {   /* a batch file's requests grow beside its prompts */
            fg_batch_req *req = fg_xcalloc(*cap, sizeof *req);
            memcpy(req, l->req, l->n * sizeof *req);
            free(l->req);
            l->req = req;
        }
    }
    l->items[l->n++] = p;
}

/* A Batch API file: the first line that is JSON at all is a request. */
static int is_batch_file(const char *data, size_t len) {
    for (size_t pos = 0; pos < len;) {
        const char *line = data + pos, *eol = memchr(line, '\n', len - pos);
        size_t n = eol ? (size_t)(eol - line) : len - pos;
        pos += n + 1;
        json_t *o = is_blank(line, n) ? NULL : json_loadb(line, n, 0, NULL);
        if (!o) continue;
        json_decref(o);
        return fg_batch_line_is_request(line, n);
    }
    return 0;
}

/* One line of a batch file: its request, and its prompt for the encoder. */
static void push_request(const char *path, int lineno, const char *s, size_t n, fg_prompt_list *l, size_t *cap) {
    fg_batch_req r;
    fg_prompt p = {.line = lineno};
    fg_batch_parse_line(path, lineno, s, n, &r, &p.text, &p.messages);
    p.len = strlen(p.text);
    json_t *id = r.custom_id ? json_string(r.custom_id) : json_null();
    p.id_json = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(id);
    if (!p.id_json) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory serializing JSON"));
    push(l, cap, p);
    l->req[l->n - 1] = r;
}

/* A "messages" value: a non-empty list of {"role": string, "content": string, ...}. */
static fg_status check_messages(const char *path, int lineno, const json_t *m) {
    if (!json_is_array(m) || !json_array_size(m))
        return fg_err_set(FG_EINPUT, "%s:%d: \"messages\" must be a non-empty list of {\"role\": ..., \"content\": ...}, "
                          "got %s", path, lineno, json_is_array(m) ? "an empty list" : fg_json_kind(m));
    size_t i;
    json_t *x;
    json_array_foreach(m, i, x) {
        if (!json_is_object(x))
            return fg_err_set(FG_EINPUT, "%s:%d: \"messages\"[%zu] must be an object, got %s", path, lineno, i,
                              fg_json_kind(x));
        static const char *const keys[] = {"role", "content"};
        for (int k = 0; k < 2; k++) {
            json_t *v = json_object_get(x, keys[k]);
            if (!json_is_string(v))
                return fg_err_set(FG_EINPUT, "%s:%d: \"messages\"[%zu]: \"%s\" must be a string, got %s", path, lineno,
                                  i, keys[k], v ? fg_json_kind(v) : "nothing");
        }
    }
    return FG_OK;
}

/* One JSONL line -> a prompt. */
static fg_status parse_jsonl(const char *path, int lineno, const char *s, size_t n, fg_prompt *p) {
    json_error_t jerr;
    /* Duplicate keys are refused: which "prompt" was meant is anyone's guess. */
    json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        return fg_err_set(FG_EINPUT, "%s:%d: malformed JSON at column %d: %s", path, lineno,
                          jerr.column, jerr.text);
    fg_status st = FG_OK;
    json_t *prompt = json_object_get(o, "prompt"), *msgs = json_object_get(o, "messages");
    if (!json_is_object(o)) {
        st = fg_err_set(FG_EINPUT, "%s:%d: expected a JSON object {\"id\": ..., \"prompt\": \"...\"}, "
                        "got %s", path, lineno, fg_json_kind(o));
    } else if (!prompt && !msgs) {
        st = fg_err_set(FG_EINPUT, "%s:%d: missing \"prompt\" (or \"messages\")", path, lineno);
    } else if (prompt && msgs) {
        st = fg_err_set(FG_EINPUT, "%s:%d: both \"prompt\" and \"messages\": give one", path, lineno);
    } else if (prompt && !json_is_string(prompt)) {
        st = fg_err_set(FG_EINPUT, "%s:%d: \"prompt\" must be a string, got %s", path, lineno,
                        fg_json_kind(prompt));
    } else if (!(st = msgs ? check_messages(path, lineno, msgs) : FG_OK)) {
        json_t *id = json_object_get(o, "id");
        char num[32];
        snprintf(num, sizeof num, "%d", lineno - 1);
        p->id_json = id ? json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY) : dup_bytes(num, strlen(num));
        /* a conversation's text is "" until the chat template renders it (fg_prompt_enc.c) */
        p->messages = msgs ? json_dumps(msgs, JSON_COMPACT) : NULL;
        if (!p->id_json || (msgs && !p->messages)) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory serializing JSON"));
        p->len = prompt ? json_string_length(prompt) : 0;
        p->text = dup_bytes(prompt ? json_string_value(prompt) : "", p->len);
        p->line = lineno;
    }
    json_decref(o);
    return st;
}

fg_status fg_prompts_read(const char *path, fg_prompt_list *out) {
    memset(out, 0, sizeof *out);
    char *data;
    size_t len;
    fg_status st = fg_read_file(path, &data, &len);
    if (st) return st;

    size_t bad;
    if (!fg_tok_utf8_valid(data, len, &bad)) {
        int line = 1;
        size_t start = 0;
        for (size_t i = 0; i < bad; i++)
            if (data[i] == '\n') line++, start = i + 1;
        free(data);
        return fg_err_set(FG_EINPUT, "%s:%d: invalid UTF-8 at byte %zu of the line (byte offset "
                          "%zu in the file)", path, line, bad - start + 1, bad);
    }
    /* A byte order mark some editors write is not part of the first prompt. */
    size_t pos0 = len >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3) ? 3 : 0;
    /* The format follows the first non-blank line. */
    for (size_t i = pos0; i < len; i++) {
        char c = data[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f') continue;
        out->jsonl = c == '{';
        break;
    }
    if (is_batch_file(data + pos0, len - pos0)) {
        out->jsonl = 1;
        out->req = fg_xcalloc(1, sizeof *out->req);   /* push grows it */
    }
    size_t cap = 0;
    int lineno = 0;
    int content = 0; /* any non-blank line seen */
    for (size_t pos = pos0; pos < len;) {
        const char *line = data + pos;
        const char *eol = memchr(line, '\n', len - pos);
        size_t n = eol ? (size_t)(eol - line) : len - pos;
        pos += n + 1; /* past the newline; a last line without one ends the loop */
        lineno++;
        if (n && line[n - 1] == '\r') n--;
        int blank = is_blank(line, n);
        content |= !blank;
        if (out->req) {
            if (!blank) push_request(path, lineno, line, n, out, &cap);
        } else if (out->jsonl) {
            if (blank) continue;
            fg_prompt p = {0};
            st = parse_jsonl(path, lineno, line, n, &p);
            if (st) goto fail;
            push(out, &cap, p);
        } else {
            char num[32];
            snprintf(num, sizeof num, "%d", lineno - 1);
            push(out, &cap, (fg_prompt){dup_bytes(num, strlen(num)), dup_bytes(line, n), n, lineno, NULL});
        }
    }
    /* Empty lines at the end are the file's ending, not prompts (an editor's
     * extra newline); inside the file they stay, so ids keep matching lines. */
    while (!out->jsonl && out->n && out->items[out->n - 1].len == 0) {
        out->n--;
        free(out->items[out->n].id_json);
        free(out->items[out->n].text);
    }
    if (out->req) {
        int *lines = fg_xcalloc(out->n ? out->n : 1, sizeof *lines);
        for (size_t i = 0; i < out->n; i++) lines[i] = out->items[i].line;
        st = fg_batch_check_unique(path, out->req, lines, out->n);
        free(lines);
        if (st) goto fail;
    }
    if (!content) {
        st = fg_err_set(FG_EINPUT, "%s:1: no prompts (the file is empty or blank; expected one "
                        "prompt a line, or JSONL objects {\"id\": ..., \"prompt\": \"...\"})", path);
        goto fail;
    }
    free(data);
    return FG_OK;
fail:
    free(data);
    fg_prompts_free(out);
    return st;
}

void fg_prompts_free(fg_prompt_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].id_json);
        free(l->items[i].text);
        free(l->items[i].messages);
        if (l->req) fg_batch_req_free(&l->req[i]);
    }
    free(l->items);
    free(l->req);
    memset(l, 0, sizeof *l);
}

/* ---- --prompt-ids ---- */

void fg_prompt_ids_free(fg_seq_in *in, size_t n) {
    for (size_t i = 0; in && i < n; i++) free(in[i].ids);
    free(in);
}

fg_status fg_prompt_ids_read(const char *path, int vocab_size, fg_seq_in **out, int *n_out) {
    json_t *root;
    fg_status st = fg_json_load_file(path, &root);
    if (st) return st;
    size_t n = json_is_array(root) ? json_array_size(root) : 0;
    if (!n || n > INT_MAX) {
        json_decref(root);
        return fg_err_set(FG_EINPUT, "%s: expected a non-empty JSON list of lists of token ids", path);
    }
    fg_seq_in *in = fg_xcalloc(n, sizeof *in);
    for (size_t i = 0; i < n && !st; i++) {
        json_t *p = json_array_get(root, i);
        size_t m = json_is_array(p) ? json_array_size(p) : 0;
        if (!m || m > INT_MAX) {
            st = fg_err_set(FG_EINPUT, "%s: prompt %zu: expected a non-empty list of token ids", path, i);
            break;
        }
        in[i].ids = fg_xcalloc(m, sizeof(int32_t));
        in[i].len = (int)m;
        for (size_t j = 0; j < m; j++) {
            json_t *x = json_array_get(p, j);
            if (!json_is_integer(x)) {
                st = fg_err_set(FG_EINPUT, "%s: prompt %zu, token %zu: %s is not a token id in [0, %d)", path, i,
                                j, fg_json_kind(x), vocab_size);
                break;
            }
            if (json_integer_value(x) < 0 || json_integer_value(x) >= vocab_size) {
                st = fg_err_set(FG_EINPUT, "%s: prompt %zu, token %zu: id %lld is out of range [0, %d)", path, i, j,
                                (long long)json_integer_value(x), vocab_size);
                break;
            }
            in[i].ids[j] = (int32_t)json_integer_value(x);
        }
    }
    json_decref(root);
    if (st) {
        fg_prompt_ids_free(in, n);
        return st;
    }
    *out = in;
    *n_out = (int)n;
    return FG_OK;
}
