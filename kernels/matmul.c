/* matmul.c — fp32 linear layer (y = x.W^T + b and its backward) on oneDNN's
 * dnnl_matmul, plus the tiled driver, the primitive cache and the plain fallback
 * shared with matmul_bf16.c.
 *
 * Determinism (measured here: oneDNN 2.6.3, AVX2 "gemm:jit", d12 shapes, N=256):
 * one whole-matrix multithreaded dnnl_matmul is NOT bitwise stable across thread
 * counts. The forward (no sum post-op) gave the same bits for 1 and 2 threads but
 * different bits for 4 and 8 (the gemm splits the K reduction by thread count);
 * the backward products (sum post-op) happened to match for 1/2/4/8, which
 * nothing guarantees (the AVX-512 brgemm path also picks a K split from the
 * thread count). So oneDNN never chooses: the destination is cut into fixed
 * tiles of SZ_MM_TM x SZ_MM_TN (a function of the shape only), the tiles are
 * spread over our OpenMP threads, and each tile is one single-threaded
 * dnnl_matmul (omp_set_num_threads(1) inside our region; oneDNN also runs
 * serially inside an active OpenMP region) with the complete K reduction. Each
 * output element is computed by the same code on the same data whatever the
 * thread count; tests/test_kernels.c checks 1/2/3/4 threads bitwise. The bits
 * do depend on the tile sizes and on the CPU's oneDNN kernel. Speed is the same
 * as one big call (~180 GFLOP/s forward on this 2-core AVX2 machine).
 *
 * Primitive cache: one engine plus up to SZ_MM_CACHE_MAX primitives keyed by the
 * tile's sz_mm_shape (dims, strides, dtypes, accumulate, threads), guarded by a
 * mutex, created once, freed by sz_k_shutdown(). Unsupported shapes are cached
 * as NULL (then the plain loops run). Scratchpads are user-managed: each
 * calling thread passes its own (a thread-local buffer grown on demand). oneDNN's
 * default library-managed scratchpad gave wrong products on an AVX-512 machine
 * (brgemm, tiles of different primitives run concurrently by our threads): the
 * same tile recomputed right after was correct. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <oneapi/dnnl/dnnl.h>
#include "sz_kernels_impl.h"

/* Tile sizes, tuning only. Measured on the AVX-512 machine (oneDNN 2.6 brgemm, the 15 d12 products
 * at N = 256 rows, 8 alternating runs each): 256 x 384 took a median 253 ms for all 15, against
 * 283 ms for 128 x 256 and 304 ms for 256 x 512. There the bits were the same for every tile size
 * up to 576 columns (not for 768 or 1152); nothing guarantees that elsewhere. On the AMX machine
 * (2026-12-07) every tile of the d12 products ran gemm:jit, in oneDNN 2.6 and 3.2 alike, with the
 * same bits: their brgemm matmul takes dense operands only, and a tile's d is a strided view
 * (docs/BENCHMARKS.md, "oneDNN 3.2 against 2.6"). */
#ifndef SZ_MM_TM
#define SZ_MM_TM 256          /* tile rows of d */
#endif
#ifndef SZ_MM_TN
#define SZ_MM_TN 384          /* tile columns of d */
#endif
#define SZ_MM_CACHE_MAX 256

typedef struct { sz_mm_shape key; dnnl_primitive_t prim; size_t scratch; } sz_mm_entry;

static struct {
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    int n;
    sz_mm_entry e[SZ_MM_CACHE_MAX];
} sz_mm_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static size_t sz_esize(int dt) { return dt == SZ_K_BF16 ? 2 : 4; }
static dnnl_data_type_t sz_dnnl_dt(int dt) { return dt == SZ_K_BF16 ? dnnl_bf16 : dnnl_f32; }

/* oneDNN 2.x (Debian bookworm's 2.6) or 3.x (e.g. PyPI's 3.2, docs/BENCHMARKS.md), by
 * DNNL_VERSION_MAJOR: 3.x's memory descriptors are handles, made and destroyed (2.x: structs filled
 * in place), and its matmul primitive descriptor is made from them directly (2.x: an operation
 * descriptor first). sz_md is either, sz_cmd a queried one. Executing needs no shim (sz_mm_exec). */
#if DNNL_VERSION_MAJOR >= 3
typedef dnnl_memory_desc_t sz_md;   /* a handle: NULL, or made by sz_md_make and freed */
typedef const_dnnl_memory_desc_t sz_cmd;   /* what a query returns */
static int sz_md_make(sz_md *md, int64_t rows, int64_t cols, int dt, int64_t s_r, int64_t s_c)
{
    dnnl_dims_t d = { rows, cols }, st = { s_r, s_c };
    return dnnl_memory_desc_create_with_strides(md, 2, d, sz_dnnl_dt(dt), st) == dnnl_success ? 0 : -1;
}
static void sz_md_free(sz_md *md) { if (*md) dnnl_memory_desc_destroy(*md); }
static dnnl_status_t sz_mm_pd_create(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, sz_md *a, sz_md *b,
                                     sz_md *bias, sz_md *d, dnnl_primitive_attr_t attr)
{
    return dnnl_matmul_primitive_desc_create(pd, eng, *a, *b, bias ? *bias : NULL, *d, attr);
}
#define sz_post_ops_append_sum(po) dnnl_post_ops_append_sum(po, 1.0f, 0, dnnl_data_type_undef)
#else
typedef dnnl_memory_desc_t sz_md;   /* a struct */
typedef const dnnl_memory_desc_t *sz_cmd;
static int sz_md_make(sz_md *md, int64_t rows, int64_t cols, int dt, int64_t s_r, int64_t s_c)
{
    dnnl_dims_t d = { rows, cols }, st = { s_r, s_c };
    return dnnl_memory_desc_init_by_strides(md, 2, d, sz_dnnl_dt(dt), st) == dnnl_success ? 0 : -1;
}
static void sz_md_free(sz_md *md) { (void)md; }
static dnnl_status_t sz_mm_pd_create(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, sz_md *a, sz_md *b,
                                     sz_md *bias, sz_md *d, dnnl_primitive_attr_t attr)
{
    dnnl_matmul_desc_t md;
    dnnl_status_t st = dnnl_matmul_desc_init(&md, a, b, bias, d);
    return st != dnnl_success ? st : dnnl_primitive_desc_create(pd, &md, attr, eng, NULL);
}
#define sz_post_ops_append_sum(po) dnnl_post_ops_append_sum(po, 1.0f)
#endif

