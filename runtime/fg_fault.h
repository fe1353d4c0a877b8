/* fg_fault.h - fault injection for tests, read from the environment:
 *
 *   FLEXGEN_FAULT=WHO:KIND:N[:ONCE_FILE]
 *
 * WHO is a worker (gpu, cpu, disk), which counts the commands it receives,
 * or coord, the coordinator's supervisor, which counts the commands it
 * sends. At the Nth (from 1):
 *   crash     the worker aborts (SIGABRT) on receiving it
 *   stop      the worker stops itself (SIGSTOP): alive and silent, a hang
 *   hang      the executor that runs it never returns from it (a handler
 *             stuck in a loop, a wedged device call) while the I/O thread
 *             keeps heartbeating: only the command deadline can tell
 *   garble    the message that answers it (worker) or carries it (coord)
 *             goes out with a wrong body length: it no longer decodes
 *   truncate  that message goes out a few bytes short (TRUNCATE_BYTES)
 * With ONCE_FILE the fault fires only if that file can still be created
 * (O_EXCL): a restarted worker reads the same environment and must not
 * fault again. Spawned workers inherit the variable from the coordinator.
 *
 * Nothing else reads FLEXGEN_FAULT; unset, these calls cost a compare. */
#ifndef FG_FAULT_H
#define FG_FAULT_H

#include <stdint.h>

#include "fg_msg.h"

typedef enum {
    FG_FAULT_NONE,
    FG_FAULT_CRASH,
    FG_FAULT_STOP,
    FG_FAULT_GARBLE,
    FG_FAULT_TRUNCATE,
    FG_FAULT_HANG,
    FG_FAULT_NKINDS
} fg_fault_kind;

/* The fault `who` ("gpu", "cpu", "disk", "coord") meets at its nth
 * command, or FG_FAULT_NONE. Says so in the log when one fires. */
fg_fault_kind fg_fault_at(const char *who, uint64_t n);

/* fg_msg_send, with the message damaged as kind (GARBLE or TRUNCATE) says. */
int fg_fault_send(void *sock, const char *identity, const fg_msg *m, fg_fault_kind kind);

/* HANG: never returns (the thread waits for a signal that never comes). */
void fg_fault_hang(void) __attribute__((noreturn));

#endif
