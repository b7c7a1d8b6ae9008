/* starzero_train.h — the training loop as a library (part of libstarzero; CMake target
 * StarZeRO::starzero, pkg-config starzero): what sz-train does around the steps, for any app built
 * on starzero.h.
 *   - the training state on disk: a directory DIR/step-NNNNNNNN/ per save, sharded (each rank writes
 *     its own files), a checksummed manifest written last, an atomic rename, DIR/latest, --keep, a run
 *     id, an owner and a lock per directory, and re-sharding on resume (another N_d or ZeRO stage);
 *     the format sz-train writes and sz-state reads;
 *   - stopping on a signal: finish the step on every rank, save, exit 0;
 *   - a barrier;
 *   - the DeepSpeed-style JSON config, turned into sz-train's options;
 *   - learning-rate schedules (warmup, constant or cosine).
 * The manifest is a cJSON object (cJSON is one of the library's dependencies; <cjson/cJSON.h>).
 * Errors: every function returning sz_status returns SZ_OK, or an error code with a message in the
 * caller's err buffer naming the file, field or setting (truncated to errlen); collectives fail on
 * every rank alike. Typical use (apps/examples/custom_model.c is a complete one):
 *
 *   cJSON *man = NULL; char stepdir[4096], err[1024];
 *   if (resume && (sz_state_find(resume, stepdir, sizeof stepdir, err, sizeof err) ||
 *                  sz_state_manifest(stepdir, &man, NULL, 0, err, sizeof err))) fail(err);
 *   ... sz_context_init, build and finalize the model ...
 *   sz_state_dir *sd;
 *   if (sz_state_dir_open(&sd, ctx, "ckpt", man ? stepdir : NULL, man, 0, stderr, err, sizeof err)) fail(err);
 *   if (man) sz_state_load(model, ctx, stepdir, man, err, sizeof err), first = sz_json_num(man, "step", 0) + 1;
 *   sz_stop_catch("myapp");
 *   for (step = first; step <= steps; step++) {
 *       sz_model_train_step(...);
 *       int sig = sz_stop_agree(ctx);
 *       if (step % every == 0 || step == steps || sig) sz_state_save(sd, model, ctx, step, NULL, 3, where, ...);
 *       if (sig) break;   // then exit 0
 *   }
 *   sz_state_dir_close(sd); cJSON_Delete(man); */
#ifndef STARZERO_TRAIN_H
#define STARZERO_TRAIN_H

#include <stddef.h>
#include <stdio.h>
#include <cjson/cJSON.h>
#include "starzero.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the training-state directory ------------------------------------------------------------
 * A state is a directory DIR/step-NNNNNNNN/ holding, for every persistent state the model keeps
 * (params, master, and the optimizer's: adam_m, adam_v or SGD's momentum; sz_model_state_name), one
 * file per rank, <kind>-rRRRRR.bin: that rank's owned slice of every unit, unit after unit, fp32.
 * Every rank writes its own files in parallel; rank 0 writes manifest.json last: format and
 * version, step, N_d, the units' sizes and tensors, each file's size and crc32, the run, its lineage
 * and the save's order, what the app adds (architecture and shape, ZeRO configuration, data
 * position, seeds...), and last the crc32 of all that (manifest_crc32). The directory is written
 * under a temporary name (.tmp-step-NNNNNNNN), fsync'ed and renamed, so it appears only when
 * complete; DIR/latest then names it (written the same way). Loading re-shards: each rank reads the
 * pieces of the saved shards that overlap what it holds, whatever N_d and stage saved them.
 *
 * A directory belongs to one run. A run has a random id (kept across resumes) and a lineage: the
 * chain of saves it continues (a fresh run, or a resume from an older save than its lineage's
 * newest, starts a new one). DIR/owner.json records the run that owns the directory; DIR/.lock is
 * flock'ed by the writing run's rank 0 for its whole life (it names that process's pid and host), so
 * a second writer is refused at start. `keep` counts the saves of the writing lineage only, in save
 * order. The rules in full: docs/reference.md, "The training-state directory". The messages name
 * a setting by sz-train's option for it (--overwrite-state for `overwrite`, --keep, --resume,
 * --precision, --optimizer), which an app maps onto its own. */