/* Creates the primitive for one tile shape, a[M,K] . b[K,N] (+ bias[1,N]) into d[M,N]; NULL if
 * oneDNN cannot (or, for bf16, only has its slow reference implementation). */
static dnnl_primitive_t sz_mm_create(dnnl_engine_t eng, const sz_mm_shape *s, size_t *scratch)
{
    sz_md md[4];   /* a, b, d, bias */
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    const char *impl = "";

    memset(md, 0, sizeof md);
    if (sz_md_make(&md[0], s->M, s->K, s->a_dt, s->a_sm, s->a_sk) ||
        sz_md_make(&md[1], s->K, s->N, s->b_dt, s->b_sk, s->b_sn) ||
        sz_md_make(&md[2], s->M, s->N, s->d_dt, s->ldd, 1) ||
        (s->bias_dt >= 0 && sz_md_make(&md[3], 1, s->N, s->bias_dt, s->N, 1)) ||
        dnnl_primitive_attr_create(&attr) != dnnl_success)
        goto done;
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success)
        goto done;
    if (s->accumulate) {
        if (dnnl_post_ops_create(&po) != dnnl_success ||
            sz_post_ops_append_sum(po) != dnnl_success ||
            dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success)
            goto done;
    }
    if (sz_mm_pd_create(&pd, eng, &md[0], &md[1], s->bias_dt >= 0 ? &md[3] : NULL, &md[2], attr) != dnnl_success)
        goto done;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    if ((s->a_dt == SZ_K_BF16 || s->b_dt == SZ_K_BF16) && strncmp(impl, "ref", 3) == 0)
        goto done;
    sz_cmd smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    *scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (dnnl_primitive_create(&prim, pd) != dnnl_success)
        prim = NULL;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    for (int i = 0; i < 4; i++) sz_md_free(&md[i]);
    return prim;
}

/* Cached primitive for s (NULL = unsupported). *owned = 1 when the cache was
 * full and the caller must destroy it after use. */
static dnnl_primitive_t sz_mm_get(const sz_mm_shape *s, dnnl_engine_t *eng, int *owned,
                                  size_t *scratch)
{
    dnnl_primitive_t prim = NULL;
    *owned = 0;
    *scratch = 0;
    pthread_mutex_lock(&sz_mm_cache.lock);
    for (int i = 0; i < sz_mm_cache.n; i++)
        if (memcmp(&sz_mm_cache.e[i].key, s, sizeof *s) == 0) {
            prim = sz_mm_cache.e[i].prim;
            *scratch = sz_mm_cache.e[i].scratch;
            *eng = sz_mm_cache.engine;
            pthread_mutex_unlock(&sz_mm_cache.lock);
            return prim;
        }
    if (!sz_mm_cache.engine && dnnl_engine_create(&sz_mm_cache.engine, dnnl_cpu, 0) != dnnl_success)
        sz_mm_cache.engine = NULL;
    if (sz_mm_cache.engine)
        prim = sz_mm_create(sz_mm_cache.engine, s, scratch);
    if (sz_mm_cache.n < SZ_MM_CACHE_MAX) {
        sz_mm_cache.e[sz_mm_cache.n].key = *s;
        sz_mm_cache.e[sz_mm_cache.n].prim = prim;
        sz_mm_cache.e[sz_mm_cache.n].scratch = *scratch;
        sz_mm_cache.n++;
    } else {
        *owned = 1;
    }
    *eng = sz_mm_cache.engine;
    pthread_mutex_unlock(&sz_mm_cache.lock);
    return prim;
}

void sz_k_shutdown(void)
{
    pthread_mutex_lock(&sz_mm_cache.lock);
    for (int i = 0; i < sz_mm_cache.n; i++)
        if (sz_mm_cache.e[i].prim) dnnl_primitive_destroy(sz_mm_cache.e[i].prim);
    sz_mm_cache.n = 0;
    if (sz_mm_cache.engine) dnnl_engine_destroy(sz_mm_cache.engine);
    sz_mm_cache.engine = NULL;
    pthread_mutex_unlock(&sz_mm_cache.lock);
}

/* Host bytes the kernels' working memory holds now and at most (thread scratchpads + packed tiles):
 * sz_k_matmul_host_peak, which the memory report compares with sz_k_matmul_host_bytes. */
