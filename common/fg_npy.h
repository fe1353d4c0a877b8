/* fg_npy.h - writing float32 .npy files incrementally (for --dump-logits,
 * which can be far larger than RAM would like): the header goes first with
 * the final shape, rows are written at their offsets as they are produced, and
 * the file appears under its name only when fg_npy_commit() renames it. */
#ifndef FG_NPY_H
#define FG_NPY_H

#include "fg_common.h"

typedef struct fg_npy_writer fg_npy_writer;

fg_status fg_npy_create(const char *path, const int64_t *shape, int ndim, fg_npy_writer **out);
/* Write n floats starting at flat element index `elem`. */
fg_status fg_npy_write(fg_npy_writer *w, int64_t elem, const float *data, size_t n);
/* fsync-free rename of the temporary file to its final name, then destroy. */
fg_status fg_npy_commit(fg_npy_writer **w);
/* Remove the temporary file (on failure) and destroy. */
void fg_npy_abort(fg_npy_writer **w);

#endif