#define SZ_STATE_FORMAT "starzero-training-state"
#define SZ_STATE_VERSION 2 /* 2: run id, lineage, save order, the manifest's own crc32; version 1 still loads */

/* A state directory opened for writing by one run (sz_state_dir_open). */
typedef struct sz_state_dir sz_state_dir;

/* Collective. Opens `dir` (created if missing) for this run's saves: rank 0 takes the directory's
 * lock (refused, naming the holder's pid and host, while another run holds it), removes leftovers of
 * interrupted saves (.tmp-step-*: their writer is gone, since the lock was free), and checks that the
 * directory holds no other run's states: a fresh run (resumed_manifest NULL) owns only an empty
 * directory, a resumed one the directory holding its own run's states. overwrite: another run's
 * states are accepted and removed after this run's first save. resumed_stepdir/resumed_manifest: the
 * state this run resumed from (from sz_state_find / sz_state_manifest; its run id carries over, its
 * lineage too unless a newer save of that lineage exists in dir: then a new one starts); both NULL
 * for a fresh run. notes (may be NULL; rank 0) gets lines saying what was decided.
 * Returns SZ_OK and *out (free with sz_state_dir_close), or SZ_ERR_IO on every rank with err set
 * (the failing rank's reason there; "another rank failed" on the others) and *out NULL. */
sz_status sz_state_dir_open(sz_state_dir **out, sz_context *ctx, const char *dir, const char *resumed_stepdir,
                            const cJSON *resumed_manifest, int overwrite, FILE *notes, char *err, size_t errlen);
/* Releases the lock (the kernel does so too when the process ends) and frees d. NULL is fine. */
void sz_state_dir_close(sz_state_dir *d);
/* Tests: each save pauses `ms` on rank 0 after the shards are written, before the manifest (it says
 * so on stdout, with its pid), so a test can kill a run in the middle of a save. 0: none (default). */
void sz_state_dir_set_save_delay(sz_state_dir *d, int ms);

/* Collective. Saves the model after `step` into d's dir/step-NNNNNNNN (a save of the same step
 * replaces it). `app` (a cJSON object, or NULL) is merged into the manifest: put there what your app
 * needs to resume (its data position, seeds, shape); sz_state_save takes it over and deletes it, on
 * success and failure alike. keep > 0: only the newest `keep` saves of this run's lineage stay (by
 * save order; the one just written always stays; other lineages' and other runs' states are neither
 * counted nor touched); 0 keeps all. SZ_OK and `where` (wlen bytes) set to the step directory, or
 * SZ_ERR_IO and err on every rank; a save that fails or is killed leaves the previous complete saves
 * intact. */
sz_status sz_state_save(sz_state_dir *d, sz_model *m, sz_context *ctx, int step, cJSON *app, int keep,
                        char *where, size_t wlen, char *err, size_t errlen);

/* Not collective (no context needed). The step directory to resume from, into stepdir (len bytes):
 * the one DIR/latest names (refused when it names no complete step), else the newest save holding a
 * manifest (by save order; by step number for version 1 states); dir itself when it holds
 * manifest.json. A temporary directory of an unfinished save (.tmp-step-*) is refused. SZ_ERR_IO and
 * err when there is none. */
sz_status sz_state_find(const char *dir, char *stepdir, size_t len, char *err, size_t errlen);
/* Not collective. Reads and parses stepdir/manifest.json into *out (a cJSON object the caller frees
 * with cJSON_Delete) and checks, before any shard is read: format and version, its own crc32 (version
 * 1 manifests have none: accepted, and `note` says so; note may be NULL), and its layout: N_d, the
 * step (and that it is the one its directory's name says), every unit's numel/padded/shard, every
 * tensor's offset and size, every rank's file of every kind with its name and size. SZ_ERR_IO when
 * the manifest cannot be read, SZ_ERR_FORMAT for anything else, err naming the field. The app's
 * fields (what it passed to sz_state_save) are read from *out with cJSON or sz_json_num/_str. */
