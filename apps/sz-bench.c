/* apps/sz-bench.c — training throughput of a bundled model (GPT-2 by default, or the LLaMA-style
 * model with --arch llama: the same presets d2, d6, d12 or L,H,C as sz-train --arch llama), as one
 * JSON object: tokens/s, step time, achieved
 * GFLOP/s, and in the same run the machine's own yardsticks: the fp32 FMA peak (a register-only
 * kernel on all of a node's cores, run by its first rank alone; summed over nodes), the bf16
 * dot-product (vdpbf16ps) peak where the CPU has one, and OpenBLAS sgemm 2048^3. Under mpirun with
 * --zero-stage it adds ZeRO's measured memory and communication beside the formulas, and the
 * transport's throughput (comm_gbps) beside plain MPI collectives on the same bytes (mpi_gbps), and
 * where the ranks span nodes the node count and the link's measured bandwidth (link_gbps, GB/s).
 *   sz-bench --model d12 --batch 4 --seq 64 --precision fp32 --steps 10 --json
 *   mpirun -np 2 sz-bench --model d6 --zero-stage 3 --json
 *   sz-bench --arch llama --model d12 --batch 4 --seq 64 --precision bf16 --json
 * Model FLOPs (flops_per_step, gflops, mfu) count the matrix products only, at 2 FLOPs per
 * multiply-add, backward = 2 x forward, of every rank's micro-batches: per token forward, GPT-2
 * 2·(12·L·C² + C·Vp) (QKV, attention projection, the 4C MLP's two matmuls, the tied head) and
 * LLaMA 2·(L·(4C² + 3·C·F) + C·V) (QKV, projection, SwiGLU's gate, up and down; no biases; the
 * untied head), plus causal attention's QKᵀ and AV, 2·L·T·C; embeddings, layernorm / RMSNorm,
 * RoPE, GELU / SiLU, softmax and the optimizer are not counted (gpt2_flops_per_step,
 * sz_llama_flops).
 * --optimizer adamw|sgd [--momentum M] as sz-train's: the optimizer's fp32 states count in
 * optimizer_bytes (what its tasks move) and model_state_bytes_formula.
 * Timings belong here, never in pass/fail tests. */
#define _GNU_SOURCE
#include <cblas.h>
#include <cpuid.h>
#include <oneapi/dnnl/dnnl.h>
#include <mpi.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <immintrin.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "arch.h"
#include "opts.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* FMA chains in registers only: named accumulators (not an array, which the compiler may keep in
 * memory) in groups of four, enough to hide the FMA latency on two FMA pipes, and no more than the
 * ISA's registers hold beside the two operands: 16 chains in AVX-512's 32 zmm registers, 12 in
 * AVX2's 16 ymm (16 there spill three chains to the stack, and the store-to-load round trip in
 * the loop then held the count to 0.56 of the peak on a Zen 3). Each starts from a different
 * value: chains that start equal are one chain to the compiler, which then does a fraction of the
 * counted work. Returns the flops done. */
#define FMA4(OP, o) \
    a##o##0 = OP(x, y, a##o##0); a##o##1 = OP(x, y, a##o##1); \
    a##o##2 = OP(x, y, a##o##2); a##o##3 = OP(x, y, a##o##3);
#define INIT4(vec, set1, o) \
    vec a##o##0 = set1(o##.00f), a##o##1 = set1(o##.01f), a##o##2 = set1(o##.02f), a##o##3 = set1(o##.03f);
#define SUM4(add, o) s = add(s, add(add(a##o##0, a##o##1), add(a##o##2, a##o##3)));
#define GROUPS3(M, ...) M(__VA_ARGS__, 1) M(__VA_ARGS__, 2) M(__VA_ARGS__, 3)
#define GROUPS4(M, ...) GROUPS3(M, __VA_ARGS__) M(__VA_ARGS__, 4)
#define FMA_KERNEL(name, isa, vec, set1, fmadd, add, lanes, groups)                                \
    __attribute__((target(isa), noinline)) static double name(long iters)                       \
    {                                                                                           \
        vec x = set1(0.5f), y = set1(0.25f), s = set1(0.0f);                                    \
        GROUPS##groups(INIT4, vec, set1)                                                        \
        for (long k = 0; k < iters; k++) {                                                      \
            GROUPS##groups(FMA4, fmadd)                                                         \
        }                                                                                       \
        GROUPS##groups(SUM4, add)                                                               \
        float out[lanes];                                                                       \
        memcpy(out, &s, sizeof out);                                                            \
        __asm__ volatile("" ::"x"(out[0]));                                                     \
        return (double)iters * 4 * groups * lanes * 2;                                          \
    }
FMA_KERNEL(fma_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16, 4)
FMA_KERNEL(fma_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8, 3)

/* The bf16 dot-product peak (AVX512_BF16 vdpbf16ps: 16 lanes x 2 products per instruction), in
 * fp32-equivalent flops, on sixteen chains as the AVX-512 fp32 kernel's; 0 where the CPU has no
 * such instruction. This is the ceiling of any bf16 matrix product that uses it (oneDNN's native
 * bf16 path). */
