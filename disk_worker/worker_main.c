/* worker_main.c - flexgen-disk-worker: owns the offload directory and moves
 * bytes between its files and shm buffers (disk_io.h). This file only says
 * what the worker can do; the loop is runtime/fg_worker_loop.c. Several
 * executor threads keep several transfers in flight, each with its own
 * libaio engine (disk_aio.c). */
#include "disk_io.h"

int main(int argc, char **argv) {
    static fg_worker_def def = {
        .role = FG_ROLE_DISK,
        .program = "flexgen-disk-worker",
        .summary = "FlexGen's disk worker: reads and writes the offload directory's files "
                   "into and out of shared memory (libaio, O_DIRECT).",
        .info = "libaio O_DIRECT",
        .caps = FG_CAP_DISK,
        .threads = FG_DISK_THREADS,
        .init = fg_disk_init,
        .fini = fg_disk_fini,
        .option = fg_disk_option,
        .options_help = FG_DISK_OPTIONS_HELP,
        .profile = fg_disk_profile_main,
    };
    def.handlers[FG_MSG_DISK_READ] = fg_disk_read;
    def.handlers[FG_MSG_DISK_WRITE] = fg_disk_write;
    return fg_worker_main(&def, argc, argv);
}
