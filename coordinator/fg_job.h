/* fg_job.h - a resumable job's directory: the record of what the job is
 * (job.json: whatever its caller says identifies the run) and the journal of
 * its outputs (journal.jsonl: the output lines of every finished block, in
 * prompt order). A block is appended whole and fsynced before the next one
 * starts; a kill leaves at worst a torn tail, which resuming cuts off, so the
 * journal only ever holds whole blocks. The output file appears once, at the
 * end, written from the journal atomically (FILE.partial, fsync, rename),
 * and the job's files are then removed.
 *
 * What goes into the record, what may differ on resume and how lines are
 * formatted is the caller's (cmd_run_job.c, cmd_run.c); this file knows
 * lines, blocks and files only.
 *
 *   DIR/job.json        the record, written atomically before any block runs
 *   DIR/journal.jsonl   finished blocks' lines, appended with write + fdatasync
 * The running job holds an flock on DIR: one run per job. */
#ifndef FG_JOB_H
#define FG_JOB_H

#include <jansson.h>

#include "fg_common.h"

typedef struct fg_job fg_job;

/* The record of the job in dir, for --resume: FG_EINPUT naming the
 * directory when it holds no job (none started there, or it finished and
 * its directory was removed). */
fg_status fg_job_read_record(const char *dir, json_t **rec);

/* The keys on which two records differ (`ignore`: NULL-terminated keys not
 * compared), written to buf as "key: the job has X, this run Y; ...".
 * Returns how many differ. */
int fg_job_diff(const json_t *job, const json_t *run, const char *const *ignore, char *buf, size_t len);

/* A fresh job of n prompts in blocks of `block`: the directory is made, the
 * record written, the journal emptied. Refused (FG_EINPUT) when dir holds a
 * job with finished blocks, so a forgotten --resume loses no work. */
fg_status fg_job_start(const char *dir, const json_t *rec, int n, int block, fg_job **out);

/* Reopen a job's journal: *done = the prompts of its finished blocks (a
 * multiple of block, or n), a torn tail cut off. */
fg_status fg_job_resume(const char *dir, int n, int block, fg_job **out, int *done);

/* Append the `count` lines of prompts first..first+count-1 (`len` bytes,
 * each line ending in '\n') and fsync them. first must be where the journal
 * ends. */
fg_status fg_job_append(fg_job *j, int first, int count, const char *lines, size_t len);

/* All n prompts journaled: write `out` from the journal atomically, then
 * remove the job's files and its directory (when empty). */
fg_status fg_job_finish(fg_job **j, const char *out);

/* The output made from the journal: *out (heap, *out_len bytes) from the
 * journal's `len` bytes (a Batch API file's lines back in file order). */
typedef fg_status (*fg_job_out_fn)(void *ctx, const char *journal, size_t len, char **out, size_t *out_len);
/* fg_job_finish with the output made by fn from the journal. */
fg_status fg_job_finish_as(fg_job **j, const char *out, fg_job_out_fn fn, void *ctx);

/* A failed run: the job stays, to resume, when it holds a finished block;
 * one with none is removed (a rerun starts from nothing either way). */
void fg_job_close(fg_job **j);

void fg_job_destroy(fg_job **j);

#endif
