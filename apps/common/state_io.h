/* apps/common/state_io.h — resumable training state on disk, for any model built on the public
 * API. A state is a directory DIR/step-NNNNNNNN/ holding, for every persistent state the model
 * keeps (params, master, and the optimizer's: adam_m, adam_v or SGD's momentum; sz_model_state_name),
 * one file per rank, <kind>-rRRRRR.bin:
 * that rank's owned slice of every unit, unit after unit, fp32. Every rank writes its own files
 * in parallel; rank 0 writes manifest.json last (cJSON): format and version, step, N_d, the
 * units' sizes and tensors, each file's size and crc32, and what the app adds (architecture and
 * shape, ZeRO configuration, precision, optimizer, data position, seeds). The directory is
 * written under a temporary name, fsync'ed and renamed, so it appears only when complete;
 * DIR/latest then names it (written the same way). Loading re-shards: each rank reads the pieces
 * of the saved shards that overlap what it holds, whatever N_d and stage saved them. */
#ifndef SZ_APP_STATE_IO_H
#define SZ_APP_STATE_IO_H

#include <stdio.h>
#include <cjson/cJSON.h>
#include "starzero.h"

#define SZ_STATE_FORMAT "starzero-training-state"
#define SZ_STATE_VERSION 1

/* Collective. Saves the model after `step` into dir/step-NNNNNNNN; `app` (an object, taken over,
 * may be NULL) is merged into the manifest. keep > 0: only the newest `keep` steps stay.
 * delay_ms > 0 (tests): rank 0 waits that long after the shards are written, before the
 * manifest. 0 and `where` set to the step directory, or -1 and err (on every rank). */
int sz_state_save(sz_model *m, sz_context *ctx, const char *dir, int step, cJSON *app, int keep, int delay_ms,
                  char *where, size_t wlen, char *err, size_t errlen);

/* The newest complete step directory of dir: the one DIR/latest names, else the highest
 * step-* holding a manifest; dir itself when it holds manifest.json. */
int sz_state_find(const char *dir, char *stepdir, size_t len, char *err, size_t errlen);
/* Reads and parses stepdir/manifest.json (checks format and version). */
int sz_state_manifest(const char *stepdir, cJSON **out, char *err, size_t errlen);

/* Collective. Loads every state the model holds on this rank from the step directory,
 * verifying the size and crc32 of each file read; refuses a manifest whose units differ from
 * the model's (naming the unit), that lacks a state the model keeps, that was saved by another
 * optimizer (the manifest's optimizer.name; absent: AdamW) or holds optimizer state the model
 * would drop (SGD saved with momentum, loaded without). */
int sz_state_load(sz_model *m, sz_context *ctx, const char *stepdir, const cJSON *manifest, char *err,
                  size_t errlen);

/* Checks every file the manifest lists (size and crc32), a line per file on out (may be NULL). */
int sz_state_verify(const char *stepdir, const cJSON *manifest, FILE *out, char *err, size_t errlen);
/* Every unit's saved `kind` ("params", ...) in full, assembled from the shards (each file read
 * once, its checksum verified): out[u] holds the unit's padded element count of floats. */
int sz_state_read_units(const char *stepdir, const cJSON *manifest, const char *kind, float **out, char *err,
                        size_t errlen);

/* Number helpers for manifests: a member's value, or dflt when absent or not a number. */
double sz_json_num(const cJSON *obj, const char *key, double dflt);
const char *sz_json_str(const cJSON *obj, const char *key, const char *dflt);

#endif
