/* fuzz_tiny.h - the tiny OPT model the checkpoint targets load: its
 * config.json, and valid tensors written from the config's own tensor list,
 * so a target starts from a directory that opens and the fuzzer changes one
 * file of it. Same sizes as the seeds (tests/ref/make_checkpoint.py
 * --layers 1 --hidden 4 --heads 1 --ffn 4 --vocab 8 --max-pos 4). */
#ifndef FUZZ_TINY_H
#define FUZZ_TINY_H

#include <stddef.h>
#include <stdint.h>

#include "fg_config.h"

extern const char fz_tiny_config_json[];

/* The tiny config and its tensor list (fg_specs_new), made once. */
const fg_model_config *fz_tiny_config(void);
const fg_spec *fz_tiny_specs(void);

/* A valid fp16 .npy file of spec IDX; malloc'd, *n its size. */
uint8_t *fz_tiny_npy(int idx, size_t *n);

/* A valid safetensors file of every present tensor (F16); malloc'd. */
uint8_t *fz_tiny_safetensors(size_t *n);

#endif
