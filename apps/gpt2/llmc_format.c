/* apps/gpt2/llmc_format.c — readers and writers for llm.c's GPT-2 checkpoint (fp32, version 3) and token
 * (uint16, version 1) files. Reads validate the header and the exact file size before
 * allocating, load into a temporary and hand it over only on success; writes go to `path`.tmp
 * under a header marked unfinished, the body is fsync'ed, the real header written last (the
 * file's completion marker: a writer killed before it leaves a file every reader refuses), then
 * renamed over `path`. Only a regular file (or nothing) at `path` is ever replaced.
 */
#define _POSIX_C_SOURCE 200809L

#include "starzero_gpt2.h"
#include "gpt2_err.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The formats are little-endian int32 / fp32 / uint16, read and written natively. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "llmc_format.c reads llm.c files natively and needs a little-endian host"
#endif

/* Reads and writes are done in pieces of at most this many bytes (fread of > 2 GiB at once is
 * not portable). */
#define IO_CHUNK ((size_t)1 << 28)


static uint32_t bswap32(uint32_t x)
{
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

/* ---- reading ------------------------------------------------------------------------------ */

/* Opens `path` for reading and returns its size; only regular files are accepted. */
static sz_status open_for_read(const char *path, FILE **fp_out, uint64_t *size_out, char *err,
                               size_t errlen)
{
    if (!path) {
        gpt2_set_err(err, errlen, "no file name given");
        return SZ_ERR_INVALID;
    }
    struct stat pre;
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode)) { /* a FIFO would block the open forever */
        gpt2_set_err(err, errlen, "%s: not a regular file", path);
        return SZ_ERR_IO;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        gpt2_set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return SZ_ERR_IO;
    }
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        gpt2_set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        fclose(fp);
        return SZ_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        gpt2_set_err(err, errlen, "%s: not a regular file", path);
        fclose(fp);
        return SZ_ERR_IO;
    }
    *fp_out = fp;
    *size_out = (uint64_t)st.st_size;
    return SZ_OK;
}

/* Reads exactly n bytes (the size was checked beforehand, so a short read is an I/O error). */
static sz_status read_exact(FILE *fp, void *buf, size_t n, const char *path, char *err, size_t errlen)
{
    unsigned char *p = buf;
    while (n > 0) {
        size_t want = n < IO_CHUNK ? n : IO_CHUNK;
        size_t got = fread(p, 1, want, fp);
        if (got != want) {
            if (ferror(fp))
                gpt2_set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
            else
                gpt2_set_err(err, errlen, "%s: read error: the file ended early (changed while reading?)",
                        path);
            return SZ_ERR_IO;
        }
        p += got;
        n -= got;
    }
    return SZ_OK;
}

/* Reads the first min(size, header) bytes into a zeroed header and checks magic and version as
 * far as the file has them, then that the whole header is there. `kind` names the format in
 * messages; `other_magic`/`other_kind` recognize the other llm.c format for a better hint. */
static sz_status read_header(FILE *fp, uint64_t size, int32_t hdr[SZ_LLMC_HEADER_INTS], int magic,
                             int version, const char *kind, int other_magic, const char *other_kind,
                             const char *path, char *err, size_t errlen)
{
    memset(hdr, 0, SZ_LLMC_HEADER_BYTES);
    size_t have = size < SZ_LLMC_HEADER_BYTES ? (size_t)size : SZ_LLMC_HEADER_BYTES;
    sz_status st = read_exact(fp, hdr, have, path, err, errlen);
    if (st != SZ_OK)
        return st;
    if (have >= 4 && (hdr[0] == SZ_LLMC_UNFINISHED_MODEL || hdr[0] == SZ_LLMC_UNFINISHED_TOKENS)) {
        gpt2_set_err(err, errlen, "%s: an unfinished file: its writer stopped before completing it (the header is "
                     "written last, after every value), so it is not an llm.c %s; a leftover temporary of an "
                     "interrupted save, remove it", path, kind);
        return SZ_ERR_FORMAT;
    }
    if (have >= 4 && hdr[0] != magic) {
        const char *hint = "";
        if (hdr[0] == other_magic)
            hint = other_kind;
        else if (bswap32((uint32_t)hdr[0]) == (uint32_t)magic)
            hint = " (the file is byte-swapped: written on a big-endian machine?)";
        gpt2_set_err(err, errlen, "%s: bad magic %" PRId32 " (expected %d): not an llm.c %s%s", path,
                hdr[0], magic, kind, hint);
        return SZ_ERR_FORMAT;
    }
    if (have >= 8 && hdr[1] != version) {
        if (magic == SZ_LLMC_MODEL_MAGIC && hdr[1] == 5)
            gpt2_set_err(err, errlen,
                    "%s: unsupported version 5 (a bf16 checkpoint): only version %d (fp32) "
                    "checkpoints can be read",
                    path, version);
        else
            gpt2_set_err(err, errlen, "%s: unsupported version %" PRId32 " (expected %d) of the llm.c %s",
                    path, hdr[1], version, kind);
        return SZ_ERR_FORMAT;
    }
    if (have < SZ_LLMC_HEADER_BYTES) {
        gpt2_set_err(err, errlen,
                "%s: truncated header: the file has %zu bytes but an llm.c %s header is %d bytes",
                path, have, kind, SZ_LLMC_HEADER_BYTES);
        return SZ_ERR_FORMAT;
    }
    return SZ_OK;
}

