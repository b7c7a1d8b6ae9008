/* tests/cuda_emu/sz_cuda_emu.cpp — the runtime of the host CUDA emulation that runs
 * tests/test_cuda_kernels.c (every CUDA kernel against its CPU twin) without a GPU: the kernels of
 * codelets/kernels/cuda, compiled by g++ from the same source nvcc compiles (sz_cuda_emu.h,
 * launch.sed), the CUDA runtime calls they and the test make, and cublasGemmEx.
 *
 * A launch runs its blocks one after another (SZ_CUDA_EMU_ORDER=reverse: last block first, and the
 * threads of each pass in reverse order). A block's threads are fibers with stacks of their own,
 * switched by a few instructions (x86-64); each runs until it reaches a barrier or returns. Rules,
 * the hardware's: __syncthreads releases when every thread that has not returned has arrived;
 * __syncwarp and the shuffles need a full mask and the whole warp present and not returned (else
 * an error: undefined on the GPU); a barrier no thread can pass is reported as a deadlock (a hang on
 * the GPU). Shared memory, device memory from cudaMalloc* and the dynamic shared memory start as
 * 0xFF bytes (NaN), so a read before a write shows. Launch limits are checked (1024 threads, grid y/z
 * 65535, dynamic shared memory above 48 KB only after cudaFuncSetAttribute, at most the sm_90 opt-in
 * 232448 bytes); cudaMemcpy / cudaMemset / cublasGemmEx ranges must lie inside one allocation. Built
 * with AddressSanitizer (tests/CMakeLists.txt), out-of-bounds accesses of the kernels are caught.
 * The device is one made-up sm_90 GPU (132 SMs). cublasGemmEx: column-major, its argument checks,
 * fp32 products summed in k order, bf16 stored rounded to nearest even.
 *
 * What it cannot check: the real WMMA fragments and tensor cores, the GPU's memory model (blocks and
 * threads do not run concurrently), cuBLAS's own algorithms (only its contract), FMA contraction as
 * nvcc does it, speed, NCCL, StarPU's CUDA workers. Any emulation error makes the program exit 1 at
 * the end, whatever the test said. */
#include "sz_cuda_emu.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <map>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SZ_EMU_ASAN 1
#endif

sz_emu_thread *sz_emu_cur;
sz_emu_block sz_emu_blk;

/* ---------------------------------------------------------------- errors */

static int g_errors;
static const char *g_kernel = "(host)";
static int g_launches;
static std::map<const void *, std::pair<std::string, int>> *g_kernels; /* kernel -> name, launches */

static void emu_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda-emu: error in %s", g_kernel);
    if (sz_emu_cur)
        fprintf(stderr, " block (%u,%u,%u) thread (%u,%u,%u)", sz_emu_blk.bid.x, sz_emu_blk.bid.y, sz_emu_blk.bid.z,
                sz_emu_cur->tid.x, sz_emu_cur->tid.y, sz_emu_cur->tid.z);
    fprintf(stderr, ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    g_errors++;
}

static void report(void)
{
    fflush(stdout);
    fprintf(stderr, "cuda-emu: %d launches of %zu kernels, %d emulation errors\n", g_launches, g_kernels->size(),
            g_errors);
    if (getenv("SZ_CUDA_EMU_VERBOSE"))
        for (auto &k : *g_kernels)
            fprintf(stderr, "cuda-emu:   %6d  %s (%p)\n", k.second.second, k.second.first.c_str(), k.first);
    if (g_errors)
        _exit(1);
}

/* ---------------------------------------------------------------- fibers */

extern "C" void sz_emu_switch(void **save_sp, void *to_sp);
__asm__(".text\n"
        ".globl sz_emu_switch\n"
        ".type sz_emu_switch,@function\n"
        "sz_emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size sz_emu_switch, .-sz_emu_switch\n");

enum { F_RUN, F_BLOCK, F_WARP, F_DONE };
enum { W_SYNC, W_SHFL };
struct fiber : sz_emu_thread {
    void *sp;
    char *stack;
    int state, wkind;
    unsigned nshfl;
    uint64_t slot[2];
    void *fake; /* ASan's fake stack of this fiber while switched out */
};