__attribute__((target("avx512f,avx512bf16"), noinline)) static double dpbf16_avx512(long iters)
{
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f00), y = (__m512bh)_mm512_set1_epi16(0x3e80);
    __m512 s = _mm512_set1_ps(0.0f);
#define DP(x, y, a) _mm512_dpbf16_ps(a, x, y)
    GROUPS4(INIT4, __m512, _mm512_set1_ps)
    for (long k = 0; k < iters; k++) {
        GROUPS4(FMA4, DP)
    }
#undef DP
    GROUPS4(SUM4, _mm512_add_ps)
    float out[16];
    memcpy(out, &s, sizeof out);
    __asm__ volatile("" ::"x"(out[0]));
    return (double)iters * 16 * 16 * 4;
}

/* Peak over `threads` threads: the best of 3 runs of ~0.2 s each. bf16: the dot-product peak. */
static double peak_gflops(int threads, int bf16)
{
    int avx512 = __builtin_cpu_supports("avx512f");
    if (bf16 && !(avx512 && __builtin_cpu_supports("avx512bf16")))
        return 0;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double flops = 0, t0 = now_s();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
        flops += bf16 ? dpbf16_avx512(30000000) : avx512 ? fma_avx512(60000000) : fma_avx2(160000000);
        double g = flops / (now_s() - t0) / 1e9;
        best = g > best ? g : best;
    }
    return best;
}

/* A barrier whose waiters sleep between tests (1 ms) instead of spinning on the cores. */
static void quiet_barrier(void)
{
    MPI_Request rq;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    while (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* The link between nodes where the ranks span several (MPI_Get_processor_name differs): after a
 * small exchange that opens the connection, rank 0 sends 4 messages of 8 MiB to the first rank on
 * another node, which answers when all arrived; bytes over that time, one way, in bytes/s (as
 * comm_bps counts). Every rank gets it, and the node count; 0 on one node. Run before StarPU
 * starts, on a communicator of its own. */
static double link_bps(int *nodes)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int rank, size, len;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    char *names = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME), me[MPI_MAX_PROCESSOR_NAME] = {0};
    MPI_Get_processor_name(me, &len);
    MPI_Allgather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, c);
    int peer = -1;
    *nodes = 0;
    for (int r = 0; r < size; r++) {
        int first = 1; /* the first rank of its node */
        for (int q = 0; q < r && first; q++)
            first = strcmp(names + (size_t)r * MPI_MAX_PROCESSOR_NAME, names + (size_t)q * MPI_MAX_PROCESSOR_NAME) != 0;
        *nodes += first;
        if (first && r > 0 && peer < 0)
            peer = r;
    }
    free(names);
    double bps = 0;
    if (peer > 0 && (rank == 0 || rank == peer)) {
        const int n = 8 << 20, reps = 4, other = rank == 0 ? peer : 0;
        char *sb = malloc((size_t)n), *rb = malloc((size_t)n);
        memset(sb, 1, (size_t)n);
        MPI_Sendrecv(sb, 4096, MPI_CHAR, other, 1, rb, 4096, MPI_CHAR, other, 1, c, MPI_STATUS_IGNORE);
        double t0 = now_s();
        for (int k = 0; k < reps; k++) /* rank 0 sends; the peer's empty reply says all arrived */
            if (rank == 0)
                MPI_Send(sb, n, MPI_CHAR, other, 2, c);
            else
                MPI_Recv(rb, n, MPI_CHAR, other, 2, c, MPI_STATUS_IGNORE);
        if (rank == 0)
            MPI_Recv(rb, 0, MPI_CHAR, other, 3, c, MPI_STATUS_IGNORE);
        else
            MPI_Send(sb, 0, MPI_CHAR, other, 3, c);
        bps = (double)n * reps / (now_s() - t0);
        free(sb);
        free(rb);
    }
    MPI_Bcast(&bps, 1, MPI_DOUBLE, 0, c);
    MPI_Comm_free(&c);
    return bps;
}

static double sgemm_gflops(void)
{
    const int n = 2048;
    float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b),
          *c = malloc((size_t)n * n * sizeof *c);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = 2.0 * n * n * n / (now_s() - t0) / 1e9;
        best = g > best ? g : best;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* oneDNN's matmul at n^3 on all cores (one whole-matrix primitive, its own threading): src and
 * weights of type dt (bf16 or f32), dst f32, default attributes, 1 warm-up then the best of 3.
 * impl gets the kernel's name (e.g. brg:avx512_core_amx_bf16). 0 when oneDNN has no kernel. */