/* Checks that exactly `need` bytes follow the header. `what` describes the header's claim, e.g.
 * "124475904 parameters". */
static sz_status check_body_size(uint64_t size, uint64_t need, const char *what, const char *path,
                                 char *err, size_t errlen)
{
    uint64_t body = size - SZ_LLMC_HEADER_BYTES;
    if (body < need) {
        gpt2_set_err(err, errlen,
                "%s: truncated: header says %s (%" PRIu64 " bytes) but %" PRIu64
                " bytes follow the header",
                path, what, need, body);
        return SZ_ERR_FORMAT;
    }
    if (body > need) {
        gpt2_set_err(err, errlen,
                "%s: trailing bytes: header says %s (%" PRIu64 " bytes) but %" PRIu64
                " bytes follow the header (%" PRIu64 " extra)",
                path, what, need, body, body - need);
        return SZ_ERR_FORMAT;
    }
    return SZ_OK;
}

/* Opens a checkpoint and validates its header and size; on success the stream is positioned at
 * the first parameter. */
static sz_status open_checkpoint(const char *path, FILE **fp_out, sz_gpt2_config *cfg_out,
                                 size_t *nparams_out, char *err, size_t errlen)
{
    FILE *fp = NULL;
    uint64_t size = 0;
    sz_status st = open_for_read(path, &fp, &size, err, errlen);
    if (st != SZ_OK)
        return st;
    int32_t hdr[SZ_LLMC_HEADER_INTS];
    st = read_header(fp, size, hdr, SZ_LLMC_MODEL_MAGIC, SZ_LLMC_MODEL_VERSION_FP32,
                     "GPT-2 checkpoint", SZ_LLMC_TOKENS_MAGIC, " (this is an llm.c token file)",
                     path, err, errlen);
    if (st != SZ_OK) {
        fclose(fp);
        return st;
    }
    sz_gpt2_config cfg = {
        .max_seq = hdr[2], .vocab = hdr[3], .layers = hdr[4],
        .heads = hdr[5], .channels = hdr[6], .padded_vocab = hdr[7],
    };
    char why[256];
    if (sz_gpt2_config_validate(&cfg, why, sizeof why) != SZ_OK) {
        gpt2_set_err(err, errlen, "%s: bad header: %s", path, why);
        fclose(fp);
        return SZ_ERR_FORMAT;
    }
    size_t nparams = sz_gpt2_num_params(&cfg);
    char what[64];
    snprintf(what, sizeof what, "%zu parameters", nparams);
    st = check_body_size(size, (uint64_t)nparams * sizeof(float), what, path, err, errlen);
    if (st != SZ_OK) {
        fclose(fp);
        return st;
    }
    *fp_out = fp;
    *cfg_out = cfg;
    *nparams_out = nparams;
    return SZ_OK;
}