static const size_t STACK = 256 << 10, GUARD = 4096;
static std::vector<fiber> F;
static void *main_sp;
static sz_emu_body g_body;
static void *g_ctx;
#ifdef SZ_EMU_ASAN
static const void *main_bottom;
static size_t main_size;
static void *main_fake;
#endif

static void to_main(fiber *f, bool done)
{
#ifdef SZ_EMU_ASAN
    __sanitizer_start_switch_fiber(done ? nullptr : &f->fake, main_bottom, main_size);
#endif
    (void)done;
    sz_emu_switch(&f->sp, main_sp);
#ifdef SZ_EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake, &main_bottom, &main_size);
#endif
}

static unsigned g_n;                  /* threads in the block */
static unsigned g_done, g_atblock;     /* of them returned, at __syncthreads */
static unsigned g_wwait[32], g_wdone[32]; /* per warp: lanes at a warp operation, returned */

static void fiber_entry(void)
{
#ifdef SZ_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &main_bottom, &main_size);
#endif
    fiber *f = (fiber *)sz_emu_cur;
    g_body(g_ctx);
    f->state = F_DONE;
    g_done++;
    g_wdone[(f - F.data()) >> 5]++;
    to_main(f, true);
    abort(); /* never resumed */
}

static void fiber_start(fiber *f)
{
    if (!f->stack) {
        char *m = (char *)mmap(nullptr, STACK + GUARD, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            perror("cuda-emu: mmap of a fiber stack");
            abort();
        }
        mprotect(m, GUARD, PROT_NONE); /* an overflow faults */
        f->stack = m + GUARD;
    }
    void **sp = (void **)(f->stack + STACK);
    *--sp = nullptr;                   /* the entry's return address: none (rsp % 16 == 8 at entry) */
    *--sp = (void *)fiber_entry;       /* sz_emu_switch's ret goes there */
    for (int i = 0; i < 6; i++)
        *--sp = nullptr;               /* rbp rbx r12-r15 */
    f->sp = sp;
    f->state = F_RUN;
    f->nshfl = 0;
}

static void to_fiber(fiber *f)
{
    sz_emu_cur = f;
#ifdef SZ_EMU_ASAN
    __sanitizer_start_switch_fiber(&main_fake, f->stack, STACK);
#endif
    sz_emu_switch(&main_sp, f->sp);
#ifdef SZ_EMU_ASAN
    __sanitizer_finish_switch_fiber(main_fake, nullptr, nullptr);
#endif
    sz_emu_cur = nullptr;
}

/* ---------------------------------------------------------------- barriers */

void __syncthreads(void)
{
    fiber *f = (fiber *)sz_emu_cur;
    f->state = F_BLOCK;
    g_atblock++;
    to_main(f, false);
}

static void warp_wait(fiber *f, unsigned mask, int kind)
{
    unsigned lin = (unsigned)(f - F.data());
    if (mask != 0xFFFFFFFFu)
        emu_error("warp operation with mask 0x%08x: only full masks are emulated", mask);
    if ((lin | 31u) >= g_n)
        emu_error("full-mask warp operation in a partial warp (%u threads in the block)", g_n);
    f->state = F_WARP;
    f->wkind = kind;
    g_wwait[lin >> 5]++;
    to_main(f, false);
}

void __syncwarp(unsigned mask)
{
    warp_wait((fiber *)sz_emu_cur, mask, W_SYNC);
}

uint64_t sz_emu_shfl(unsigned mask, uint64_t v, int xor_mask, int width)
{
    fiber *f = (fiber *)sz_emu_cur;
    if (width != 32 || xor_mask < 0 || xor_mask > 31) {
        emu_error("shuffle width %d, lane mask %d: not emulated", width, xor_mask);
        return v;
    }
    unsigned s = f->nshfl & 1;
    f->slot[s] = v;
    warp_wait(f, mask, W_SHFL);
    unsigned lin = (unsigned)(f - F.data()), src = (lin & ~31u) | ((lin & 31u) ^ (unsigned)xor_mask);
    uint64_t r = ~(uint64_t)0;
    if (src < g_n) {
        fiber *g = &F[src];
        if (g->nshfl < f->nshfl || (g->nshfl == f->nshfl && g->state == F_DONE))
            emu_error("shuffle from lane %u, which did not take part", src & 31u);
        r = g->slot[s];
    }
    f->nshfl++;
    return r;
}