static double onednn_matmul_gflops(dnnl_data_type_t dt, const char **impl)
{
    const int64_t n = 2048;
    dnnl_dims_t dims = {n, n};
#if DNNL_VERSION_MAJOR >= 3   /* oneDNN 3.x: descriptors are handles, freed below */
    dnnl_memory_desc_t a_md = NULL, b_md = NULL, c_md = NULL;
#define SZ_MD_TAG(md, dt, tag) dnnl_memory_desc_create_with_tag(&md, 2, dims, dt, tag)
#define SZ_MM_PD(pd, eng) dnnl_matmul_primitive_desc_create(&pd, eng, a_md, b_md, NULL, c_md, NULL)
#else                         /* 2.x: structs, and an operation descriptor first */
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_matmul_desc_t md;
#define SZ_MD_TAG(md, dt, tag) dnnl_memory_desc_init_by_tag(&md, 2, dims, dt, tag)
#define SZ_MM_PD(pd, eng) (dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md) != dnnl_success \
                           ? dnnl_runtime_error : dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL))
#endif
    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    double best = 0;
    *impl = "none";
    size_t esz = dt == dnnl_f32 ? 4 : 2;
    char *buf = malloc((size_t)(n * n) * (2 * esz + 4));
    if (!buf || dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success || dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) != dnnl_success)
        goto done;
    for (size_t i = 0; i < (size_t)(n * n) * 2 * esz; i++) /* small values of either type */
        buf[i] = (char)(i % 2 ? 0x3e : (i * 7) % 5);
    if (SZ_MD_TAG(a_md, dt, dnnl_ab) != dnnl_success || SZ_MD_TAG(b_md, dt, dnnl_ba) != dnnl_success ||
        SZ_MD_TAG(c_md, dnnl_f32, dnnl_ab) != dnnl_success ||
        SZ_MM_PD(pd, eng) != dnnl_success || dnnl_primitive_create(&prim, pd) != dnnl_success ||
        dnnl_memory_create(&ma, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), eng, buf) != dnnl_success ||
        dnnl_memory_create(&mb, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), eng,
                           buf + (size_t)(n * n) * esz) != dnnl_success ||
        dnnl_memory_create(&mc, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), eng,
                           buf + (size_t)(n * n) * 2 * esz) != dnnl_success)
        goto done;
#undef SZ_MD_TAG
#undef SZ_MM_PD
    const char *name = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name)
        *impl = strdup(name);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    for (int rep = -1; rep < 3; rep++) {
        double t0 = now_s();
        if (dnnl_primitive_execute(prim, stream, 3, args) != dnnl_success || dnnl_stream_wait(stream) != dnnl_success) {
            best = 0;
            break;
        }
        double g = 2.0 * n * n * n / (now_s() - t0) / 1e9;
        best = rep >= 0 && g > best ? g : best;
    }
done:
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (stream) dnnl_stream_destroy(stream);
    if (eng) dnnl_engine_destroy(eng);
#if DNNL_VERSION_MAJOR >= 3
    if (a_md) dnnl_memory_desc_destroy(a_md);
    if (b_md) dnnl_memory_desc_destroy(b_md);
    if (c_md) dnnl_memory_desc_destroy(c_md);
#endif
    free(buf);
    return best;
}

/* AMX (tiles and bf16) as CPUID leaf 7 reports it: EDX bits 24 (AMX-TILE) and 22 (AMX-BF16). */
static int has_amx(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    return (d >> 24 & 1) && (d >> 22 & 1);
}

/* STREAM's triad a = b + s c on all cores, 3 x 8M doubles (192 MB), counted as STREAM does (24 bytes
 * per element: no write-allocate), best of 5 after one warm-up; GB/s. */
static double stream_triad_gbps(int threads)
{
    const size_t n = (size_t)8 << 20;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c), best = 0;
    if (!a || !b || !c) {
        free(a); free(b); free(c);
        return 0;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; } /* first touch by the threads that use them */
    for (int rep = -1; rep < 5; rep++) {
        double t0 = now_s();
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
        double g = 24.0 * n / (now_s() - t0) / 1e9;
        best = rep >= 0 && g > best ? g : best;
    }
    __asm__ volatile("" ::"r"(a[n / 2]));
    free(a); free(b); free(c);
    return best;
}

/* The options that take a value (parsed strictly in main: apps/common/opts.c). */
static int is_value_option(const char *a)
{
    static const char *const names[] = {"--model", "--arch", "--precision", "--bf16-compute", "--prefetch-bytes",
                                         "--optimizer", "--momentum", "--batch", "--seq", "--steps", "--warmup",
                                         "--vocab", "--zero-stage", "--micro-batches"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!strcmp(a, names[k]))
            return 1;
    return 0;
}

static void usage(const char *a, const char *v)
{
    fprintf(stderr, "usage: sz-bench [--arch gpt2|llama] [--model d2|d6|d12|L,H,C] [--batch B] [--seq T] [--steps N] [--warmup W]\n"
                    "                [--precision fp32|bf16|fp16] [--bf16-compute auto|native|emulated] [--vocab V] [--zero-stage S] [--micro-batches M]\n"
                    "                [--checkpoint] [--no-arenas] [--prefetch-bytes B] [--optimizer adamw|sgd]\n"
                    "                [--momentum M] [--json]   (--config, --stage, --ckpt: the same as --model, --zero-stage, --checkpoint)\n"
                    "                (got '%s' '%s')\n", a, v ? v : "");
}