sz_status sz_llmc_checkpoint_read_header(const char *path, sz_gpt2_config *cfg_out, char *err,
                                         size_t errlen)
{
    if (!cfg_out) {
        gpt2_set_err(err, errlen, "%s: no output config given", path ? path : "(null)");
        return SZ_ERR_INVALID;
    }
    FILE *fp = NULL;
    sz_gpt2_config cfg;
    size_t n = 0;
    sz_status st = open_checkpoint(path, &fp, &cfg, &n, err, errlen);
    if (st != SZ_OK)
        return st;
    fclose(fp);
    *cfg_out = cfg;
    return SZ_OK;
}

/* A checkpoint holding NaN or infinity is refused, naming the tensor, its layer and the element:
 * training from it would only produce NaN losses. */
sz_status sz_llmc_check_finite(const char *path, const sz_gpt2_config *cfg, const float *params, char *err,
                               size_t errlen)
{
    for (int id = 0; id < SZ_GPT2_NUM_TENSORS; id++) {
        const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(id);
        int layers = t->per_layer ? cfg->layers : 1;
        size_t rows, cols;
        sz_gpt2_tensor_shape(cfg, id, &rows, &cols);
        for (int l = 0; l < layers; l++) {
            const float *p = params + sz_gpt2_tensor_layer_offset(cfg, id, l);
            for (size_t i = 0; i < rows * cols; i++)
                if (!isfinite(p[i])) {
                    if (t->per_layer)
                        gpt2_set_err(err, errlen, "%s: tensor %s of layer %d holds %f at element %zu: a checkpoint "
                                   "with non-finite values is refused", path, t->name, l, p[i], i);
                    else
                        gpt2_set_err(err, errlen, "%s: tensor %s holds %f at element %zu: a checkpoint with "
                                   "non-finite values is refused", path, t->name, p[i], i);
                    return SZ_ERR_FORMAT;
                }
        }
    }
    return SZ_OK;
}

sz_status sz_llmc_checkpoint_read(const char *path, sz_gpt2_config *cfg_out, float **params_out,
                                  size_t *nparams_out, char *err, size_t errlen)
{
    if (!cfg_out || !params_out) {
        gpt2_set_err(err, errlen, "%s: no output config or parameter pointer given",
                path ? path : "(null)");
        return SZ_ERR_INVALID;
    }
    FILE *fp = NULL;
    sz_gpt2_config cfg;
    size_t n = 0;
    sz_status st = open_checkpoint(path, &fp, &cfg, &n, err, errlen);
    if (st != SZ_OK)
        return st;
    float *params = malloc(n * sizeof(float));
    if (!params) {
        gpt2_set_err(err, errlen, "%s: out of memory allocating %zu parameters (%zu bytes)", path, n,
                n * sizeof(float));
        fclose(fp);
        return SZ_ERR_NOMEM;
    }
    st = read_exact(fp, params, n * sizeof(float), path, err, errlen);
    fclose(fp);
    if (st != SZ_OK) {
        free(params);
        return st;
    }
    *cfg_out = cfg;
    *params_out = params;
    if (nparams_out)
        *nparams_out = n;
    return SZ_OK;
}

struct sz_llmc_reader {
    FILE *fp;
    char *path;
    size_t nparams;
};

sz_status sz_llmc_reader_open(sz_llmc_reader **out, const char *path, sz_gpt2_config *cfg_out, char *err,
                              size_t errlen)
{
    *out = NULL;
    sz_llmc_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path ? path : ""))) {
        free(r);
        gpt2_set_err(err, errlen, "%s: out of memory", path ? path : "(null)");
        return SZ_ERR_NOMEM;
    }
    sz_status st = open_checkpoint(path, &r->fp, cfg_out, &r->nparams, err, errlen);
    if (st != SZ_OK) {
        free(r->path);
        free(r);
        return st;
    }
    *out = r;
    return SZ_OK;
}

sz_status sz_llmc_reader_get(sz_llmc_reader *r, size_t offset, float *dst, size_t n, char *err, size_t errlen)
{
    if (!r || (n && !dst) || offset + n > r->nparams) {
        gpt2_set_err(err, errlen, "%s: parameters [%zu, %zu) lie outside the %zu the file holds",
                     r ? r->path : "(null)", offset, offset + n, r ? r->nparams : 0);
        return SZ_ERR_INVALID;
    }
    if (fseeko(r->fp, (off_t)(SZ_LLMC_HEADER_BYTES + offset * sizeof(float)), SEEK_SET) != 0) {
        gpt2_set_err(err, errlen, "%s: cannot seek: %s", r->path, strerror(errno));
        return SZ_ERR_IO;
    }
    return read_exact(r->fp, dst, n * sizeof(float), r->path, err, errlen);
}

