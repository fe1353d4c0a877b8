/* disk_io.h - the disk worker's two handlers, DISK_READ and DISK_WRITE, and
 * how a command names its file. One implementation at a time lives behind
 * these declarations (disk_pio.c: pread/pwrite; later libaio + O_DIRECT). */
#ifndef FG_DISK_IO_H
#define FG_DISK_IO_H

#include "fg_worker.h"

/* The file a DISK_* command means: its path if set (relative paths are
 * under the offload directory), else "<offload-dir>/file-<file_id>". */
fg_status fg_disk_path(const fg_worker *w, const fg_msg_disk *d, char *out, size_t cap);

fg_status fg_disk_read(fg_worker *w, const fg_msg *cmd);   /* file -> shm */
fg_status fg_disk_write(fg_worker *w, const fg_msg *cmd);  /* shm -> file, created 0600 */

#endif
