/* apps/common/state_io.h — resumable training state on disk, for any model built on the public
 * API. A state is a directory DIR/step-NNNNNNNN/ holding, for every persistent state the model
 * keeps (params, master, and the optimizer's: adam_m, adam_v or SGD's momentum; sz_model_state_name),
 * one file per rank, <kind>-rRRRRR.bin:
 * that rank's owned slice of every unit, unit after unit, fp32. Every rank writes its own files
 * in parallel; rank 0 writes manifest.json last (cJSON): format and version, step, N_d, the
 * units' sizes and tensors, each file's size and crc32, the run, its lineage and the save's order,
 * what the app adds (architecture and shape, ZeRO configuration, precision, optimizer, data
 * position, seeds), and last the crc32 of all that (manifest_crc32). The directory is written
 * under a temporary name, fsync'ed and renamed, so it appears only when complete; DIR/latest then
 * names it (written the same way). Loading re-shards: each rank reads the pieces of the saved
 * shards that overlap what it holds, whatever N_d and stage saved them.
 *
 * A directory belongs to one run. A run has a random id (kept across resumes) and a lineage: the
 * chain of saves it continues (a fresh run, or a resume from an older save than its lineage's
 * newest, starts a new one). DIR/owner.json records the run that owns the directory; DIR/.lock is
 * flock'ed by the writing run's rank 0 for its whole life (it names that process's pid and host),
 * so a second writer is refused at start. --keep counts the saves of the writing lineage only, in
 * save order. */
#ifndef SZ_APP_STATE_IO_H
#define SZ_APP_STATE_IO_H

#include <stdio.h>
#include <cjson/cJSON.h>
#include "starzero.h"

#define SZ_STATE_FORMAT "starzero-training-state"
#define SZ_STATE_VERSION 2 /* 2: run id, lineage, save order, the manifest's own crc32; version 1 still loads */

/* A state directory opened for writing by one run (sz_state_dir_open). */
typedef struct sz_state_dir sz_state_dir;

/* Collective. Opens `dir` for this run's saves: rank 0 takes the directory's lock (refused, naming
 * the holder's pid and host, while another run holds it), removes leftovers of interrupted saves
 * (.tmp-step-*: their writer is gone, since the lock was free), and checks that the directory holds
 * no other run's states: a fresh run (resumed_manifest NULL) owns only an empty directory, a
 * resumed one the directory holding its own run's states. overwrite: another run's states are
 * accepted and removed after this run's first save. resumed_stepdir/resumed_manifest: the state
 * this run resumed from (its run id carries over; its lineage too, unless a newer save of that
 * lineage exists in dir: then a new one starts). notes (may be NULL; rank 0) gets lines saying
 * what was decided. 0, or -1 and err on every rank. */
int sz_state_dir_open(sz_state_dir **out, sz_context *ctx, const char *dir, const char *resumed_stepdir,
                      const cJSON *resumed_manifest, int overwrite, FILE *notes, char *err, size_t errlen);
/* Releases the lock (the kernel does so too when the process ends). NULL is fine. */
void sz_state_dir_close(sz_state_dir *d);

/* Collective. Saves the model after `step` into d's dir/step-NNNNNNNN; `app` (an object, taken
 * over, may be NULL) is merged into the manifest. keep > 0: only the newest `keep` saves of this
 * run's lineage stay (by save order; the one just written always stays; other lineages' and
 * other runs' states are not counted or touched). delay_ms > 0 (tests): rank 0 waits that long
 * after the shards are written, before the manifest. 0 and `where` set to the step directory, or
 * -1 and err (on every rank). */
int sz_state_save(sz_state_dir *d, sz_model *m, sz_context *ctx, int step, cJSON *app, int keep, int delay_ms,
                  char *where, size_t wlen, char *err, size_t errlen);

/* The newest complete step directory of dir: the one DIR/latest names (refused when it names no
 * complete step), else the newest save holding a manifest (by save order; by step number for
 * version 1 states); dir itself when it holds manifest.json. A temporary directory of an
 * unfinished save (.tmp-step-*) is refused. */
int sz_state_find(const char *dir, char *stepdir, size_t len, char *err, size_t errlen);
/* Reads and parses stepdir/manifest.json and checks, before any shard is read: format and version,
 * its own crc32 (version 2; version 1 manifests have none: accepted, `note` says so — note may be
 * NULL), and its layout: N_d, the step (and that it is the one its directory's name says), every
 * unit's numel/padded/shard (padded as the padding rule gives it, shard = padded / N_d), every
 * tensor's offset and size (contiguous, inside the unit), every rank's file of every kind with its
 * name and the size the units give. Each refusal names the field. */
int sz_state_manifest(const char *stepdir, cJSON **out, char *note, size_t notelen, char *err, size_t errlen);
/* Recomputes the manifest's own crc32 after a deliberate edit (sz-state --reseal): the file is
 * rewritten atomically with manifest_crc32 matching its contents. */
int sz_state_reseal(const char *stepdir, char *err, size_t errlen);

/* Collective. Loads every state the model holds on this rank from the step directory (a manifest
 * from sz_state_manifest), verifying the size and crc32 of each file read and that every value is
 * finite (a NaN or infinity is refused naming the state, the tensor and the element); refuses,
 * before reading any shard, a manifest whose units or tensors differ from the model's (naming the
 * unit or tensor and the field), that lacks a state the model keeps, that was saved by another
 * optimizer (the manifest's optimizer.name; absent: AdamW) or holds optimizer state the model
 * would drop (SGD saved with momentum, loaded without). */
int sz_state_load(sz_model *m, sz_context *ctx, const char *stepdir, const cJSON *manifest, char *err,
                  size_t errlen);

/* Checks every file the manifest lists (size, crc32, every value finite), a line per file on out
 * (may be NULL); a non-finite value is named by state, tensor and element. */
int sz_state_verify(const char *stepdir, const cJSON *manifest, FILE *out, char *err, size_t errlen);
/* Every unit's saved `kind` ("params", ...) in full, assembled from the shards (each file read
 * once, its checksum verified): out[u] holds the unit's padded element count of floats. */
int sz_state_read_units(const char *stepdir, const cJSON *manifest, const char *kind, float **out, char *err,
                        size_t errlen);

/* Number helpers for manifests: a member's value, or dflt when absent or not a number. */
double sz_json_num(const cJSON *obj, const char *key, double dflt);
const char *sz_json_str(const cJSON *obj, const char *key, const char *dflt);

#endif