void sz_llmc_reader_close(sz_llmc_reader *r)
{
    if (!r)
        return;
    fclose(r->fp);
    free(r->path);
    free(r);
}

sz_status sz_llmc_check_config(const char *path, const sz_gpt2_config *got,
                               const sz_gpt2_config *expected, char *err, size_t errlen)
{
    if (!got || !expected) {
        gpt2_set_err(err, errlen, "%s: no config to compare", path ? path : "(null)");
        return SZ_ERR_INVALID;
    }
    const struct { const char *name; int file, want; } fields[] = {
        {"vocab V", got->vocab, expected->vocab},
        {"padded vocab Vp", got->padded_vocab, expected->padded_vocab},
        {"layers L", got->layers, expected->layers},
        {"heads NH", got->heads, expected->heads},
        {"channels C", got->channels, expected->channels},
        {"max sequence maxT", got->max_seq, expected->max_seq},
    };
    char diffs[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (fields[i].file == fields[i].want)
            continue;
        if (used < sizeof diffs) {
            int w = snprintf(diffs + used, sizeof diffs - used, "%s%s=%d in the file but %d expected",
                             used ? "; " : "", fields[i].name, fields[i].file, fields[i].want);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    if (used == 0)
        return SZ_OK;
    char a[128], b[128];
    sz_gpt2_config_format(got, a, sizeof a);
    sz_gpt2_config_format(expected, b, sizeof b);
    gpt2_set_err(err, errlen,
            "%s: config mismatch: the checkpoint does not match the requested model: %s "
            "(file: %s; expected: %s)",
            path ? path : "(checkpoint)", diffs, a, b);
    return SZ_ERR_FORMAT;
}

sz_status sz_llmc_tokens_read(const char *path, int vocab, uint16_t **tokens_out, size_t *count_out,
                              char *err, size_t errlen)
{
    if (!tokens_out || !count_out) {
        gpt2_set_err(err, errlen, "%s: no output token pointer or count given", path ? path : "(null)");
        return SZ_ERR_INVALID;
    }
    FILE *fp = NULL;
    uint64_t size = 0;
    sz_status st = open_for_read(path, &fp, &size, err, errlen);
    if (st != SZ_OK)
        return st;
    int32_t hdr[SZ_LLMC_HEADER_INTS];
    st = read_header(fp, size, hdr, SZ_LLMC_TOKENS_MAGIC, SZ_LLMC_TOKENS_VERSION, "token file",
                     SZ_LLMC_MODEL_MAGIC, " (this is an llm.c GPT-2 checkpoint)", path, err, errlen);
    if (st != SZ_OK) {
        fclose(fp);
        return st;
    }
    if (hdr[2] < 0) {
        gpt2_set_err(err, errlen, "%s: bad header: negative token count %" PRId32, path, hdr[2]);
        fclose(fp);
        return SZ_ERR_FORMAT;
    }
    size_t count = (size_t)hdr[2];
    char what[64];
    snprintf(what, sizeof what, "%zu tokens", count);
    st = check_body_size(size, (uint64_t)count * sizeof(uint16_t), what, path, err, errlen);
    if (st != SZ_OK) {
        fclose(fp);
        return st;
    }
    uint16_t *tokens = NULL;
    if (count > 0) {
        tokens = malloc(count * sizeof(uint16_t));
        if (!tokens) {
            gpt2_set_err(err, errlen, "%s: out of memory allocating %zu tokens", path, count);
            fclose(fp);
            return SZ_ERR_NOMEM;
        }
        st = read_exact(fp, tokens, count * sizeof(uint16_t), path, err, errlen);
    }
    fclose(fp);
    if (st != SZ_OK) {
        free(tokens);
        return st;
    }
    if (vocab > 0) {
        for (size_t i = 0; i < count; i++) {
            if (tokens[i] >= vocab) {
                gpt2_set_err(err, errlen,
                        "%s: token %u at position %zu is out of range: must be < vocab %d", path,
                        (unsigned)tokens[i], i, vocab);
                free(tokens);
                return SZ_ERR_FORMAT;
            }
        }
    }
    *tokens_out = tokens;
    *count_out = count;
    return SZ_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m) ? "a symbolic link" : "not a regular file";
}

/* Creates the temporary `tmp` for `path`: only a regular file (or nothing) at `path` may be
 * replaced, and a regular leftover temporary is replaced; anything else there is refused. -1 and
 * err, or the descriptor. */
static int create_tmp(const char *path, const char *tmp, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        gpt2_set_err(err, errlen, "%s: not written: it is %s, and only a regular file is ever replaced", path,
                     file_kind(st.st_mode));
        errno = EEXIST;
        return -1;
    }
    if (lstat(tmp, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            gpt2_set_err(err, errlen, "%s: cannot create the temporary file %s: it exists and is %s (not ours: "
                         "left alone)", path, tmp, file_kind(st.st_mode));
            return -1;
        }
        unlink(tmp); /* a leftover of an interrupted write */
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    if (fd < 0)
        gpt2_set_err(err, errlen, "%s: cannot create the temporary file %s: %s", path, tmp, strerror(errno));
    return fd;
}

/* The last steps of a write: the body is on disk, then the real header (the completion marker)
 * goes over the unfinished one and is fsync'ed too. NULL, or what failed (errno set). */
static const char *finish_header(int fd, const int32_t hdr[SZ_LLMC_HEADER_INTS])
{
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        return "fsync"; /* EINVAL/EROFS: the file system does not support fsync */
    if (pwrite(fd, hdr, SZ_LLMC_HEADER_BYTES, 0) != (ssize_t)SZ_LLMC_HEADER_BYTES)
        return "write of the header";
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        return "fsync";
    return NULL;
}

static int write_all(FILE *fp, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        size_t want = n < IO_CHUNK ? n : IO_CHUNK;
        if (fwrite(p, 1, want, fp) != want)
            return 0;
        p += want;
        n -= want;
    }
    return 1;
}