static int64_t sz_mm_live, sz_mm_peak;
void sz_mm_count(int64_t delta)
{
    int64_t now = __atomic_add_fetch(&sz_mm_live, delta, __ATOMIC_RELAXED);
    int64_t old = __atomic_load_n(&sz_mm_peak, __ATOMIC_RELAXED);
    while (now > old && !__atomic_compare_exchange_n(&sz_mm_peak, &old, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}
int64_t sz_k_matmul_host_peak(void) { return __atomic_load_n(&sz_mm_peak, __ATOMIC_RELAXED); }
int64_t sz_k_matmul_host_live(void) { return __atomic_load_n(&sz_mm_live, __ATOMIC_RELAXED); }
void sz_k_matmul_host_peak_reset(void) { __atomic_store_n(&sz_mm_peak, sz_k_matmul_host_live(), __ATOMIC_RELAXED); }

/* This thread's scratchpad, grown on demand, freed when the thread ends. */
static pthread_key_t sz_mm_scratch_key;
static pthread_once_t sz_mm_scratch_once = PTHREAD_ONCE_INIT;
typedef struct { void *p; size_t n; } sz_mm_scratch_buf;
static void sz_mm_scratch_free(void *v) { sz_mm_scratch_buf *b = v; sz_mm_count(-(int64_t)b->n); free(b->p); free(b); }
static void sz_mm_scratch_init(void) { pthread_key_create(&sz_mm_scratch_key, sz_mm_scratch_free); }

static void *sz_mm_scratch(size_t n)
{
    pthread_once(&sz_mm_scratch_once, sz_mm_scratch_init);
    sz_mm_scratch_buf *b = pthread_getspecific(sz_mm_scratch_key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        pthread_setspecific(sz_mm_scratch_key, b);
    }
    if (b->n < n) {
        free(b->p);
        sz_mm_count(-(int64_t)b->n);
        b->n = 0;
        if (!(b->p = aligned_alloc(64, (n + 63) & ~(size_t)63))) return NULL;
        b->n = n;
        sz_mm_count((int64_t)n);
    }
    return b->p;
}

/* Runs prim on the tile's operands, described by the memory descriptors of prim's own primitive
 * descriptor (the ones sz_mm_create made; the scratchpad's its size). */
static int sz_mm_exec(dnnl_engine_t eng, dnnl_primitive_t prim, size_t scratch,
                      const sz_mm_shape *s, void *d, const void *a, const void *b, const void *bias)
{
    dnnl_memory_t m[5] = { NULL, NULL, NULL, NULL, NULL };
    void *ptr[5] = { (void *)a, (void *)b, d, (void *)bias, NULL };
    int arg[5] = { DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS, DNNL_ARG_SCRATCHPAD };
    dnnl_exec_arg_t args[5];
    const_dnnl_primitive_desc_t pd;
    dnnl_stream_t st = NULL;
    int nargs = 0, rc = -1;
    if (dnnl_primitive_get_primitive_desc(prim, &pd) != dnnl_success)
        return -1;
    if (scratch && !(ptr[4] = sz_mm_scratch(scratch)))
        return -1;
    for (int i = 0; i < 5; i++) {
        if ((i == 3 && s->bias_dt < 0) || (i == 4 && !scratch)) continue;
        if (dnnl_memory_create(&m[i], dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg[i]),
                               eng, ptr[i]) != dnnl_success) goto done;
        args[nargs].arg = arg[i];
        args[nargs++].memory = m[i];
    }
    if (dnnl_stream_create(&st, eng, dnnl_stream_default_flags) == dnnl_success &&
        dnnl_primitive_execute(prim, st, nargs, args) == dnnl_success &&
        dnnl_stream_wait(st) == dnnl_success)
        rc = 0;
done:
    if (st) dnnl_stream_destroy(st);
    for (int i = 0; i < 5; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    return rc;
}

static float sz_ld(const void *p, int dt, int64_t i)
{
    return dt == SZ_K_BF16 ? sz_bf16_to_f32_1(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

void sz_mm_plain(const sz_mm_shape *s, void *d, const void *a, const void *b,
                 const void *bias)
{
    for (int64_t i = 0; i < s->M; i++)
        for (int64_t j = 0; j < s->N; j++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < s->K; k++)
                acc += sz_ld(a, s->a_dt, i * s->a_sm + k * s->a_sk) *
                       sz_ld(b, s->b_dt, k * s->b_sk + j * s->b_sn);
            if (s->bias_dt >= 0) acc += sz_ld(bias, s->bias_dt, j);
            int64_t o = i * s->ldd + j;
            if (s->accumulate) acc += sz_ld(d, s->d_dt, o);
            if (s->d_dt == SZ_K_BF16) ((uint16_t *)d)[o] = sz_f32_to_bf16_1(acc);
            else ((float *)d)[o] = acc;
        }
}

/* One tile on the calling thread: oneDNN if it can, else the plain loops. */
static int sz_mm_tile(const sz_mm_shape *s, void *d, const void *a, const void *b,
                      const void *bias)
{
    dnnl_engine_t eng = NULL;
    int owned, rc = 1;
    size_t scratch;
    dnnl_primitive_t prim = sz_mm_get(s, &eng, &owned, &scratch);
    if (prim && sz_mm_exec(eng, prim, scratch, s, d, a, b, bias) == 0) rc = 0;
    if (prim && owned) dnnl_primitive_destroy(prim);
    if (rc) sz_mm_plain(s, d, a, b, bias);
    return rc;
}

/* The tile (i0, j0) of s, with its shape and pointers. */
static void sz_mm_sub(const sz_mm_shape *s, int64_t i0, int64_t j0, sz_mm_shape *sub)
{
    *sub = *s;
    sub->M = s->M - i0 < SZ_MM_TM ? s->M - i0 : SZ_MM_TM;
    sub->N = s->N - j0 < SZ_MM_TN ? s->N - j0 : SZ_MM_TN;
    sub->nthr = omp_get_max_threads();
}

/* Copies rows i0..i0+mt of a transposed A into pa as a contiguous [mt, K]. */
static void sz_mm_pack_a(const sz_mm_shape *s, int64_t i0, int64_t mt, const void *a,
                         void *pa)
{
    if (s->a_dt == SZ_K_BF16) {
        const uint16_t *src = a;
        uint16_t *dst = pa;
        for (int64_t k = 0; k < s->K; k++)
            for (int64_t i = 0; i < mt; i++) dst[i * s->K + k] = src[(i0 + i) * s->a_sm + k * s->a_sk];
    } else {
        const float *src = a;
        float *dst = pa;
        for (int64_t k = 0; k < s->K; k++)
            for (int64_t i = 0; i < mt; i++) dst[i * s->K + k] = src[(i0 + i) * s->a_sm + k * s->a_sk];
    }
}

/* Copies columns j0..j0+nt of a row-major B into pb as [K, ldpb]. */
static void sz_mm_pack_b(const sz_mm_shape *s, int64_t j0, int64_t nt, int64_t ldpb,
                         const void *b, void *pb)
{
    size_t eb = sz_esize(s->b_dt);
    for (int64_t k = 0; k < s->K; k++)
        memcpy((char *)pb + k * ldpb * eb, (const char *)b + (k * s->b_sk + j0) * eb, nt * eb);
}

/* ---- fp32 A and d with a bf16 B (the weight) and bias: the emulated bf16 path's products.
 * No fp32 working copy of the weight exists: each thread widens (exactly: bf16 -> fp32 is a shift)
 * its tile's B panel and bias slice into its own scratch, and the tile is the fp32 product on
 * that, single-threaded oneDNN as every tile. The tile's descriptors are the ones the fp32 product
 * on a widened copy of the whole weight (sz_mm_tiled with b_dt = bias_dt = F32) uses, so it is the
 * same oneDNN primitive on the same values:
 *  - B read as W^T (b_sk = 1, the forward): the panel is W's rows j0..j0+nt, each K long, kept at
 *    W's own row stride b_sn: the very strides of the fp32 tile;
 *  - B row-major (b_sn = 1, dinp = dout . W): the panel must keep oneDNN's choice of kernel, which
 *    depends on B's leading dimension: measured (oneDNN 2.6, AVX-512), the same 256 x 401 x 96 tile
 *    ran brg:avx512_core on a dense B (ldb = N) and gemm:jit on ldb = 400, with other bits. So:
 *    where the fp32 product packs B (its row stride a multiple of 2 KiB), the panel is its
 *    [K, SZ_MM_TN + 16]; where B's rows fit one tile (N <= SZ_MM_TN, the fp32 tile reads W densely
 *    in place) the panel is the whole widened W at W's own row stride (K x N floats, no more than
 *    the other panel); else (several column blocks: the fp32 tile reads a strided, non-dense view
 *    of W, ldb = C > its columns) the panel is [K, SZ_MM_TN + 16], also strided and non-dense: the
 *    same kernel (gemm:jit here, which packs B itself), the same bits — a row-stride panel would
 *    hold K x C floats per thread (the lm head's: 154 MB), no smaller than a working copy.
 * tests/test_matmul_wbf16.c checks memcmp-equality on every layout (C = 768, d12's, among them),
 * forward with and without bias, dinp accumulated and set, 1/2/3 threads.
 * The tiles are visited column-major, so a thread widens each panel once for all its row blocks.
 * A long K is widened and multiplied in chunks instead (sz_mm_kchunk, below), where that keeps the bits. */
static int sz_mm_widens(const sz_mm_shape *s) { return s->a_dt == SZ_K_F32 && s->b_dt == SZ_K_BF16; }
static int64_t sz_mm_kchunk(const sz_mm_shape *s);

/* Whether the fp32 product packs a row-major B of row stride b_sk (below: sz_mm_packing). */
static int sz_mm_packs_b(const sz_mm_shape *s, size_t eb)
{
    return s->b_sn == 1 && s->K > 1 && (s->b_sk * eb) % 2048 == 0;
}

/* The strides a tile sees for its packed or widened B. */
static void sz_mm_panel_strides(const sz_mm_shape *s, int64_t *sk, int64_t *sn)
{
    *sk = SZ_MM_TN + 16;
    *sn = 1;
    if (!sz_mm_widens(s)) return;
    if (s->b_sk == 1 && s->b_sn >= s->K) { *sk = 1; *sn = s->b_sn; }          /* W^T: W's rows */
    else if (s->b_sn == 1 && s->N <= SZ_MM_TN && !sz_mm_packs_b(s, 4)) *sk = s->b_sk; /* all of W */
}

/* The rows of B one widened panel holds: all K, or with K chunks (sz_mm_kchunk) the longest chunk. */
static int64_t sz_mm_panel_rows(const sz_mm_shape *s)
{
    int64_t kc = sz_mm_kchunk(s);
    return kc ? s->K - (s->K / kc - 1) * kc : s->K;
}

/* fp32 elements of a widened B panel (the bias slice follows it, 64-byte aligned). */
static size_t sz_mm_panel_elems(const sz_mm_shape *s)
{
    int64_t sk, sn;
    sz_mm_panel_strides(s, &sk, &sn);
    size_t n = sk == 1 && sn != 1 ? (size_t)SZ_MM_TN * sn
               : sn == 1 && sk != SZ_MM_TN + 16 ? (size_t)(s->K - 1) * sk + s->N
                                                : (size_t)sz_mm_panel_rows(s) * (SZ_MM_TN + 16);
    return (n + 15) & ~(size_t)15;
}

static inline void sz_mm_widen_row(float *restrict dst, const uint16_t *restrict src, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) dst[i] = sz_bits_f32((uint32_t)src[i] << 16);
}

/* Widens B's columns j0..j0+nt (and bias[j0..j0+nt) when given) into pb, as the tile reads them;
 * of a row-major B only the rows k0..k0+kl (a K chunk, sz_mm_kchunk; else 0..K). */
static void sz_mm_widen_b(const sz_mm_shape *s, int64_t j0, int64_t nt, int64_t k0, int64_t kl,
                          const uint16_t *b, const uint16_t *bias, float *pb)
{
    int64_t sk, sn;
    sz_mm_panel_strides(s, &sk, &sn);
    if (sk == 1 && sn != 1) {       /* W's rows j0..j0+nt */
        for (int64_t j = 0; j < nt; j++) sz_mm_widen_row(pb + j * sn, b + (j0 + j) * s->b_sn, s->K);
    } else if (s->b_sn == 1) {      /* row-major B: nt contiguous elements per k */
        for (int64_t k = 0; k < kl; k++) sz_mm_widen_row(pb + k * sk, b + (k0 + k) * s->b_sk + j0, nt);
    } else {
        for (int64_t k = 0; k < s->K; k++)
            for (int64_t j = 0; j < nt; j++)
                pb[k * sk + j] = sz_bf16_to_f32_1(b[k * s->b_sk + (j0 + j) * s->b_sn]);
    }
    if (bias) sz_mm_widen_row(pb + sz_mm_panel_elems(s), bias + j0, nt);
}

/* Whether sz_mm_tiled copies A's rows / B's columns into contiguous tiles (or widens B's panel:
 * then pack_b is 1), and their bytes per thread. */
static void sz_mm_packing(const sz_mm_shape *s, int *pack_a, int *pack_b, size_t *abytes, size_t *bbytes)
{
    size_t ea = sz_esize(s->a_dt), eb = sz_esize(s->b_dt);
    *pack_a = s->a_sm == 1 && s->a_sk != 1 && s->K > 1 && !__builtin_cpu_supports("avx512f");
    *abytes = *pack_a ? (size_t)SZ_MM_TM * s->K * ea : 0;
    if (sz_mm_widens(s)) {
        *pack_b = 1;
        *bbytes = (sz_mm_panel_elems(s) + (s->bias_dt >= 0 ? SZ_MM_TN : 0)) * sizeof(float);
        return;
    }
    *pack_b = sz_mm_packs_b(s, eb);
    *bbytes = *pack_b ? (size_t)s->K * (SZ_MM_TN + 16) * eb : 0;
}

/* The tile's own shape once its operands are packed / widened (its primitive's key). */
static void sz_mm_sub_packed(const sz_mm_shape *s, int pack_a, int pack_b, sz_mm_shape *sub)
{
    if (pack_a) { sub->a_sm = s->K; sub->a_sk = 1; }
    if (pack_b) sz_mm_panel_strides(s, &sub->b_sk, &sub->b_sn);
    if (sz_mm_widens(s)) {
        sub->b_dt = SZ_K_F32;
        if (sub->bias_dt >= 0) sub->bias_dt = SZ_K_F32;
    }
}

/* ---- K chunks of a widened row-major B (the dinp products of the emulated path) ----
 * A [K, SZ_MM_TN + 16] panel of the whole K is the lm head's 80 MB per thread (50304 x 400 floats),
 * written to memory and read back by the tile: the widening costs more than the product saves.
 * Cut into chunks of SZ_MM_KC rows (the last one takes the rest, kc..2kc-1 rows), each chunk
 * widened and multiplied with the sum post-op on the tile (the first chunk with the tile's own
 * accumulate flag), the panel is kc..2kc rows and stays in cache. That is the fp32 tile's bits only
 * where oneDNN's kernel sums K in blocks whose boundaries fall on the chunks' and adds each block's
 * sum to d in turn: measured here (oneDNN 2.6 gemm:jit, AVX-512), it blocks K by 384 (a chunk of 384
 * matched, 128, 256 and 512 did not, nor a last chunk shorter than 384). Nothing says that of
 * another CPU or oneDNN, so it is checked where it runs: once per tile shape (M, N, accumulate) a
 * probe multiplies random operands over K = 3.5 kc whole and in chunks and compares the bits
 * (a different summation order changed ~90% of the elements); chunks are used only if they are
 * equal. */
#ifndef SZ_MM_KC
#define SZ_MM_KC 768          /* K chunk rows (a multiple of 384, the K block measured) */
#endif

typedef struct { int64_t m, n; int acc, ok; } sz_mm_kprobe;
static struct { pthread_mutex_t lock; int n; sz_mm_kprobe e[32]; } sz_mm_kprobes = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint32_t sz_mm_lcg(uint32_t *x) { return *x = *x * 1664525u + 1013904223u; }

/* Whether an m x n tile over a [K, SZ_MM_TN + 16] panel gives the same bits whole and in K chunks. */
static int sz_mm_kprobe_run(int64_t m, int64_t n, int acc)
{
    int64_t kc = SZ_MM_KC, K = 3 * kc + kc / 2, ldb = SZ_MM_TN + 16;
    float *a = malloc(sizeof(float) * (size_t)(m * K)), *b = malloc(sizeof(float) * (size_t)(K * ldb));
    float *d0 = malloc(sizeof(float) * (size_t)(m * n)), *d1 = malloc(sizeof(float) * (size_t)(m * n));
    int ok = 0;
    if (a && b && d0 && d1) {
        uint32_t x = 12345;
        for (int64_t i = 0; i < m * K; i++) a[i] = (float)(int32_t)sz_mm_lcg(&x) * 0x1p-31f;
        for (int64_t i = 0; i < K * ldb; i++) b[i] = (float)(int32_t)sz_mm_lcg(&x) * 0x1p-31f;
        for (int64_t i = 0; i < m * n; i++) d0[i] = d1[i] = (float)(int32_t)sz_mm_lcg(&x) * 0x1p-31f;
        sz_mm_shape t;
        memset(&t, 0, sizeof t);
        t.M = m; t.N = n; t.K = K; t.a_sm = K; t.a_sk = 1; t.b_sk = ldb; t.b_sn = 1; t.ldd = n;
        t.a_dt = t.b_dt = t.d_dt = SZ_K_F32; t.bias_dt = -1; t.accumulate = acc; t.nthr = 1;
        sz_mm_tile(&t, d0, a, b, NULL);
        for (int64_t k0 = 0, nch = K / kc, c = 0; c < nch; c++, k0 += kc) {
            t.K = c == nch - 1 ? K - k0 : kc;
            t.accumulate = c ? 1 : acc;
            sz_mm_tile(&t, d1, a + k0, b + k0 * ldb, NULL);
        }
        ok = memcmp(d0, d1, sizeof(float) * (size_t)(m * n)) == 0;
    }
    free(a); free(b); free(d0); free(d1);
    return ok;
}

static int sz_mm_kprobe_ok(int64_t m, int64_t n, int acc)
{
    int ok = -1;
    pthread_mutex_lock(&sz_mm_kprobes.lock);
    for (int i = 0; i < sz_mm_kprobes.n; i++)
        if (sz_mm_kprobes.e[i].m == m && sz_mm_kprobes.e[i].n == n && sz_mm_kprobes.e[i].acc == acc)
            ok = sz_mm_kprobes.e[i].ok;
    pthread_mutex_unlock(&sz_mm_kprobes.lock);
    if (ok >= 0) return ok;
#pragma omp parallel num_threads(1)
    {
        omp_set_num_threads(1);   /* the tiles' own primitives: single-threaded, keyed nthr = 1 */
        ok = sz_mm_kprobe_run(m, n, acc);
    }
    pthread_mutex_lock(&sz_mm_kprobes.lock);
    if (sz_mm_kprobes.n < 32) sz_mm_kprobes.e[sz_mm_kprobes.n++] = (sz_mm_kprobe){ m, n, acc, ok };
    pthread_mutex_unlock(&sz_mm_kprobes.lock);
    return ok;
}

/* The K chunk rows s's tiles use (0: the whole K in one panel): a widened row-major B read through
 * a [K, SZ_MM_TN + 16] panel, A row-major, at least two chunks, and every distinct tile shape of s
 * passing the probe. */
static int64_t sz_mm_kchunk(const sz_mm_shape *s)
{
    int64_t sk, sn;
    if (!sz_mm_widens(s) || s->b_sn != 1 || s->a_sk != 1 || s->K < 2 * SZ_MM_KC || s->bias_dt >= 0) return 0;
    sz_mm_panel_strides(s, &sk, &sn);
    if (sk != SZ_MM_TN + 16 || sn != 1) return 0;
    int64_t me = (s->M - 1) % SZ_MM_TM + 1, ne = (s->N - 1) % SZ_MM_TN + 1;
    int64_t m0 = s->M < SZ_MM_TM ? s->M : SZ_MM_TM, n0 = s->N < SZ_MM_TN ? s->N : SZ_MM_TN;
    if (!sz_mm_kprobe_ok(m0, n0, s->accumulate) || !sz_mm_kprobe_ok(me, n0, s->accumulate) ||
        !sz_mm_kprobe_ok(m0, ne, s->accumulate) || !sz_mm_kprobe_ok(me, ne, s->accumulate))
        return 0;
    return SZ_MM_KC;
}

/* The largest oneDNN scratchpad among s's distinct tiles (whole ones and the edges in each direction,
 * as sz_mm_tiled cuts them; the packed operands change only the strides the tile sees). Call with
 * omp_get_max_threads() == 1, as inside the tiled region (the tiles' primitives are keyed so). */
static size_t sz_mm_most_scratch(const sz_mm_shape *s, int pack_a, int pack_b)
{
    size_t most = 0;
    for (int ei = 0; ei < 2; ei++)
        for (int ej = 0; ej < 2; ej++) {
            int64_t i0 = ei ? (s->M - 1) / SZ_MM_TM * SZ_MM_TM : 0, j0 = ej ? (s->N - 1) / SZ_MM_TN * SZ_MM_TN : 0;
            sz_mm_shape sub;
            sz_mm_sub(s, i0, j0, &sub);
            sz_mm_sub_packed(s, pack_a, pack_b, &sub);
            /* with K chunks: the first chunk (the tile's accumulate flag), the others (sum), the last */
            int64_t kc = sz_mm_kchunk(s), nv = kc ? 3 : 1;
            for (int v = 0; v < nv; v++) {
                if (kc) {
                    sub.K = v == 2 ? s->K - (s->K / kc - 1) * kc : kc;
                    sub.accumulate = v ? 1 : s->accumulate;
                }
                dnnl_engine_t eng;
                int owned;
                size_t scratch = 0;
                dnnl_primitive_t prim = sz_mm_get(&sub, &eng, &owned, &scratch);
                if (prim && owned) dnnl_primitive_destroy(prim);
                most = scratch > most ? scratch : most;
            }
        }
    return most ? (most + 63) & ~(size_t)63 : 0;   /* +63: the panel that follows stays aligned */
}

/* Tiles are visited with schedule(static), so a thread gets a contiguous run of
 * them and keeps its packed A rows / B columns while the block stays the same.
 * epi's hooks (may be NULL) run on the tile's thread around each tile's product. */
int sz_mm_tiled_epi(const sz_mm_shape *s, void *d, const void *a, const void *b,
                    const void *bias, const sz_mm_epi *epi)
{
    int64_t nm = (s->M + SZ_MM_TM - 1) / SZ_MM_TM, nn = (s->N + SZ_MM_TN - 1) / SZ_MM_TN;
    size_t ea = sz_esize(s->a_dt), eb = sz_esize(s->b_dt), ed = sz_esize(s->d_dt);
    size_t ebias = sz_esize(s->bias_dt);
    int plain = 0, nthr = omp_get_max_threads();
    /* Measured (AVX2 gemm:jit): an A read transposed (dweight = dout^T . inp) and
     * a row-major B whose row stride is a multiple of 2 KiB (C = 1024, 3072, ...)
     * run at half speed (cache-set conflicts); a contiguous copy of the tile's
     * rows of A / columns of B (rows padded to TN+16) restores full speed. On AVX-512
     * (brgemm, which copies A itself) packing A costs more than it saves: d12 dweight products
     * went from 210-235 to 260-310 GFLOP/s without it; packing B there is neutral. */
    int pack_a, pack_b;
    int64_t ldpb = SZ_MM_TN + 16;
    size_t abytes, bbytes;
    sz_mm_packing(s, &pack_a, &pack_b, &abytes, &bbytes);
    /* Column-major visit re-packs A once per column block, row-major re-packs B
     * once per row block: take the cheaper. */
    int widen = sz_mm_widens(s);
    int64_t kc = sz_mm_kchunk(s);
    int col_major = pack_b && (!pack_a || nn * s->M < nm * s->N);
    /* A widened panel lives behind the thread's oneDNN scratchpad in its kept buffer (sz_mm_scratch:
     * a fresh allocation per call page-faulted the lm head's 80 MB panel in every call: 280 against
     * 211 ms CPU time for its dinp, one thread); packed copies are allocated per call. */
    size_t per_call = abytes + (widen ? 0 : bbytes);
    char *scratch = NULL;
    int oom = 0;
    if (per_call && !(scratch = malloc(per_call * nthr))) return -1;
    if (scratch) sz_mm_count((int64_t)(per_call * nthr));
    /* Always a parallel region: omp_set_num_threads(1) inside it only changes
     * the region's own threads, never the caller's setting. */
#pragma omp parallel num_threads(nthr) reduction(| : plain, oom)
    {
        char *pa = scratch ? scratch + per_call * omp_get_thread_num() : NULL;
        char *pb = pa ? pa + abytes : NULL;
        int64_t have_a = -1, have_b = -1;
        omp_set_num_threads(1);
        if (widen) {
            size_t most = sz_mm_most_scratch(s, pack_a, pack_b);
            char *kept = sz_mm_scratch(most + bbytes);
            pb = kept ? kept + most : NULL;
            oom = !kept;
        }
        /* K chunks: a thread's run of tiles (the static schedule's contiguous share) is taken one
         * column block at a time; each chunk of the block's panel is widened once and multiplied
         * into all the block's row tiles in turn. */
        int64_t all = nm * nn, tid = omp_get_thread_num(), nth = omp_get_num_threads();
        for (int64_t g = kc && !oom ? all * tid / nth : all, hi = all * (tid + 1) / nth; g < hi;) {
            int64_t jb = col_major ? g / nm : g % nn, ge = g + 1, j0 = jb * SZ_MM_TN;
            while (ge < hi && (col_major ? ge / nm : ge % nn) == jb) ge++;
            for (int64_t c = 0, nch = s->K / kc; c < nch; c++) {
                int64_t k0 = c * kc, kl = c == nch - 1 ? s->K - k0 : kc;
                sz_mm_shape sub;
                sz_mm_sub(s, 0, j0, &sub);
                sz_mm_widen_b(s, j0, sub.N, k0, kl, b, NULL, (float *)pb);
                for (int64_t t = g; t < ge; t++) {
                    int64_t ib = col_major ? t % nm : t / nn, i0 = ib * SZ_MM_TM;
                    sz_mm_sub(s, i0, j0, &sub);
                    sz_mm_sub_packed(s, pack_a, pack_b, &sub);
                    sub.K = kl;
                    sub.accumulate = c ? 1 : s->accumulate;
                    if (c == 0 && epi && epi->before) epi->before(epi, i0, j0, sub.M, sub.N);
                    plain |= sz_mm_tile(&sub, (char *)d + (i0 * s->ldd + j0) * ed,
                                        (const char *)a + (i0 * s->a_sm + k0) * ea, pb, NULL);
                    if (c == nch - 1 && epi && epi->after) epi->after(epi, i0, j0, sub.M, sub.N);
                }
            }
            g = ge;
        }
#pragma omp for schedule(static)
        for (int64_t t = 0; t < nm * nn; t++) {
            if (oom || kc) continue;
            int64_t ib = col_major ? t % nm : t / nn, jb = col_major ? t / nm : t % nn;
            int64_t i0 = ib * SZ_MM_TM, j0 = jb * SZ_MM_TN;
            sz_mm_shape sub;
            sz_mm_sub(s, i0, j0, &sub);
            const void *ta = (const char *)a + i0 * s->a_sm * ea;
            const void *tb = (const char *)b + j0 * s->b_sn * eb;
            const void *tbias = bias ? (const char *)bias + j0 * ebias : NULL;
            sz_mm_sub_packed(s, pack_a, pack_b, &sub);
            if (pack_a) {
                if (have_a != ib) sz_mm_pack_a(s, i0, sub.M, a, pa);
                have_a = ib;
                ta = pa;
            }
            if (pack_b) {
                if (have_b != jb) {
                    if (widen) sz_mm_widen_b(s, j0, sub.N, 0, s->K, b, bias, (float *)pb);
                    else sz_mm_pack_b(s, j0, sub.N, ldpb, b, pb);
                }
                have_b = jb;
                tb = pb;
                if (widen && bias) tbias = (const float *)pb + sz_mm_panel_elems(s);
            }
            if (epi && epi->before) epi->before(epi, i0, j0, sub.M, sub.N);
            plain |= sz_mm_tile(&sub, (char *)d + (i0 * s->ldd + j0) * ed, ta, tb, tbias);
            if (epi && epi->after) epi->after(epi, i0, j0, sub.M, sub.N);
        }
    }
    if (scratch) sz_mm_count(-(int64_t)(per_call * nthr));
    free(scratch);
    return oom ? -1 : plain;
}

int sz_mm_tiled(const sz_mm_shape *s, void *d, const void *a, const void *b,
                const void *bias)
{
    return sz_mm_tiled_epi(s, d, a, b, bias, NULL);
}

size_t sz_k_matmul_shape_host_bytes(const sz_mm_shape *s, int nthr)
{
    int pack_a, pack_b;
    size_t abytes, bbytes, most = 0;
    sz_mm_packing(s, &pack_a, &pack_b, &abytes, &bbytes);
#pragma omp parallel num_threads(1)
    {
        omp_set_num_threads(1);
        most = sz_mm_most_scratch(s, pack_a, pack_b);
    }
    /* each thread's kept buffer grows to the largest scratchpad (+ widened panel) it ran, and stays;
     * the packed copies only during a call */
    size_t per_thread = most + (sz_mm_widens(s) ? bbytes : 0);
    return (per_thread + abytes + (sz_mm_widens(s) ? 0 : bbytes)) * (size_t)nthr;
}

int sz_mm_supported(const sz_mm_shape *s)
{
    int ok = 0;
#pragma omp parallel num_threads(1)
    {
        omp_set_num_threads(1);
        sz_mm_shape sub;
        dnnl_engine_t eng;
        int owned;
        size_t scratch;
        sz_mm_sub(s, 0, 0, &sub);
        dnnl_primitive_t prim = sz_mm_get(&sub, &eng, &owned, &scratch);
        ok = prim != NULL;
        if (prim && owned) dnnl_primitive_destroy(prim);
    }
    return ok;
}

void sz_mm_colsum(void *dbias, int dbias_dt, const void *dout, int dout_dt, int N, int OC)
{
    int nb = (OC + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((int64_t)N * OC >= SZ_PAR_MIN)
    for (int blk = 0; blk < nb; blk++) {
        float acc[SZ_COL_BLOCK];
        int o0 = blk * SZ_COL_BLOCK, w = OC - o0 < SZ_COL_BLOCK ? OC - o0 : SZ_COL_BLOCK;
        for (int j = 0; j < w; j++) acc[j] = sz_ld(dbias, dbias_dt, o0 + j);
        for (int n = 0; n < N; n++) {
            if (dout_dt == SZ_K_BF16) {
                const uint16_t *row = (const uint16_t *)dout + (size_t)n * OC + o0;
                for (int j = 0; j < w; j++) acc[j] += sz_bf16_to_f32_1(row[j]);
            } else {
                const float *row = (const float *)dout + (size_t)n * OC + o0;
                for (int j = 0; j < w; j++) acc[j] += row[j];
            }
        }
        for (int j = 0; j < w; j++) {
            if (dbias_dt == SZ_K_BF16) ((uint16_t *)dbias)[o0 + j] = sz_f32_to_bf16_1(acc[j]);
            else ((float *)dbias)[o0 + j] = acc[j];
        }
    }
}

/* ---- fp32 public API ---- */

static void sz_mm_init(sz_mm_shape *s, int64_t M, int64_t N, int64_t K, int dt)
{
    memset(s, 0, sizeof *s);
    s->M = M; s->N = N; s->K = K;
    s->a_dt = s->b_dt = s->d_dt = dt;
    s->bias_dt = -1;
}

void sz_mm_shape_fwd(sz_mm_shape *s, int N, int C, int OC, int in_dt, int out_dt, int has_bias)
{
    sz_mm_init(s, N, OC, C, in_dt);   /* out[N,OC] = inp[N,C] . (weight[OC,C] viewed as [C,OC]) */
    s->d_dt = out_dt;
    s->a_sm = C; s->a_sk = 1; s->b_sk = 1; s->b_sn = C; s->ldd = OC;
    if (has_bias) s->bias_dt = in_dt;
}

void sz_mm_shape_dinp(sz_mm_shape *s, int N, int C, int OC, int in_dt, int dinp_dt)
{
    sz_mm_init(s, N, C, OC, in_dt);   /* dinp[N,C] += dout[N,OC] . weight[OC,C] */
    s->d_dt = dinp_dt;
    s->a_sm = OC; s->a_sk = 1; s->b_sk = C; s->b_sn = 1; s->ldd = C; s->accumulate = 1;
}

void sz_mm_shape_weights(sz_mm_shape *s, int w_dt)
{
    s->b_dt = w_dt;
    if (s->bias_dt >= 0) s->bias_dt = w_dt;
}

int sz_k_matmul_fwd(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC)
{
    sz_mm_shape s;
    sz_mm_shape_fwd(&s, N, C, OC, SZ_K_F32, SZ_K_F32, bias != NULL);
    return sz_mm_tiled(&s, out, inp, weight, bias);
}

/* The shapes sz_k_matmul_fwd / _bwd_set (w_dt F32) or their bf16-weight twins (w_dt BF16) run. */
static void sz_mm_host_bytes(int N, int C, int OC, int nthr, int w_dt, size_t *scratch, size_t *pack)
{
    sz_mm_shape s[6];
    sz_mm_shape_fwd(&s[0], N, C, OC, SZ_K_F32, SZ_K_F32, 1);   /* the forward, with a bias and without */
    sz_mm_shape_weights(&s[0], w_dt);
    s[3] = s[0];
    s[3].bias_dt = -1;
    sz_mm_shape_dinp(&s[1], N, C, OC, SZ_K_F32, SZ_K_F32);   /* the backward: dinp, then dweight */
    sz_mm_shape_weights(&s[1], w_dt);
    sz_mm_init(&s[2], OC, C, N, SZ_K_F32);
    s[2].a_sm = 1; s[2].a_sk = OC; s[2].b_sk = C; s[2].b_sn = 1; s[2].ldd = C; s[2].accumulate = 1;
    s[4] = s[1];                             /* dinp set (sz_k_matmul_bwd_set) */
    s[4].accumulate = 0;
    s[5] = s[2];                             /* dweight set */
    s[5].accumulate = 0;
    size_t scratch_most = 0, pack_most = 0;
    for (int i = 0; i < 6; i++) {
        size_t sc, pk;
        sz_mm_shape_host_split(&s[i], nthr, &sc, &pk);
        /* the scratchpads persist (the largest of them), the packed tiles only during a call */
        scratch_most = sc > scratch_most ? sc : scratch_most;
        pack_most = pk > pack_most ? pk : pack_most;
    }
    *scratch = scratch_most;
    *pack = pack_most;
}

void sz_k_matmul_host_bytes(int N, int C, int OC, int nthr, size_t *scratch, size_t *pack)
{
    sz_mm_host_bytes(N, C, OC, nthr, SZ_K_F32, scratch, pack);
}

void sz_k_matmul_wbf16_host_bytes(int N, int C, int OC, int nthr, size_t *scratch, size_t *pack)
{
    sz_mm_host_bytes(N, C, OC, nthr, SZ_K_BF16, scratch, pack);
}

void sz_mm_shape_host_split(const sz_mm_shape *s, int nthr, size_t *scratch, size_t *pack)
{
    int pa, pb;
    size_t ab, bb, all = sz_k_matmul_shape_host_bytes(s, nthr);
    sz_mm_packing(s, &pa, &pb, &ab, &bb);
    *pack = (ab + (sz_mm_widens(s) ? 0 : bb)) * (size_t)nthr;   /* a widened panel is kept: scratch */
    *scratch = all - *pack;
}

int sz_k_matmul_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                    const float *inp, const float *weight, int N, int C, int OC)
{
    return sz_k_matmul_bwd_set(dinp, dweight, dbias, dout, inp, weight, N, C, OC, 0);
}

int sz_k_matmul_bwd_set(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, int N, int C, int OC, int set)
{
    sz_mm_shape s;
    int rc = 0, r;
    if (dinp) {      /* dinp[N,C] (+)= dout[N,OC] . weight[OC,C]; set: no sum post-op */
        sz_mm_shape_dinp(&s, N, C, OC, SZ_K_F32, SZ_K_F32);
        s.accumulate = !(set & SZ_K_SET_DINP);
        if ((r = sz_mm_tiled(&s, dinp, dout, weight, NULL)) < 0) return r;
        rc |= r;
    }
    if (dweight) {   /* dweight[OC,C] (+)= (dout[N,OC] viewed as [OC,N]) . inp[N,C]; set: no sum post-op */
        sz_mm_init(&s, OC, C, N, SZ_K_F32);
        s.a_sm = 1; s.a_sk = OC; s.b_sk = C; s.b_sn = 1; s.ldd = C; s.accumulate = !(set & SZ_K_SET_DW);
        if ((r = sz_mm_tiled(&s, dweight, dout, inp, NULL)) < 0) return r;
        rc |= r;
    }
    if (dbias && (set & SZ_K_SET_DB)) memset(dbias, 0, (size_t)OC * sizeof *dbias); /* the sums start at 0 */
    if (dbias) sz_mm_colsum(dbias, SZ_K_F32, dout, SZ_K_F32, N, OC);
    return rc;
}

/* ---- fp32 activations with bf16 weights (the emulated bf16 path): the weight's panels widened
 * tile by tile (sz_mm_widen_b), the bits of the fp32 kernels on the widened weight ---- */

int sz_k_matmul_fwd_wbf16(float *out, const float *inp, const uint16_t *weight, const uint16_t *bias,
                          int N, int C, int OC)
{
    sz_mm_shape s;
    sz_mm_shape_fwd(&s, N, C, OC, SZ_K_F32, SZ_K_F32, bias != NULL);
    sz_mm_shape_weights(&s, SZ_K_BF16);
    return sz_mm_tiled(&s, out, inp, weight, bias);
}

int sz_k_matmul_bwd_wbf16_set(float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const uint16_t *weight, int N, int C, int OC, int set)
{
    int rc = 0, r;
    if (dinp) {      /* dinp[N,C] (+)= dout[N,OC] . weight[OC,C]; set: no sum post-op */
        sz_mm_shape s;
        sz_mm_shape_dinp(&s, N, C, OC, SZ_K_F32, SZ_K_F32);
        sz_mm_shape_weights(&s, SZ_K_BF16);
        s.accumulate = !(set & SZ_K_SET_DINP);
        if ((r = sz_mm_tiled(&s, dinp, dout, weight, NULL)) < 0) return r;
        rc |= r;
    }
    if (dweight || dbias) {   /* no weight in them: the fp32 kernels' */
        if ((r = sz_k_matmul_bwd_set(NULL, dweight, dbias, dout, inp, NULL, N, C, OC,
                                     set & (SZ_K_SET_DW | SZ_K_SET_DB))) < 0) return r;
        rc |= r;
    }
    return rc;
}