sz_status sz_state_manifest(const char *stepdir, cJSON **out, char *note, size_t notelen, char *err, size_t errlen);
/* Collective. Loads every state the model holds on this rank from the step directory (m finalized;
 * manifest from sz_state_manifest), verifying the size and crc32 of each file read and that every
 * value is finite; refuses (SZ_ERR_FORMAT, err naming the unit, tensor, state or element), before
 * reading any shard, a manifest whose units or tensors differ from the model's, that lacks a state
 * the model keeps, that was saved by another optimizer (the manifest's optimizer.name, which the app
 * records; absent: AdamW) or holds optimizer state the model would drop (SGD saved with momentum,
 * loaded without). Any N_d and ZeRO stage load any other. The step counter is the app's: the
 * manifest's "step". */
sz_status sz_state_load(sz_model *m, sz_context *ctx, const char *stepdir, const cJSON *manifest, char *err,
                        size_t errlen);

/* Not collective. Checks every file the manifest lists (size, crc32, every value finite), a line per
 * file on out (may be NULL). SZ_ERR_FORMAT and err at the first bad file. */
sz_status sz_state_verify(const char *stepdir, const cJSON *manifest, FILE *out, char *err, size_t errlen);
/* Not collective. Every unit's saved `kind` ("params", "master", ...) in full, assembled from the
 * shards (each file read once, its checksum verified): out[u], allocated by the caller, holds the
 * unit's padded element count of floats (the manifest's units[u].padded). SZ_ERR_FORMAT and err. */
sz_status sz_state_read_units(const char *stepdir, const cJSON *manifest, const char *kind, float **out, char *err,
                              size_t errlen);
/* Recomputes the manifest's own crc32 after a deliberate edit (sz-state --reseal): the file is
 * rewritten atomically with manifest_crc32 matching its contents. SZ_ERR_IO and err. */
sz_status sz_state_reseal(const char *stepdir, char *err, size_t errlen);

/* A member of a JSON object (a manifest): its number, or dflt when absent or not a number; its
 * string (owned by obj), or dflt. obj may be NULL. */
double sz_json_num(const cJSON *obj, const char *key, double dflt);
const char *sz_json_str(const cJSON *obj, const char *key, const char *dflt);

/* ---- stopping on a signal ---------------------------------------------------------------------
 * sz_stop_catch installs handlers for SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 (call it after
 * sz_context_init: they replace StarPU's). The first signal only records itself; the loop calls
 * sz_stop_agree once per step, on every rank, after the step: when any rank got a signal, every
 * rank learns it there, saves (sz_state_save) and ends normally (exit 0). A second signal to a
 * process ends it at once with status 128 + the signal, after writing "<prog>: a second signal:
 * exiting at once, without saving" on stderr. Signals are per process, so this state is too (the
 * one process-wide exception to "state lives in the context").
 * Under Open MPI's mpirun (4.1): SIGUSR1 (or SIGUSR2) sent to mpirun is forwarded to every rank, so
 * the run stops cleanly. SIGTERM or SIGINT sent to mpirun make it tear the job down itself (the ranks
 * get SIGTERM, then SIGKILL about 1 s later; mpirun exits 1): a save happens only if the step and the
 * save end before the kill, so do not rely on it. A batch system that signals every process of the
 * job (SLURM's scancel) or a signal to one rank works like SIGUSR1 to mpirun. */
/* prog (copied; NULL: "starzero") starts the second signal's message. SZ_ERR_RUNTIME if a handler
 * could not be installed. */
sz_status sz_stop_catch(const char *prog);
/* The signal this process got since sz_stop_catch (0: none). Not collective. */
int sz_stop_signal(void);
/* Collective (every rank, at the same point of every step): the signal any rank got (this rank's if
 * it got one, else another rank's), or 0 when none did or the ranks could not agree (MPI failed:
 * the next collective reports it). */