/* Writes body to `path`.tmp under an unfinished header, then the header (finish_header), then
 * renames it over `path`. The temporary is removed on failure (only if we created it), and
 * `path` is never touched then. */
static sz_status write_atomic(const char *path, const int32_t hdr[SZ_LLMC_HEADER_INTS],
                              const void *body, size_t body_bytes, char *err, size_t errlen)
{
    size_t len = strlen(path);
    char *tmp = malloc(len + 5);
    if (!tmp) {
        gpt2_set_err(err, errlen, "%s: out of memory", path);
        return SZ_ERR_NOMEM;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);

    int fd = create_tmp(path, tmp, err, errlen);
    FILE *fp = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!fp) {
        if (fd >= 0) {
            gpt2_set_err(err, errlen, "%s: cannot create the temporary file %s: %s", path, tmp, strerror(errno));
            close(fd);
            remove(tmp);
        }
        free(tmp);
        return SZ_ERR_IO;
    }
    int32_t unfinished[SZ_LLMC_HEADER_INTS];
    memcpy(unfinished, hdr, SZ_LLMC_HEADER_BYTES);
    unfinished[0] = hdr[0] == SZ_LLMC_TOKENS_MAGIC ? SZ_LLMC_UNFINISHED_TOKENS : SZ_LLMC_UNFINISHED_MODEL;
    const char *failed = NULL;
    int saved_errno = 0;
    if (!write_all(fp, unfinished, SZ_LLMC_HEADER_BYTES) || (body_bytes && !write_all(fp, body, body_bytes)))
        failed = "write";
    else if (fflush(fp) != 0)
        failed = "flush";
    else
        failed = finish_header(fileno(fp), hdr);
    if (failed)
        saved_errno = errno;
    if (fclose(fp) != 0 && !failed) {
        failed = "close";
        saved_errno = errno;
    }
    if (!failed && rename(tmp, path) != 0) {
        failed = "rename";
        saved_errno = errno;
    }
    if (failed) {
        gpt2_set_err(err, errlen, "%s: %s of the temporary file %s failed: %s (the existing %s, if any, "
                "is unchanged)", path, failed, tmp, strerror(saved_errno), path);
        remove(tmp);
        free(tmp);
        return SZ_ERR_IO;
    }
    free(tmp);
    return SZ_OK;
}