/* One block: every thread from the start to its return. */
static void run_block(bool reverse)
{
    unsigned n = g_n, nw = (n + 31) / 32;
    for (unsigned i = 0; i < n; i++)
        fiber_start(&F[i]);
    g_done = g_atblock = 0;
    memset(g_wwait, 0, sizeof g_wwait);
    memset(g_wdone, 0, sizeof g_wdone);
    for (;;) {
        for (unsigned j = 0; j < n; j++) {
            fiber *f = &F[reverse ? n - 1 - j : j];
            if (f->state == F_RUN)
                to_fiber(f);
        }
        if (g_done == n)
            return;
        bool released = false;
        unsigned atwarp = 0;
        for (unsigned w = 0; w < nw; w++) {
            unsigned lanes = w + 1 < nw ? 32 : n - 32 * w, wait = g_wwait[w], exited = g_wdone[w];
            atwarp += wait;
            if (!wait || wait + exited != lanes)
                continue; /* nobody waiting, or lanes still at __syncthreads */
            if (exited)
                emu_error("warp %u: %u lanes at a full-mask warp operation after %u others returned", w, wait,
                          exited);
            unsigned kinds = 0;
            for (unsigned i = 32 * w; i < 32 * w + lanes; i++)
                if (F[i].state == F_WARP) {
                    kinds |= 1u << F[i].wkind;
                    F[i].state = F_RUN;
                }
            if (kinds == 3)
                emu_error("warp %u: lanes at __syncwarp and at a shuffle at once", w);
            g_wwait[w] = 0;
            atwarp -= wait;
            released = true;
        }
        if (!released && g_atblock && !atwarp) {
            for (unsigned i = 0; i < n; i++)
                if (F[i].state == F_BLOCK)
                    F[i].state = F_RUN;
            g_atblock = 0;
            released = true;
        }
        if (!released) {
            emu_error("deadlock (a hang on the GPU): %u threads at __syncthreads, %u at warp operations, %u returned",
                      g_atblock, atwarp, g_done);
            for (unsigned w = 0; w < nw; w++) {
                fprintf(stderr, "cuda-emu:   warp %u (R run, B __syncthreads, W warp op, D returned):", w);
                for (unsigned i = 32 * w; i < n && i < 32 * w + 32; i++)
                    fputc("RBWD"[F[i].state], stderr);
                fputc('\n', stderr);
            }
            report();
            _exit(1);
        }
    }
}

/* ---------------------------------------------------------------- shared memory */

static unsigned g_block_gen;
static std::map<void *, unsigned> *g_shared;
static unsigned char *g_dyn;

void sz_emu_shared(void *p, size_t bytes)
{
    unsigned &gen = (*g_shared)[p];
    if (gen != g_block_gen) {
        gen = g_block_gen;
        memset(p, 0xFF, bytes);
    }
}

void *sz_emu_dyn_smem(void) { return g_dyn; }

/* ---------------------------------------------------------------- launches */

static cudaError_t g_last = cudaSuccess;
static std::map<const void *, int> *g_dyn_limit; /* cudaFuncSetAttribute's maximum dynamic smem */
static bool g_reverse;                           /* SZ_CUDA_EMU_ORDER=reverse */
static const int OPTIN_SMEM = 232448;

