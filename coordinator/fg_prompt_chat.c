/* fg_prompt_chat.c - finds a run's chat template (--chat-template, the model
 * directory's chat_template.jinja or tokenizer_config.json, a GGUF file's
 * tokenizer.chat_template), its special tokens, and renders "messages"
 * prompts with it (fg_prompt_chat.h). */
#include "fg_prompt_chat.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fg_config.h"
#include "fg_gguf.h"

struct fg_prompt_chat {
    fg_tmpl *t;
    json_t *tokens; /* {"bos_token": ..., "eos_token": ...}: those the model has */
};

/* A special token as tokenizer_config.json writes it: a string, or {"content": "..."} (an AddedToken). */
static json_t *token_text(const json_t *v) {
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? json_incref((json_t *)v) : NULL;
}

/* The template inside tokenizer_config.json: "chat_template" as a string, or a list of named ones ("default"). */
static fg_status config_template(const char *path, const json_t *cfg, const char **src) {
    const json_t *ct = json_object_get(cfg, "chat_template");
    *src = NULL;
    if (!ct || json_is_null(ct)) return FG_OK;
    if (json_is_string(ct)) return *src = json_string_value(ct), FG_OK;
    size_t i;
    json_t *x;
    if (json_is_array(ct)) json_array_foreach((json_t *)ct, i, x) {
        const json_t *name = json_object_get(x, "name"), *t = json_object_get(x, "template");
        if (json_is_string(name) && !strcmp(json_string_value(name), "default") && json_is_string(t))
            return *src = json_string_value(t), FG_OK;
    }
    return fg_err_set(FG_EINPUT, "%s: \"chat_template\" is neither a string nor a list of {\"name\", \"template\"} "
                                 "with one named \"default\"", path);
}

/* Whether the model is a GGUF file (its name ends in ".gguf", as fg_tok_open_model_dir decides). */
static int is_gguf(const char *model) {
    size_t n = model ? strlen(model) : 0;
    return n > 5 && !strcmp(model + n - 5, ".gguf");
}

/* A GGUF file's tokenizer.chat_template (the key llama.cpp's converter writes from tokenizer_config.json);
 * FG_EINPUT naming the file where it has none or the value is not a string. */
static fg_status gguf_template(const char *path, char **text, size_t *len, char *name, size_t name_len) {
    static const char key[] = "tokenizer.chat_template";
    fg_gguf *g;
    fg_status st = fg_gguf_open(path, &g);
    if (st) return st;
    const char *t = NULL;
    if (fg_gguf_find_kv(g, key) < 0)
        st = fg_err_set(FG_EINPUT, "%s has no chat template (no %s in its metadata): give one with "
                                   "--chat-template FILE", path, key);
    else st = fg_gguf_get_string(g, key, &t, len);
    if (!st) {
        *text = fg_xmalloc(*len + 1);
        memcpy(*text, t, *len + 1);
        snprintf(name, name_len, "%s:%s", path, key);
    }
    fg_gguf_close(&g);
    return st;
}

/* The template's text and the name its messages use; FG_EINPUT saying how to give one where there is none. */
static fg_status find_template(const fg_chat_src *src, const json_t *cfg, const char *cfg_path, char **text,
                               size_t *len, char *name, size_t name_len) {
    char path[PATH_MAX];
    if (src->template_path) {
        snprintf(name, name_len, "%s", src->template_path);
        return fg_read_file(src->template_path, text, len);
    }
    if (is_gguf(src->model_dir)) return gguf_template(src->model_dir, text, len, name, name_len);
    if (src->model_dir) {
        snprintf(path, sizeof path, "%s/chat_template.jinja", src->model_dir);
        if (access(path, F_OK) == 0) {
            snprintf(name, name_len, "%s", path);
            return fg_read_file(path, text, len);
        }
    }
    const char *t = NULL;
    fg_status st = cfg ? config_template(cfg_path, cfg, &t) : FG_OK;
    if (st) return st;
    if (!t) {
        if (!src->model_dir) return fg_err_set(FG_EINPUT, "a --dummy model has no chat template: give one with --chat-template FILE");
        return fg_err_set(FG_EINPUT, "%s has no chat template (no chat_template.jinja, no \"chat_template\" in "
                          "tokenizer_config.json): give one with --chat-template FILE", src->model_dir);
    }
    snprintf(name, name_len, "%s:chat_template", cfg_path);
    *len = strlen(t);
    *text = strdup(t);
    if (!*text) fg_exit_on(fg_err_set(FG_ERUNTIME, "out of memory"));
    return FG_OK;
}

/* bos_token and eos_token: tokenizer_config.json's (null there: left undefined, as transformers leaves an unset
 * special token), else the tokenizer's own. */
static json_t *special_tokens(const json_t *cfg, const fg_tok *tok) {
    static const char *const keys[] = {"bos_token", "eos_token"};
    json_t *out = json_object();
    for (int k = 0; k < 2; k++) {
        const json_t *v = cfg ? json_object_get(cfg, keys[k]) : NULL;
        json_t *s = v ? token_text(v) : NULL;
        if (!v && tok) {
            const char *t = fg_tok_token(tok, k ? fg_tok_eos_id(tok) : fg_tok_bos_id(tok));
            s = t ? json_string(t) : NULL;
        }
        if (s) json_object_set_new(out, keys[k], s);
    }
    return out;
}

fg_status fg_prompt_chat_open(const fg_chat_src *src, const fg_tok *tok, fg_prompt_chat **out) {
    *out = NULL;
    char cfg_path[PATH_MAX] = "", name[PATH_MAX + 32];
    json_t *cfg = NULL;
    fg_status st = FG_OK;
    if (src->model_dir && !is_gguf(src->model_dir)) {
        snprintf(cfg_path, sizeof cfg_path, "%s/tokenizer_config.json", src->model_dir);
        if (access(cfg_path, F_OK) == 0) st = fg_json_load_file_ex(cfg_path, JSON_DECODE_INT_AS_REAL, &cfg);
        if (!st && cfg && !json_is_object(cfg)) st = fg_err_set(FG_EINPUT, "%s: expected a JSON object", cfg_path);
    }
    char *text = NULL;
    size_t len = 0;
    if (!st) st = find_template(src, cfg, cfg_path, &text, &len, name, sizeof name);
    fg_tmpl *t = NULL;
    if (!st) st = fg_tmpl_parse(text, len, name, &t);
    if (!st) {
        *out = fg_xcalloc(1, sizeof **out);
        (*out)->t = t;
        (*out)->tokens = special_tokens(cfg, tok);
    }
    free(text);
    json_decref(cfg);
    return st;
}

void fg_prompt_chat_close(fg_prompt_chat **pc) {
    if (!*pc) return;
    fg_tmpl_destroy(&(*pc)->t);
    json_decref((*pc)->tokens);
    free(*pc);
    *pc = NULL;
}

fg_status fg_prompt_chat_render(const fg_prompt_chat *pc, const char *messages, char **text, size_t *len) {
    json_t *msgs = json_loads(messages, 0, NULL);
    if (!msgs) return fg_err_set(FG_ERUNTIME, "internal error: the messages kept are not JSON");
    json_t *vars = json_deep_copy(pc->tokens);
    json_object_set_new(vars, "messages", msgs);
    json_object_set_new(vars, "add_generation_prompt", json_true());
    fg_status st = fg_tmpl_render(pc->t, vars, text, len);
    json_decref(vars);
    return st;
}