sz_status sz_llmc_checkpoint_write(const char *path, const sz_gpt2_config *cfg, const float *params,
                                   size_t nparams, char *err, size_t errlen)
{
    if (!path || !cfg || !params) {
        gpt2_set_err(err, errlen, "%s: no config or parameters to write", path ? path : "(null)");
        return SZ_ERR_INVALID;
    }
    char why[256];
    if (sz_gpt2_config_validate(cfg, why, sizeof why) != SZ_OK) {
        gpt2_set_err(err, errlen, "%s: not written: %s", path, why);
        return SZ_ERR_INVALID;
    }
    size_t need = sz_gpt2_num_params(cfg);
    if (nparams != need) {
        gpt2_set_err(err, errlen, "%s: not written: %zu parameters given but the config needs %zu", path,
                nparams, need);
        return SZ_ERR_INVALID;
    }
    sz_llmc_writer *w = NULL;
    sz_status st = sz_llmc_writer_open(&w, path, cfg, err, errlen);
    if (st == SZ_OK && (st = sz_llmc_writer_put(w, 0, params, nparams, err, errlen)) != SZ_OK)
        sz_llmc_writer_abort(w);
    return st == SZ_OK ? sz_llmc_writer_close(w, err, errlen) : st;
}

/* ---- writing a checkpoint piece by piece ------------------------------------------------ */

struct sz_llmc_writer {
    char *path, *tmp;
    int fd;
    uint64_t nparams, written; /* floats the body holds, floats put so far */
    int32_t hdr[SZ_LLMC_HEADER_INTS]; /* written last, by close */
};

static void writer_free(sz_llmc_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    free(w->path);
    free(w->tmp);
    free(w);
}

sz_status sz_llmc_writer_open(sz_llmc_writer **out, const char *path, const sz_gpt2_config *cfg, char *err,
                              size_t errlen)
{
    *out = NULL;
    char why[256];
    if (!path || !cfg) {
        gpt2_set_err(err, errlen, "%s: no config to write", path ? path : "(null)");
        return SZ_ERR_INVALID;
    }
    if (sz_gpt2_config_validate(cfg, why, sizeof why) != SZ_OK) {
        gpt2_set_err(err, errlen, "%s: not written: %s", path, why);
        return SZ_ERR_INVALID;
    }
    sz_llmc_writer *w = calloc(1, sizeof *w);
    size_t len = strlen(path);
    if (!w || !(w->path = strdup(path)) || !(w->tmp = malloc(len + 5))) {
        if (w)
            free(w->path), free(w);
        gpt2_set_err(err, errlen, "%s: out of memory", path);
        return SZ_ERR_NOMEM;
    }
    memcpy(w->tmp, path, len);
    memcpy(w->tmp + len, ".tmp", 5);
    w->nparams = sz_gpt2_num_params(cfg);
    int32_t *hdr = w->hdr;
    hdr[0] = SZ_LLMC_MODEL_MAGIC;
    hdr[1] = SZ_LLMC_MODEL_VERSION_FP32;
    hdr[2] = cfg->max_seq;
    hdr[3] = cfg->vocab;
    hdr[4] = cfg->layers;
    hdr[5] = cfg->heads;
    hdr[6] = cfg->channels;
    hdr[7] = cfg->padded_vocab;
    int32_t unfinished[SZ_LLMC_HEADER_INTS];
    memcpy(unfinished, hdr, SZ_LLMC_HEADER_BYTES);
    unfinished[0] = SZ_LLMC_UNFINISHED_MODEL; /* until close writes hdr: a killed writer leaves a refused file */
    w->fd = create_tmp(path, w->tmp, err, errlen);
    if (w->fd < 0) {
        writer_free(w);
        return SZ_ERR_IO;
    }
    if (pwrite(w->fd, unfinished, SZ_LLMC_HEADER_BYTES, 0) != (ssize_t)SZ_LLMC_HEADER_BYTES ||
        ftruncate(w->fd, (off_t)(SZ_LLMC_HEADER_BYTES + w->nparams * sizeof(float))) != 0) {
        gpt2_set_err(err, errlen, "%s: write of the temporary file %s failed: %s (the existing %s, if any, is "
                     "unchanged)", path, w->tmp, strerror(errno), path);
        sz_llmc_writer_abort(w);
        return SZ_ERR_IO;
    }
    *out = w;
    return SZ_OK;
}