void sz_emu_run(const char *name, const void *kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                sz_emu_body body, void *ctx)
{
    (void)s;
    g_kernel = name;
    g_launches++;
    auto &kn = (*g_kernels)[kernel];
    kn.first = name;
    kn.second++;
    size_t nt = (size_t)block.x * block.y * block.z;
    auto lim = g_dyn_limit->find(kernel);
    size_t smax = lim == g_dyn_limit->end() ? 49152 : (size_t)lim->second;
    const char *bad = nullptr;
    if (!nt || !grid.x || !grid.y || !grid.z)
        bad = "an empty grid or block";
    else if (nt > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
        bad = "more than 1024 threads per block (or block y > 1024, z > 64)";
    else if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        bad = "grid y or z above 65535";
    else if (smem > smax)
        bad = "more dynamic shared memory than the kernel's limit (48 KB without cudaFuncSetAttribute)";
    if (bad) {
        emu_error("launch <<<(%u,%u,%u), (%u,%u,%u), %zu>>>: %s", grid.x, grid.y, grid.z, block.x, block.y, block.z,
                  smem, bad);
        g_last = cudaErrorInvalidConfiguration;
        g_kernel = "(host)";
        return;
    }
    if (F.size() < nt)
        F.resize(nt);
    g_n = (unsigned)nt;
    for (unsigned i = 0; i < nt; i++)
        F[i].tid = make_uint3(i % block.x, i / block.x % block.y, i / (block.x * block.y));
    void *dyn = nullptr;
    if (posix_memalign(&dyn, 128, smem ? smem : 1))
        abort();
    g_dyn = (unsigned char *)dyn;
    g_body = body;
    g_ctx = ctx;
    sz_emu_blk.bdim = block;
    sz_emu_blk.gdim = grid;
    size_t nb = (size_t)grid.x * grid.y * grid.z;
    for (size_t j = 0; j < nb; j++) {
        size_t b = g_reverse ? nb - 1 - j : j;
        sz_emu_blk.bid = make_uint3((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                                    (unsigned)(b / ((size_t)grid.x * grid.y)));
        g_block_gen++;
        memset(g_dyn, 0xFF, smem);
        run_block(g_reverse);
    }
    free(dyn);
    g_dyn = nullptr;
    g_kernel = "(host)";
}

/* before main: the tables (on the heap: they must outlive the report at exit), the order, the report */
__attribute__((constructor)) static void emu_init(void)
{
    g_kernels = new std::map<const void *, std::pair<std::string, int>>;
    g_shared = new std::map<void *, unsigned>;
    g_dyn_limit = new std::map<const void *, int>;
    const char *order = getenv("SZ_CUDA_EMU_ORDER");
    g_reverse = order && !strcmp(order, "reverse");
    atexit(report);
}

/* ---------------------------------------------------------------- the runtime API */

static std::map<uintptr_t, size_t> g_allocs; /* device allocations: base -> bytes */
static size_t g_allocated;
static const size_t TOTAL_MEM = (size_t)141 << 30;

/* [p, p + n) inside one device allocation */
static bool in_device(const void *p, size_t n)
{
    auto it = g_allocs.upper_bound((uintptr_t)p);
    if (it == g_allocs.begin())
        return false;
    --it;
    return (uintptr_t)p + n <= it->first + it->second;
}

static cudaError_t fail(cudaError_t e, const char *what)
{
    emu_error("%s", what);
    return g_last = e;
}

extern "C" {

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_last; }
const char *cudaGetErrorString(cudaError_t e) { return e ? "an error (cuda-emu)" : "no error"; }

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : (g_last = cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int *d)
{
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    if (d)
        return g_last = cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuda-emu (host emulation of an sm_90 GPU)");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->totalGlobalMem = TOTAL_MEM;
    p->sharedMemPerBlock = 49152;
    p->sharedMemPerBlockOptin = OPTIN_SMEM;
    p->maxThreadsPerBlock = 1024;
    p->warpSize = 32;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d)
{
    if (d)
        return g_last = cudaErrorInvalidDevice;
    switch (a) {
    case cudaDevAttrClockRate: *v = 1980000; break; /* kHz */
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = OPTIN_SMEM; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 49152; break;
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    default: return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute not emulated");
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    if (d)
        return g_last = cudaErrorInvalidDevice;
    snprintf(buf, (size_t)len, "0000:00:00.0");
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    *free_b = TOTAL_MEM - g_allocated;
    *total = TOTAL_MEM;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute a, int v)
{
    if (a != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute not emulated");
    if (v < 0 || v > OPTIN_SMEM)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: dynamic shared memory above the opt-in limit");
    (*g_dyn_limit)[func] = v;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    if (!*p)
        return g_last = cudaErrorMemoryAllocation;
    memset(*p, 0xFF, n); /* uninitialised device memory */
    g_allocs[(uintptr_t)*p] = n;
    g_allocated += n;
    return cudaSuccess;
}
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end())
        return fail(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
    g_allocated -= it->second;
    g_allocs.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return cudaFree(p); }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
    bool dd = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
    bool sd = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
    if (n && ((dd && !in_device(dst, n)) || (sd && !in_device(src, n))))
        return fail(cudaErrorInvalidValue, "cudaMemcpy: a device range outside every allocation");
    if (n)
        memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
    if (n && !in_device(p, n))
        return fail(cudaErrorInvalidValue, "cudaMemset: a range outside every allocation");
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { return cudaMemset(p, v, n); }

/* Streams and events: everything is synchronous; events hold the host time of their record. */
cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    *s = (cudaStream_t)malloc(1);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    free((void *)s);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = (cudaEvent_t)calloc(1, sizeof(double));
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free((void *)e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    *(double *)(void *)e = t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)(*(double *)(void *)b - *(double *)(void *)a);
    return cudaSuccess;
}

/* ---------------------------------------------------------------- cuBLAS */

struct cublasContext {
    cudaStream_t s;
    cublasPointerMode_t pm;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = new cublasContext{nullptr, CUBLAS_POINTER_MODE_HOST};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    h->s = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t m)
{
    h->pm = m;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

static float mat_get(const void *p, cudaDataType t, size_t i)
{
    return t == CUDA_R_16BF ? __bfloat162float(((const __nv_bfloat16 *)p)[i]) : ((const float *)p)[i];
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType At, int lda, const void *B, cudaDataType Bt,
                            int ldb, const void *beta, void *C, cudaDataType Ct, int ldc, cublasComputeType_t ct,
                            cublasGemmAlgo_t)
{
    g_kernel = "cublasGemmEx";
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m; /* A as stored: ar x ac */
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    bool types = ct == CUBLAS_COMPUTE_32F && At == Bt && (At == CUDA_R_32F || At == CUDA_R_16BF) &&
                 (Ct == CUDA_R_32F || (Ct == CUDA_R_16BF && At == CUDA_R_16BF));
    size_t ea = At == CUDA_R_16BF ? 2 : 4, ec = Ct == CUDA_R_16BF ? 2 : 4;
    if (!h || h->pm != CUBLAS_POINTER_MODE_HOST) {
        emu_error("no handle, or device pointer mode (not emulated)");
        st = CUBLAS_STATUS_NOT_INITIALIZED;
    } else if (m < 0 || n < 0 || k < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
               ldc < (m > 1 ? m : 1) || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
               (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T)) {
        emu_error("invalid value: m %d n %d k %d lda %d ldb %d ldc %d", m, n, k, lda, ldb, ldc);
        st = CUBLAS_STATUS_INVALID_VALUE;
    } else if (!types) {
        emu_error("type combination A %d B %d C %d compute %d not supported", (int)At, (int)Bt, (int)Ct, (int)ct);
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    } else if (m && n &&
               ((k && (!in_device(A, ((size_t)(ac - 1) * lda + ar) * ea) ||
                       !in_device(B, ((size_t)(bc - 1) * ldb + br) * ea))) ||
                !in_device(C, ((size_t)(n - 1) * ldc + m) * ec))) {
        emu_error("an operand outside its allocation (m %d n %d k %d)", m, n, k);
        st = CUBLAS_STATUS_INVALID_VALUE;
    } else {
        float al = *(const float *)alpha, be = *(const float *)beta;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float s = 0.0f;
                for (int l = 0; l < k; l++) {
                    float a = mat_get(A, At, ta == CUBLAS_OP_N ? (size_t)l * lda + i : (size_t)i * lda + l);
                    float b = mat_get(B, Bt, tb == CUBLAS_OP_N ? (size_t)j * ldb + l : (size_t)l * ldb + j);
                    s += a * b;
                }
                size_t ci = (size_t)j * ldc + i;
                float r = al * s;
                if (be != 0.0f)
                    r += be * mat_get(C, Ct, ci); /* C not read when beta is 0 */
                if (Ct == CUDA_R_16BF)
                    ((__nv_bfloat16 *)C)[ci] = __float2bfloat16_rn(r);
                else
                    ((float *)C)[ci] = r;
            }
    }
    g_kernel = "(host)";
    return st;
}

} /* extern "C" */