int sz_stop_agree(sz_context *ctx);

/* ---- a barrier ---------------------------------------------------------------------------------- */
/* Collective: returns when every rank has called it; under the context's deadline (timeout_s) like
 * every collective, so a rank that never comes ends the job with a message instead of a hang.
 * SZ_ERR_INVALID for a NULL context, SZ_ERR_RUNTIME when MPI failed. */
sz_status sz_context_barrier(sz_context *ctx);

/* ---- the DeepSpeed config ------------------------------------------------------------------------
 * The subset of a DeepSpeed JSON config that maps onto sz-train's options, turned into those options:
 * train_batch_size (--global-batch, a check), train_micro_batch_size_per_gpu (--batch),
 * gradient_accumulation_steps (--micro-batches), gradient_clipping (--grad-clip), optimizer
 * Adam/AdamW (--optimizer adamw) and its params (--lr, --beta1, --beta2, --eps, --wd) or SGD
 * (--optimizer sgd; lr, momentum, weight_decay: --lr, --momentum, --wd), scheduler WarmupLR and
 * WarmupCosineLR (--warmup, --lr-schedule, --min-lr, --steps), bf16.enabled (--precision bf16),
 * fp16 (--precision fp16 and the loss-scaling options), zero_optimization.stage (--zero-stage), its
 * reduce_bucket_size, stage3_prefetch_bucket_size and stage3_max_live_parameters (DeepSpeed counts
 * elements; converted to --bucket-bytes, --prefetch-bytes, --max-live-bytes by the element size: 2
 * bytes under bf16/fp16, 4 under fp32), offload_optimizer.device cpu (--offload-optimizer), and
 * activation_checkpointing (--checkpoint; cpu_checkpointing: --offload-checkpoints). Every key is
 * reported on `log`: the option and value it became, or why it is ignored. The key table:
 * docs/reference.md, "A DeepSpeed config file". */
/* Reads `path` and sets *args to the options it means, in command-line form ("--zero-stage", "3",
 * ...: *nargs strings; the array and strings are the caller's, freed with sz_ds_args_free).
 * argc/argv are the real command line (may be 0/NULL): an option it also gives is reported as
 * overridden, since the caller puts the file's options first and lets the command line win. log may
 * be NULL (say nothing: e.g. every rank but 0). SZ_ERR_IO (cannot read), SZ_ERR_FORMAT (not one JSON
 * object), SZ_ERR_INVALID (a key with a value of the wrong type, a setting StarZeRO refuses), each
 * with err; *args NULL then. */
sz_status sz_ds_config_read(const char *path, int argc, char **argv, char ***args, int *nargs, FILE *log,
                            char *err, size_t errlen);
/* Frees the options sz_ds_config_read gave (args NULL is fine). */
void sz_ds_args_free(char **args, int nargs);

/* ---- learning-rate schedules ---------------------------------------------------------------------
 * The learning rate of each step, as llm.c's trainer sets it: a linear warmup over the first
 * `warmup` steps (step i of 0.. gets lr * (i + 1) / warmup), then either constant or a cosine decay
 * from lr to min_lr at the last step:
 *   lr_i = min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * (i - warmup) / (steps - warmup))). */
typedef enum sz_lr_kind { SZ_LR_CONSTANT = 0, SZ_LR_COSINE } sz_lr_kind;

typedef struct sz_lr_schedule {
    sz_lr_kind kind;
    double lr, min_lr;
    int warmup, steps;   /* warmup steps; the run's total steps (the cosine ends at the last one) */
} sz_lr_schedule;

/* The rate for step `step` (1-based, as sz-train and sz_model_train_step count). */
double sz_lr_at(const sz_lr_schedule *s, int step);
/* "constant" / "cosine" -> its sz_lr_kind; -1 for anything else (NULL included). */
int sz_lr_kind_parse(const char *name);

#ifdef __cplusplus
}
#endif
#endif