sz_status sz_llmc_writer_put(sz_llmc_writer *w, size_t offset, const float *src, size_t n, char *err, size_t errlen)
{
    if (!w || (n && !src) || offset + n > w->nparams) {
        gpt2_set_err(err, errlen, "%s: parameters [%zu, %zu) lie outside the %llu the file holds",
                     w ? w->path : "(null)", offset, offset + n, w ? (unsigned long long)w->nparams : 0ULL);
        return SZ_ERR_INVALID;
    }
    const char *p = (const char *)src;
    size_t left = n * sizeof(float);
    off_t at = (off_t)(SZ_LLMC_HEADER_BYTES + offset * sizeof(float));
    while (left > 0) {
        ssize_t k = pwrite(w->fd, p, left < IO_CHUNK ? left : IO_CHUNK, at);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            gpt2_set_err(err, errlen, "%s: write of the temporary file %s failed: %s (the existing %s, if any, is "
                         "unchanged)", w->path, w->tmp, k < 0 ? strerror(errno) : "nothing written", w->path);
            return SZ_ERR_IO;
        }
        p += k;
        at += k;
        left -= (size_t)k;
    }
    w->written += n;
    return SZ_OK;
}

sz_status sz_llmc_writer_close(sz_llmc_writer *w, char *err, size_t errlen)
{
    if (!w)
        return SZ_ERR_INVALID;
    const char *failed = NULL;
    int saved_errno = 0;
    if (w->written != w->nparams) {
        gpt2_set_err(err, errlen, "%s: not written: %llu of its %llu parameters were given", w->path,
                     (unsigned long long)w->written, (unsigned long long)w->nparams);
        sz_llmc_writer_abort(w);
        return SZ_ERR_INVALID;
    }
    if ((failed = finish_header(w->fd, w->hdr)) != NULL)
        saved_errno = errno;
    if (close(w->fd) != 0 && !failed)
        failed = "close", saved_errno = errno;
    w->fd = -1;
    struct stat st;
    if (!failed && stat(w->path, &st) == 0 && !S_ISREG(st.st_mode)) { /* appeared since open */
        gpt2_set_err(err, errlen, "%s: not written: it is %s, and only a regular file is ever replaced (the "
                     "temporary %s is removed)", w->path, file_kind(st.st_mode), w->tmp);
        remove(w->tmp);
        writer_free(w);
        return SZ_ERR_IO;
    }
    if (!failed && rename(w->tmp, w->path) != 0)
        failed = "rename", saved_errno = errno;
    if (failed) {
        gpt2_set_err(err, errlen, "%s: %s of the temporary file %s failed: %s (the existing %s, if any, "
                     "is unchanged)", w->path, failed, w->tmp, strerror(saved_errno), w->path);
        remove(w->tmp);
        writer_free(w);
        return SZ_ERR_IO;
    }
    writer_free(w);
    return SZ_OK;
}

void sz_llmc_writer_abort(sz_llmc_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    remove(w->tmp);
    writer_free(w);
}

sz_status sz_llmc_tokens_write(const char *path, const uint16_t *tokens, size_t count, char *err,
                               size_t errlen)
{
    if (!path || (count > 0 && !tokens)) {
        gpt2_set_err(err, errlen, "%s: no tokens to write", path ? path : "(null)");
        return SZ_ERR_INVALID;
    }
    if (count > (size_t)INT32_MAX) {
        gpt2_set_err(err, errlen, "%s: not written: %zu tokens is more than an llm.c token file holds (%d)",
                path, count, INT32_MAX);
        return SZ_ERR_INVALID;
    }
    int32_t hdr[SZ_LLMC_HEADER_INTS] = {0};
    hdr[0] = SZ_LLMC_TOKENS_MAGIC;
    hdr[1] = SZ_LLMC_TOKENS_VERSION;
    hdr[2] = (int32_t)count;
    return write_atomic(path, hdr, tokens, count * sizeof(uint16_t), err, errlen);
}
