/* fuzz_util.h - what the libFuzzer targets share: a private scratch
 * directory for parsers that read files by path, writing one input there,
 * and splitting one input into several files.
 *
 * The parsers under test open paths (mmap, fopen, jansson's
 * json_load_file), so each iteration writes its input into the scratch
 * directory and calls the real entry point on it; nothing here parses. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Every target defines these (libFuzzer's entry points). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process's scratch directory (created on first use under $TMPDIR or
 * /tmp, removed at a normal exit; a crash leaves it behind). Also quiets
 * the project's logging to errors only. */
const char *fz_dir(void);

/* Write DATA to fz_dir()/NAME (replacing it); returns the path in a static
 * buffer per call slot (slot 0..7), so a target can hold several. Aborts on
 * an I/O failure: that is the harness failing, not the parser. */
const char *fz_write(int slot, const char *name, const void *data, size_t n);

/* Remove fz_dir()/NAME if present. */
void fz_remove(const char *name);

/* Split DATA at each occurrence of SEP (not included) into at most MAX
 * parts; the last part takes the rest. Returns the number of parts (>= 1). */
typedef struct { const uint8_t *p; size_t n; } fz_part;
int fz_split(const uint8_t *data, size_t size, const char *sep, fz_part *parts, int max);

#endif