int main(int argc, char **argv)
{
    const char *model = "d12", *precision = "fp32", *bf16_compute = "auto", *arch = "gpt2";
    int B = 4, T = 64, steps = 10, warmup = 2, json = 0, vocab = 50257, stage = 0, micro = 1, ckpt = 0, arenas = 1;
    double prefetch = 0;
    sz_optimizer optimizer = SZ_OPTIMIZER_ADAMW;
    float momentum = 0.0f;
    int momentum_set = 0;
    sz_opt_prog("sz-bench");
    static const char *const mine[] = {"--model", "--zero-stage", "--checkpoint", NULL};
    sz_opt_spellings(argc, argv, mine); /* sz-train's and sz-estimate's spellings: --config, --stage, --ckpt */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--checkpoint")) { ckpt = 1; continue; }
        if (!strcmp(a, "--no-arenas")) { arenas = 0; continue; }
        if (!is_value_option(a)) {
            usage(a, v);
            return 2;
        }
        if (!v) { fprintf(stderr, "sz-bench: %s needs a value\n", a); return 2; }
        i++;
        int r = 0;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--arch")) arch = v;
        else if (!strcmp(a, "--precision")) precision = v;
        else if (!strcmp(a, "--bf16-compute")) bf16_compute = v;
        else if (!strcmp(a, "--prefetch-bytes")) r = sz_opt_bytes(a, v, &prefetch);
        else if (!strcmp(a, "--optimizer")) r = sz_opt_optimizer(a, v, &optimizer);
        else if (!strcmp(a, "--momentum")) { momentum_set = 1; r = sz_opt_real(a, v, 0, 0, 1, 1, &momentum); }
        else if (!strcmp(a, "--batch")) r = sz_opt_int(a, v, 1, 1 << 20, &B);
        else if (!strcmp(a, "--seq")) r = sz_opt_int(a, v, 1, 1 << 20, &T);
        else if (!strcmp(a, "--steps")) r = sz_opt_int(a, v, 1, INT_MAX, &steps);
        else if (!strcmp(a, "--warmup")) r = sz_opt_int(a, v, 0, INT_MAX, &warmup);
        else if (!strcmp(a, "--vocab")) r = sz_opt_int(a, v, 1, INT_MAX, &vocab); /* the model refuses what it cannot pad */
        else if (!strcmp(a, "--zero-stage")) r = sz_opt_int(a, v, 0, 3, &stage);
        else if (!strcmp(a, "--micro-batches")) r = sz_opt_int(a, v, 1, 1 << 20, &micro);
        if (r != 0)
            return 2;
    }
    if (momentum_set && optimizer != SZ_OPTIMIZER_SGD) {
        fprintf(stderr, "sz-bench: --momentum %g: only --optimizer sgd has a momentum\n", (double)momentum);
        return 2;
    }
    sz_precision prec;
    if (sz_precision_parse(precision, &prec) != SZ_OK) {
        fprintf(stderr, "sz-bench: --precision %s: must be fp32, bf16 or fp16\n", precision);
        return 2;
    }
    sz_bf16_compute bf16c;
    if (sz_bf16_compute_parse(bf16_compute, &bf16c) != SZ_OK) {
        fprintf(stderr, "sz-bench: --bf16-compute %s: must be auto, native or emulated\n", bf16_compute);
        return 2;
    }
    int mixed = prec != SZ_PRECISION_FP32;
    char err[512];
    sz_arch_config cfg;
    sz_arch_kind kind;
    if (sz_arch_parse(arch, &kind) != 0) {
        fprintf(stderr, "sz-bench: --arch %s: must be gpt2 or llama\n", arch);
        return 2;
    }
    if (sz_arch_config_from_string(&cfg, kind, model, vocab, T > 1024 ? T : 1024, err, sizeof err) != SZ_OK) {
        fprintf(stderr, "sz-bench: %s\n", err);
        return 2;
    }
    /* The yardsticks run before StarPU starts (an unpatched StarPU keeps one idle worker spinning).
     * Each node's first rank measures them on all of the node's cores while the node's other
     * ranks wait without spinning; ranks measuring at once on shared cores disturbed each other
     * (198 to 416 GFLOP/s for the same 2-core node). Summed over nodes below. MPI is started here
     * for that, and the runtime then uses it. */
    int mpi_ours = 0, provided = 0, local_rank = 0;
    MPI_Initialized(&mpi_ours);
    mpi_ours = !mpi_ours;
    if (mpi_ours && MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "sz-bench: MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    const char *isa = __builtin_cpu_supports("avx512f") ? "avx512" : "avx2";
    double yard[6] = {0, 0, 0, 0, 0, 0};
    const char *bf16_impl = "none", *f32_impl = "none";
    if (local_rank == 0) { /* mpirun may have bound us to one core: measure on all of them */
        int online = (int)sysconf(_SC_NPROCESSORS_ONLN);
        cpu_set_t bound, all;
        sched_getaffinity(0, sizeof bound, &bound);
        CPU_ZERO(&all);
        for (int c = 0; c < online; c++)
            CPU_SET(c, &all);
        sched_setaffinity(0, sizeof all, &all);
        openblas_set_num_threads(online);
        yard[0] = peak_gflops(online, 0);
        yard[1] = sgemm_gflops();
        yard[2] = peak_gflops(online, 1);
        yard[3] = onednn_matmul_gflops(dnnl_bf16, &bf16_impl);
        yard[4] = onednn_matmul_gflops(dnnl_f32, &f32_impl);
        yard[5] = stream_triad_gbps(online);
        sched_setaffinity(0, sizeof bound, &bound);
    }
    quiet_barrier();
    int nodes = 1;
    double link = link_bps(&nodes); /* (0 on one node) */
    sz_context *ctx = NULL;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK) {
        fprintf(stderr, "sz-bench: cannot start the runtime\n");
        return 1;
    }
    sz_topology topo;
    sz_context_topology(ctx, &topo);
    int nd = sz_context_world_size(ctx), rank = sz_context_rank(ctx);
    sz_context_sum(ctx, yard, 6); /* the node's (or cluster's) peak and sgemm: all nodes together */
    double peak = yard[0], sgemm = yard[1], bf16_peak = yard[2];
    sz_zero_config zd;
    sz_zero_config_defaults(&zd); /* fp16's loss scaling: DeepSpeed's defaults */
    sz_zero_config zero = {.stage = stage, .micro_batches = micro, .checkpoint = ckpt, .arenas = arenas,
                           .prefetch_bytes = (int64_t)prefetch, .optimizer = optimizer, .momentum = momentum,
                           .precision = prec, .bf16_compute = bf16c, .loss_scaling = zd.loss_scaling};

    sz_arch_model *g = NULL;
    if (sz_arch_create(&g, ctx, &cfg, B, T, &zero, err, sizeof err) != SZ_OK || sz_arch_init_random(g, 1) != SZ_OK) {
        fprintf(stderr, "sz-bench: %s\n", err);
        sz_context_free(ctx);
        if (mpi_ours)
            MPI_Finalize();
        return 1;
    }
    int *in = malloc((size_t)B * T * sizeof *in), *tg = malloc((size_t)B * T * sizeof *tg);
    for (int i = 0; i < B * T; i++) {
        in[i] = (i * 7919 + rank * 31) % sz_arch_vocab(&cfg);
        tg[i] = (i * 104729 + 1 + rank) % sz_arch_vocab(&cfg);
    }
    sz_arch_set_batch(g, in, tg);
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    float loss = 0;
    double total = 0, best = 0;
    long faults = 0, max_faults = 0; /* minor page faults of the timed steps (this process) */
    double cpu_total = 0;            /* CPU seconds (user + system, every thread) of the timed steps */
    for (int s = 1; s <= warmup + steps; s++) {
        double t0 = now_s();
        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        for (int mb = 0; mb < micro; mb++)
            if (sz_model_forward_backward(sz_arch_model_of(g), &loss) != SZ_OK) {
                fprintf(stderr, "sz-bench: step %d failed\n", s);
                return 1;
            }
        if (sz_model_update(sz_arch_model_of(g), &tc, s) != SZ_OK) {
            fprintf(stderr, "sz-bench: step %d update failed\n", s);
            return 1;
        }
        getrusage(RUSAGE_SELF, &ru1);
        if (s > warmup) {
            long f = ru1.ru_minflt - ru0.ru_minflt + ru1.ru_majflt - ru0.ru_majflt;
            faults += f;
            max_faults = f > max_faults ? f : max_faults;
            cpu_total += (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                         (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) * 1e-6;
            double t = now_s() - t0;
            total += t;
            best = best == 0 || t < best ? t : best;
        }
        if (!json && rank == 0)
            fprintf(stderr, "step %d: %.1f ms, loss %.4f, %ld page faults\n", s, (now_s() - t0) * 1e3, loss,
                    ru1.ru_minflt - ru0.ru_minflt + ru1.ru_majflt - ru0.ru_majflt);
    }
    double step_s = total / (steps > 0 ? steps : 1), flops = sz_arch_flops(g) * micro * nd; /* (the count: top of file) */
    /* GPUs: each rank's CUDA worker's device and its dense bf16 tensor-core peak, summed over the
     * ranks (gpu[0]: ranks with a GPU, gpu[1]: their peaks in TFLOP/s); absent on CPU-only runs. A
     * rank's StarPU allocations on its GPU at the end (total - available of its memory node). */
    sz_gpu_info gi;
    int have_gpu = sz_context_gpu_info(ctx, &gi) == SZ_OK;
    double gpu[2] = {have_gpu ? 1.0 : 0.0, have_gpu ? gi.bf16_peak_tflops : 0.0};
    sz_context_sum(ctx, gpu, 2);
    double gpu_used = have_gpu ? (double)gi.starpu_used_bytes : 0;
    /* ZeRO figures: every rank's memory report, and MPI itself on the same bytes */
    sz_memory_report *reps = calloc((size_t)nd, sizeof *reps);
    sz_model_memory_report_all(sz_arch_model_of(g), rank == 0 ? reps : NULL);
    int nunits = sz_model_nunits(sz_arch_model_of(g));
    int64_t *sizes = malloc((size_t)nunits * sizeof *sizes);
    sz_model_unit_sizes(sz_arch_model_of(g), sizes);
    double mpi_bps = 0;
    sz_context_mpi_baseline(ctx, sizes, nunits, 3, &mpi_bps);
    free(sizes);
    if (rank == 0) { /* one JSON object, printed by rank 0 */
        int64_t ms = 0, peak_b = 0, sent = 0;
        double comm_bps = 0;
        for (int r = 0; r < nd; r++) {
            ms = reps[r].model_state_bytes > ms ? reps[r].model_state_bytes : ms;
            peak_b = reps[r].peak_bytes > peak_b ? reps[r].peak_bytes : peak_b;
            sent = reps[r].comm_bytes_sent > sent ? reps[r].comm_bytes_sent : sent;
            double bps = reps[r].comm_seconds > 0 ? reps[r].comm_bytes_received / reps[r].comm_seconds : 0;
            comm_bps = r == 0 || bps < comm_bps ? bps : comm_bps; /* the slowest rank's */
        }
        double psi = (double)reps[0].nparams;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "arch", sz_arch_name(kind));
        cJSON_AddStringToObject(o, "model", model);
        cJSON_AddStringToObject(o, "precision", precision);
        cJSON_AddStringToObject(o, "bf16_path", sz_model_bf16_path(sz_arch_model_of(g)));
        if (zero.precision == SZ_PRECISION_BF16) /* the units read bf16 parameters, or fp32 working copies */
            cJSON_AddStringToObject(o, "bf16_params",
                                    sz_model_precision(sz_arch_model_of(g))->params_direct ? "direct" : "working copies");
        if (zero.precision == SZ_PRECISION_FP16) { /* skipped steps run no update: a faster step */
            sz_loss_scaler ls;
            sz_model_loss_scaler(sz_arch_model_of(g), &ls);
            cJSON_AddNumberToObject(o, "loss_scale", ls.scale);
            cJSON_AddNumberToObject(o, "skipped_steps", (double)ls.skipped);
        }
        cJSON_AddStringToObject(o, "optimizer", sz_optimizer_name(zero.optimizer));
        cJSON_AddNumberToObject(o, "momentum", zero.momentum);
        cJSON_AddNumberToObject(o, "optimizer_state_floats", sz_optimizer_states(zero.optimizer, zero.momentum));
        cJSON_AddNumberToObject(o, "batch", B);
        cJSON_AddNumberToObject(o, "seq", T);
        cJSON_AddNumberToObject(o, "steps", steps);
        cJSON_AddNumberToObject(o, "params", (double)sz_model_nparams(sz_arch_model_of(g)));
        cJSON_AddNumberToObject(o, "cores", topo.ncores);
        cJSON_AddNumberToObject(o, "step_ms", step_s * 1e3);
        cJSON_AddNumberToObject(o, "step_ms_min", best * 1e3); /* the VM is noisy: the best step too */
        /* rank 0's CPU time (user + system, all its threads) per timed step: on cores shared with
         * other jobs it moves far less than the wall time */
        cJSON_AddNumberToObject(o, "cpu_ms_per_step", steps > 0 ? cpu_total / steps * 1e3 : 0);
        cJSON_AddNumberToObject(o, "tokens_per_s", (double)nd * micro * B * T / step_s); /* all ranks */
        cJSON_AddNumberToObject(o, "gflops", flops / step_s / 1e9);
        cJSON_AddNumberToObject(o, "flops_per_step", flops);
        cJSON_AddNumberToObject(o, "fma_peak_gflops", peak);
        cJSON_AddStringToObject(o, "fma_isa", isa);
        cJSON_AddNumberToObject(o, "sgemm_gflops", sgemm);
        cJSON_AddNumberToObject(o, "gflops_over_peak", flops / step_s / 1e9 / peak);
        cJSON_AddNumberToObject(o, "bf16_dot_peak_gflops", bf16_peak);
        cJSON_AddNumberToObject(o, "bf16_matmul_gflops", yard[3]); /* oneDNN bf16 2048^3, all cores */
        cJSON_AddStringToObject(o, "bf16_matmul_impl", bf16_impl);
        cJSON_AddNumberToObject(o, "f32_matmul_gflops", yard[4]);  /* oneDNN f32, the same shape */
        cJSON_AddStringToObject(o, "f32_matmul_impl", f32_impl);
        cJSON_AddBoolToObject(o, "amx", has_amx());
        cJSON_AddNumberToObject(o, "stream_gbps", yard[5]);
        /* the last step's split by the tasks' own timings (zero policy): matmul tasks, and the other
         * compute tasks (norms, attention, GELU, softmax, optimizer, conversions, zeroing) */
        cJSON_AddNumberToObject(o, "matmul_ms", reps[0].matmul_task_s * 1e3);
        cJSON_AddNumberToObject(o, "other_ms", (reps[0].compute_task_s - reps[0].matmul_task_s) * 1e3);
        /* within other_ms: the fp32 <-> bf16 conversions (mixed precision's working copies and
         * gradient rounding) and the zeroing tasks, summed over tasks */
        cJSON_AddNumberToObject(o, "convert_ms", reps[0].convert_task_s * 1e3);
        cJSON_AddNumberToObject(o, "zero_ms", reps[0].zero_task_s * 1e3);
        /* every codelet's share of the last step (rank 0, its tasks' own timings, summed over tasks;
         * communication tasks included, which may run beside compute) and its task count */
        cJSON *cms = cJSON_AddObjectToObject(o, "codelet_ms"), *cnt = cJSON_AddObjectToObject(o, "codelet_tasks");
        /* attention's tasks (forward, recompute and backward) and their causal FLOPs: per task and
         * (b, h) pair, every product over the T (T + 1) / 2 (query, key) pairs a query row meets,
         * 2 hs FLOPs each: 2 products forward (QK^T, PV), 5 backward (the scores again, dP, dQ, dK,
         * dV); summed over heads 2 C T (T + 1) B and 5 C T (T + 1) B */
        int C = kind == SZ_ARCH_GPT2 ? cfg.gpt2.channels : cfg.llama.channels;
        double att_s = 0, att_flops = 0, per = (double)B * C * T * (T + 1.0);
        for (int c = 0; c < reps[0].ncodelets; c++) {
            const char *name = reps[0].codelets[c].name;
            cJSON_AddNumberToObject(cms, name, reps[0].codelets[c].seconds * 1e3);
            cJSON_AddNumberToObject(cnt, name, reps[0].codelets[c].tasks);
            int fwd = !strcmp(name, "attention_fwd"), bwd = !strcmp(name, "attention_bwd");
            if (fwd || bwd) {
                att_s += reps[0].codelets[c].seconds;
                att_flops += (fwd ? 2 : 5) * per * reps[0].codelets[c].tasks;
            }
        }
        cJSON_AddNumberToObject(o, "attention_ms", att_s * 1e3);
        cJSON_AddNumberToObject(o, "attention_gflops", att_s > 0 ? att_flops / att_s / 1e9 : 0);
        /* the kernels' choice: AMX tiles on the native bf16 path where the CPU has AMX (attention_amx.c) */
        cJSON_AddStringToObject(o, "attention_impl",
                                !strcmp(sz_model_bf16_path(sz_arch_model_of(g)), "native") && has_amx() ? "amx"
                                                                                                         : "rowwise");
        /* the optimizer's tasks (last step, rank 0) against the bytes they must move: per element of
         * the rank's owned range, fp32: p read and written, the gradient read, each fp32 state read
         * and written (AdamW: 12 + 2 x 8 = 28 B); mixed: the master read and written, the bf16
         * gradient read and the bf16 param written, the states the same (AdamW: 28 B); counted as
         * STREAM counts (no write-allocate), so optimizer_gbps compares with stream_gbps */
        double owned = stage == 0 ? (double)reps[0].nparams_padded : (double)reps[0].nparams_padded / nd;
        int nstates = sz_optimizer_states(zero.optimizer, zero.momentum);
        double opt_bytes = (12.0 + 8.0 * (nstates > 0 ? nstates : 0)) * owned, opt_s = reps[0].optimizer_task_s;
        cJSON_AddNumberToObject(o, "optimizer_ms", opt_s * 1e3);
        cJSON_AddNumberToObject(o, "optimizer_bytes", opt_bytes);
        cJSON_AddNumberToObject(o, "optimizer_gbps", opt_s > 0 ? opt_bytes / opt_s / 1e9 : 0);
        cJSON_AddNumberToObject(o, "optimizer_over_stream", opt_s > 0 && yard[5] > 0 ? opt_s / (opt_bytes / (yard[5] * 1e9)) : 0);
        /* rank 0's page faults (minor + major) per timed step, and the most in one step */
        cJSON_AddNumberToObject(o, "page_faults_per_step", steps > 0 ? (double)faults / steps : 0);
        cJSON_AddNumberToObject(o, "page_faults_max_step", (double)max_faults);
        cJSON_AddNumberToObject(o, "last_loss", loss);
        cJSON_AddNumberToObject(o, "nd", nd);
        cJSON_AddNumberToObject(o, "zero_stage", stage);
        cJSON_AddNumberToObject(o, "micro_batches", micro);
        cJSON_AddNumberToObject(o, "checkpoint", ckpt);
        cJSON_AddNumberToObject(o, "activation_bytes", (double)reps[0].bytes[SZ_MEM_ACTIVATIONS]);
        cJSON_AddNumberToObject(o, "model_state_bytes", (double)ms);
        cJSON_AddNumberToObject(o, "model_state_bytes_formula", sz_zero_model_state_bytes_opt(stage, psi, nd, mixed, nstates));
        cJSON_AddNumberToObject(o, "peak_bytes", (double)peak_b);
        cJSON_AddNumberToObject(o, "comm_bytes_sent", (double)sent);
        cJSON_AddNumberToObject(o, "comm_bytes_formula", sz_zero_comm_bytes_mb(stage, psi, nd, mixed, micro));
        cJSON_AddNumberToObject(o, "comm_seconds", reps[0].comm_seconds);
        cJSON_AddNumberToObject(o, "comm_gbps", comm_bps / 1e9);
        if (nodes > 1) { /* ranks on several nodes: the link between two of them, measured (link_bps) */
            cJSON_AddNumberToObject(o, "nodes", nodes);
            cJSON_AddNumberToObject(o, "link_gbps", link / 1e9);
        }
        cJSON_AddNumberToObject(o, "mpi_gbps", mpi_bps / 1e9);
        cJSON_AddNumberToObject(o, "comm_over_mpi", mpi_bps > 0 ? comm_bps / mpi_bps : 0);
        cJSON_AddNumberToObject(o, "overlap", reps[0].overlap);
        cJSON_AddNumberToObject(o, "comm_task_s", reps[0].comm_task_s);
        cJSON_AddNumberToObject(o, "compute_task_s", reps[0].compute_task_s);
        cJSON_AddNumberToObject(o, "predicted_peak_bytes", (double)reps[0].predicted_peak_bytes);
        cJSON_AddNumberToObject(o, "arenas", arenas);
        if (reps[0].pool_active) { /* M_D: the device pool's fragmentation at its peak (rank 0) */
            cJSON_AddNumberToObject(o, "pool_footprint_bytes", (double)reps[0].pool.footprint);
            cJSON_AddNumberToObject(o, "pool_free_at_peak_bytes", (double)reps[0].pool.free_at_peak);
            cJSON_AddNumberToObject(o, "pool_largest_free_at_peak_bytes", (double)reps[0].pool.largest_free_at_peak);
        }
        sz_runtime_info info;
        sz_context_runtime_info(ctx, &info);
        cJSON_AddStringToObject(o, "sched_policy", info.sched_policy);
        cJSON_AddStringToObject(o, "collectives", info.shared_collectives ? "shm" : "mpi");
        if (gpu[0] > 0) { /* only when GPUs ran: a CPU run has no such figures (not zero) */
            cJSON_AddNumberToObject(o, "gpus", gpu[0]);
            cJSON_AddStringToObject(o, "gpu_name", have_gpu ? gi.name : "?");
            cJSON_AddNumberToObject(o, "gpu_sms", have_gpu ? gi.sm_count : 0);
            cJSON_AddNumberToObject(o, "gpu_clock_mhz", have_gpu ? gi.clock_khz / 1e3 : 0);
            cJSON_AddNumberToObject(o, "gpu_bf16_flops_per_clock_sm", have_gpu ? gi.bf16_flops_per_clock_sm : 0);
            /* StarPU's CUDA pipeline: tasks a CUDA worker queues on its stream ahead (2, StarPU's
             * default, which deps/starpu-1.3.10-cuda-pipeline.patch keeps with blocking drivers) */
            const char *pipe = getenv("STARPU_CUDA_PIPELINE");
            cJSON_AddNumberToObject(o, "cuda_pipeline", pipe && *pipe ? atoi(pipe) : 2);
            cJSON_AddNumberToObject(o, "gpu_used_bytes", gpu_used); /* rank 0's StarPU allocations at the end */
            cJSON_AddNumberToObject(o, "device_peak_bytes", (double)reps[0].device_peak_bytes);
            /* measured (tasks/devwatch.c): StarPU's allocations on rank 0's GPU at their most, and
             * cudaMemGetInfo's figure after a step (every process on the device) */
            cJSON_AddNumberToObject(o, "device_measured_peak_bytes", (double)reps[0].starpu_node_peak_bytes);
            cJSON_AddNumberToObject(o, "gpu_cuda_used_bytes", (double)reps[0].gpu_cuda_used_bytes);
            cJSON_AddNumberToObject(o, "gpu_cuda_used_at_start_bytes", (double)reps[0].gpu_cuda_used_at_start_bytes);
            if (gpu[1] > 0) { /* the architecture is in the table (util.cu) */
                cJSON_AddNumberToObject(o, "gpu_peak_tflops", gpu[1]); /* all ranks' GPUs together */
                cJSON_AddNumberToObject(o, "mfu", flops / step_s / (gpu[1] * 1e12));
            }
        }
        char *text = json ? cJSON_PrintUnformatted(o) : cJSON_Print(o);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(o);
    }
    free(reps);
    free(in);
    free(tg);
    sz_arch_free(g);
    sz_context_free(ctx);
    if (mpi_ours)
        MPI_Finalize();
    return 0;
}
