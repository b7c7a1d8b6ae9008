/* tests/cuda_emu/sz_cuda_emu.cpp — the runtime of the host CUDA emulation that runs
 * tests/test_cuda_kernels.c (every CUDA kernel against its CPU twin) without a GPU: the kernels of
 * kernels/cuda, compiled by g++ from the same source nvcc compiles (sz_cuda_emu.h,
 * launch.sed), the CUDA runtime calls they and the test make, and cublasGemmEx.
 *
 * A launch runs its blocks one after another (SZ_CUDA_EMU_ORDER=reverse: last block first, and the
 * threads of each pass in reverse order). SZ_CUDA_EMU_BLOCKS=ends runs only a launch's first and
 * last block and a GEMM's first and last column, and no memset: the results mean nothing, but
 * every launch's configuration, every range and the ends of every index space are checked at
 * shapes too large to run whole (the GPU check's `shapes` part). A block's threads are fibers
 * with stacks of their own, switched by a few instructions (x86-64); each runs until it reaches a
 * barrier or returns. Rules, the hardware's: __syncthreads releases when every thread that has
 * not returned has arrived;
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
 * Built as libcudart for the engine's emulated build (-DSZ_CUDA_EMULATION=ON, CudaEmu.cmake), it
 * is StarPU's CUDA runtime too: every entry point holds one lock, and the device memory is a region
 * the host cannot touch between the emulation's calls (SZ_CUDA_EMU_HEAP).
 * Streams are deferred (SZ_CUDA_EMU_STREAMS, at the streams below): work runs when something waits
 * for it, so a missing wait shows.
 * What it cannot check: the real WMMA fragments and tensor cores, the GPU's memory model (blocks and
 * threads do not run concurrently, nor do two streams' operations), cuBLAS's own algorithms (only its
 * contract), FMA contraction as nvcc does it, speed. Any emulation error makes the program exit 1 at
 * the end, whatever the test said. */
#include "sz_cuda_emu.h"
#include "sz_cuda_emu_rt.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
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
static bool g_deferred;           /* SZ_CUDA_EMU_STREAMS (the streams below) */
static bool g_ends;               /* SZ_CUDA_EMU_BLOCKS=ends */
static long g_later, g_notready; /* stream operations run after their call returned; queries answered not ready */
static long g_pageable;           /* copies with a pageable host side (a GPU's would block the caller) */
static double g_pageable_bytes;   /* and their bytes */
static std::map<const void *, std::pair<std::string, int>> *g_kernels; /* kernel -> name, launches */

static void emu_verror(const char *fmt, va_list ap)
{
    fprintf(stderr, "cuda-emu: error in %s", g_kernel);
    if (sz_emu_cur)
        fprintf(stderr, " block (%u,%u,%u) thread (%u,%u,%u)", sz_emu_blk.bid.x, sz_emu_blk.bid.y, sz_emu_blk.bid.z,
                sz_emu_cur->tid.x, sz_emu_cur->tid.y, sz_emu_cur->tid.z);
    fprintf(stderr, ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    g_errors++;
}

void sz_emu_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emu_verror(fmt, ap);
    va_end(ap);
}

void sz_emu_set_site(const char *what) { g_kernel = what ? what : "(host)"; }
bool sz_emu_ends(void) { return g_ends; }

static void report(void)
{
    fflush(stdout);
    fprintf(stderr,
            "cuda-emu: %d launches of %zu kernels; %ld stream operations run after their call returned, %ld queries "
            "answered not ready (streams %s); %d emulation errors; %ld copies of %.1f MB with pageable host memory\n",
            g_launches, g_kernels->size(), g_later, g_notready, g_deferred ? "deferred" : "sync", g_errors, g_pageable,
            g_pageable_bytes / 1e6);
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
static const std::function<void()> *g_body; /* the running launch's */
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
    (*g_body)();
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
        sz_emu_error("warp operation with mask 0x%08x: only full masks are emulated", mask);
    if ((lin | 31u) >= g_n)
        sz_emu_error("full-mask warp operation in a partial warp (%u threads in the block)", g_n);
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
        sz_emu_error("shuffle width %d, lane mask %d: not emulated", width, xor_mask);
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
            sz_emu_error("shuffle from lane %u, which did not take part", src & 31u);
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
                sz_emu_error("warp %u: %u lanes at a full-mask warp operation after %u others returned", w, wait,
                          exited);
            unsigned kinds = 0;
            for (unsigned i = 32 * w; i < 32 * w + lanes; i++)
                if (F[i].state == F_WARP) {
                    kinds |= 1u << F[i].wkind;
                    F[i].state = F_RUN;
                }
            if (kinds == 3)
                sz_emu_error("warp %u: lanes at __syncwarp and at a shuffle at once", w);
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
            sz_emu_error("deadlock (a hang on the GPU): %u threads at __syncthreads, %u at warp operations, %u returned",
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

static thread_local cudaError_t g_last = cudaSuccess; /* per host thread, as cudaGetLastError's */
static std::map<const void *, int> *g_dyn_limit; /* cudaFuncSetAttribute's maximum dynamic smem */
static bool g_reverse;                           /* SZ_CUDA_EMU_ORDER=reverse */
static const int OPTIN_SMEM = 232448;

/* One launch's blocks, one after another */
static void run_launch(const char *name, dim3 grid, dim3 block, size_t smem, const std::function<void()> &body)
{
    sz_emu_device open;
    g_kernel = name;
    size_t nt = (size_t)block.x * block.y * block.z;
    if (F.size() < nt)
        F.resize(nt);
    g_n = (unsigned)nt;
    for (unsigned i = 0; i < nt; i++)
        F[i].tid = make_uint3(i % block.x, i / block.x % block.y, i / (block.x * block.y));
    void *dyn = nullptr;
    if (posix_memalign(&dyn, 128, smem ? smem : 1))
        abort();
    g_dyn = (unsigned char *)dyn;
    g_body = &body;
    sz_emu_blk.bdim = block;
    sz_emu_blk.gdim = grid;
    size_t nb = (size_t)grid.x * grid.y * grid.z;
    for (size_t j = 0; j < nb; j++) {
        if (g_ends && j && j + 1 < nb)
            j = nb - 1; /* SZ_CUDA_EMU_BLOCKS=ends: the first and the last block */
        size_t b = g_reverse ? nb - 1 - j : j;
        sz_emu_blk.bid = make_uint3((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                                    (unsigned)(b / ((size_t)grid.x * grid.y)));
        g_block_gen++;
        memset(g_dyn, 0xFF, smem);
        run_block(g_reverse);
    }
    free(dyn);
    g_dyn = nullptr;
    g_body = nullptr;
    g_kernel = "(host)";
}

/* A launch: its configuration checked now (an error is the launch's, as cudaGetLastError's), its
 * blocks run in the stream's order */
void sz_emu_run(const char *name, const void *kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                std::function<void()> body)
{
    sz_emu_device open;
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
        sz_emu_set_site(name);
        sz_emu_error("launch <<<(%u,%u,%u), (%u,%u,%u), %zu>>>: %s", grid.x, grid.y, grid.z, block.x, block.y, block.z,
                  smem, bad);
        sz_emu_set_site(nullptr);
        g_last = cudaErrorInvalidConfiguration;
        return;
    }
    sz_emu_enqueue(s, [name, grid, block, smem, body = std::move(body)] { run_launch(name, grid, block, smem, body); });
}


/* ---------------------------------------------------------------- device memory */

/* The lock of every entry point (StarPU's threads call the runtime at once; a launch holds it
 * throughout, so one block runs at a time in the whole process). */
static std::recursive_mutex g_mu;
#define EMU_LOCK std::lock_guard<std::recursive_mutex> emu_lock_(g_mu)

static std::map<uintptr_t, size_t> *g_allocs; /* device allocations: base -> bytes (made in emu_init) */
static size_t g_allocated;
static std::map<uintptr_t, size_t> *g_pinned; /* page-locked host memory: cudaHostAlloc's and cudaHostRegister's */

#ifdef SZ_CUDA_EMU_HEAP
/* The engine build: device memory is one reserved region (SZ_CUDA_EMU_MEM_MB, default 16384 MB),
 * first fit, 256-byte aligned, which only the emulation's own calls can touch (sz_emu_device opens
 * it; closed, it is PROT_NONE): StarPU's or the library's host code reading or writing a device
 * pointer faults there, as on a GPU. Each opening and closing is an mprotect of every page used
 * so far, which at gigabytes costs a lot of system time: SZ_CUDA_EMU_PROTECT=0 leaves it open. */
static char *g_base;
static size_t g_cap, g_top;                /* reserved, high-water mark (bytes from g_base) */
static std::map<size_t, size_t> *g_free;   /* offset -> bytes */
static int g_open;
static bool g_protect; /* SZ_CUDA_EMU_PROTECT (default 1) */

static size_t page_up(size_t n) { return (n + 4095) & ~(size_t)4095; }

static void heap_init(void)
{
    const char *e = getenv("SZ_CUDA_EMU_MEM_MB");
    g_cap = (size_t)(e && atol(e) > 0 ? atol(e) : 16384) << 20;
    void *m = mmap(nullptr, g_cap, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        perror("cuda-emu: reserving the device memory (SZ_CUDA_EMU_MEM_MB)");
        abort();
    }
    g_base = (char *)m;
    g_free = new std::map<size_t, size_t>;
    (*g_free)[0] = g_cap;
    const char *pr = getenv("SZ_CUDA_EMU_PROTECT");
    g_protect = !pr || strcmp(pr, "0");
}

static void *dev_alloc(size_t n)
{
    n = (n + 255) & ~(size_t)255;
    for (auto it = g_free->begin(); it != g_free->end(); ++it) {
        if (it->second < n)
            continue;
        size_t off = it->first, rest = it->second - n;
        g_free->erase(it);
        if (rest)
            (*g_free)[off + n] = rest;
        if (off + n > g_top) {
            g_top = off + n;
            mprotect(g_base, page_up(g_top), PROT_READ | PROT_WRITE); /* (the device is open here) */
        }
        return g_base + off;
    }
    return nullptr;
}

static void dev_release(void *p, size_t n)
{
    size_t off = (size_t)((char *)p - g_base);
    n = (n + 255) & ~(size_t)255;
    auto next = g_free->lower_bound(off);
    if (next != g_free->end() && off + n == next->first) {
        n += next->second;
        next = g_free->erase(next);
    }
    if (next != g_free->begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            prev->second += n;
            return;
        }
    }
    (*g_free)[off] = n;
}

sz_emu_device::sz_emu_device()
{
    g_mu.lock();
    if (!g_open++ && g_top && g_protect)
        mprotect(g_base, page_up(g_top), PROT_READ | PROT_WRITE);
}
sz_emu_device::~sz_emu_device()
{
    if (!--g_open && g_top && g_protect)
        mprotect(g_base, page_up(g_top), PROT_NONE);
    g_mu.unlock();
}
#else
/* The kernel test: malloc, where AddressSanitizer sees a kernel's overrun. */
static const size_t g_cap = (size_t)141 << 30;
static void heap_init(void) {}
static void *dev_alloc(size_t n) { return malloc(n ? n : 1); }
static void dev_release(void *p, size_t) { free(p); }
sz_emu_device::sz_emu_device() { g_mu.lock(); }
sz_emu_device::~sz_emu_device() { g_mu.unlock(); }
#endif

/* [p, p + n) inside one of the ranges (base -> bytes) */
static bool in_ranges(const std::map<uintptr_t, size_t> &r, const void *p, size_t n)
{
    auto it = r.upper_bound((uintptr_t)p);
    if (it == r.begin())
        return false;
    --it;
    return (uintptr_t)p + n <= it->first + it->second;
}

bool sz_emu_in_device(const void *p, size_t n)
{
    EMU_LOCK;
    return in_ranges(*g_allocs, p, n);
}

/* p lies in a device allocation at all (a host pointer must not) */
static bool any_device(const void *p) { return sz_emu_in_device(p, 1); }

/* [p, p + n) lies in page-locked host memory */
static bool pinned(const void *p, size_t n) { return in_ranges(*g_pinned, p, n); }

/* ---------------------------------------------------------------- streams */

/* SZ_CUDA_EMU_STREAMS=deferred (the default): what is given to a stream (kernels, asynchronous
 * copies and memsets, cuBLAS calls, cudaStreamWaitEvent) runs only when something waits for it:
 * cudaStreamSynchronize, cudaEventSynchronize, cudaEventQuery (whose first call on an unfinished
 * event runs the work and still answers cudaErrorNotReady), another stream's wait reached,
 * cudaDeviceSynchronize, cudaFree / cudaFreeHost, and on the default stream (legacy semantics)
 * cudaMemcpy / cudaMemset, which run at once after the blocking streams' work (StarPU's streams
 * are non-blocking). So host code that reads a result before it waits reads what was there before,
 * work put on another stream than the one the caller waits for has not run, and StarPU's
 * non-asynchronous codelets that leave work on their stream fail its check. Copies as CUDA's:
 * from pageable host memory the source is read at the call, into pageable host memory the call
 * returns when done; with page-locked memory both sides are touched when the copy runs.
 * SZ_CUDA_EMU_STREAMS=sync: every call does its work before it returns. */
struct emu_stream {
    bool blocking;
    uint64_t issued, done; /* operations given, run */
    std::deque<std::function<void()>> q;
};
static std::vector<emu_stream *> *g_streams; /* live ones */

static emu_stream *stream_of(cudaStream_t s)
{
    return s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread ? nullptr : (emu_stream *)(void *)s;
}

/* the stream's operations up to the seq-th (under the lock) */
static void run_to(emu_stream *s, uint64_t seq)
{
    EMU_LOCK;
    while (s->done < seq && !s->q.empty()) {
        std::function<void()> op = std::move(s->q.front());
        s->q.pop_front();
        op();
        s->done++;
    }
}
static void run_all(bool blocking_only)
{
    EMU_LOCK;
    for (size_t i = 0; i < g_streams->size(); i++) /* (an operation may not add streams) */
        if (!blocking_only || (*g_streams)[i]->blocking)
            run_to((*g_streams)[i], (*g_streams)[i]->issued);
}

void sz_emu_flush(cudaStream_t cs)
{
    EMU_LOCK; /* (s->issued read under it: another thread may be adding to s) */
    emu_stream *s = stream_of(cs);
    if (s)
        run_to(s, s->issued);
    else
        run_all(true);
}

void sz_emu_enqueue(cudaStream_t cs, std::function<void()> op)
{
    EMU_LOCK;
    emu_stream *s = stream_of(cs);
    if (s && g_deferred) {
        s->q.push_back(std::move(op));
        s->issued++;
        g_later++;
        return;
    }
    if (!s)
        run_all(true);
    op();
}

/* An event: where in which stream it was last recorded, and the host time that point ran at. Its
 * state outlives cudaEventDestroy while a record of it is still to run. */
struct emu_event_state {
    emu_stream *s;
    uint64_t seq;
    unsigned gen; /* records so far */
    double ms;
};
struct emu_event {
    std::shared_ptr<emu_event_state> st;
};
static emu_event_state *ev(cudaEvent_t e) { return ((emu_event *)(void *)e)->st.get(); }
static bool ev_done(const emu_event_state *st) { return !st->s || st->s->done >= st->seq; }
static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* before main: the tables (on the heap: they must outlive the report at exit), the order, the
 * device memory, the report */
__attribute__((constructor)) static void emu_init(void)
{
    g_kernels = new std::map<const void *, std::pair<std::string, int>>;
    g_shared = new std::map<void *, unsigned>;
    g_dyn_limit = new std::map<const void *, int>;
    const char *order = getenv("SZ_CUDA_EMU_ORDER");
    g_reverse = order && !strcmp(order, "reverse");
    const char *blocks = getenv("SZ_CUDA_EMU_BLOCKS");
    g_ends = blocks && !strcmp(blocks, "ends");
    g_allocs = new std::map<uintptr_t, size_t>;
    g_pinned = new std::map<uintptr_t, size_t>;
    g_streams = new std::vector<emu_stream *>;
    const char *st = getenv("SZ_CUDA_EMU_STREAMS");
    g_deferred = !st || strcmp(st, "sync");
    heap_init();
    atexit(report);
}

static cudaError_t fail(cudaError_t e, const char *what, ...) __attribute__((format(printf, 2, 3)));
static cudaError_t fail(cudaError_t e, const char *what, ...)
{
    va_list ap;
    va_start(ap, what);
    emu_verror(what, ap);
    va_end(ap);
    return g_last = e;
}

/* ---------------------------------------------------------------- the runtime API */

extern "C" {

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_last; }
const char *cudaGetErrorString(cudaError_t e) { return e ? "an error (cuda-emu)" : "no error"; }
const char *cudaGetErrorName(cudaError_t e) { return e ? "cudaErrorCudaEmu" : "cudaSuccess"; }
cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

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
cudaError_t cudaDeviceSynchronize(void)
{
    run_all(false);
    return cudaSuccess;
}
cudaError_t cudaDeviceReset(void) { return cudaDeviceSynchronize(); }
cudaError_t cudaDeviceCanAccessPeer(int *can, int, int)
{
    *can = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceEnablePeerAccess(int, unsigned)
{
    return fail(cudaErrorInvalidDevice, "cudaDeviceEnablePeerAccess: one emulated device, no peers");
}

/* The emulated GPU's PCI bus: SZ_CUDA_EMU_PCI_BUS (default 0; "rank": the process's local MPI rank),
 * so that ranks on one host, each emulating its device 0, can share one GPU or have their own */
static int pci_bus(void)
{
    const char *e = getenv("SZ_CUDA_EMU_PCI_BUS");
    if (e && !strcmp(e, "rank"))
        e = getenv("OMPI_COMM_WORLD_LOCAL_RANK") ? getenv("OMPI_COMM_WORLD_LOCAL_RANK") : getenv("PMI_RANK");
    return e ? atoi(e) & 0xFF : 0;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    if (d)
        return g_last = cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuda-emu (host emulation of an sm_90 GPU)");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->totalGlobalMem = g_cap;
    p->sharedMemPerBlock = 49152;
    p->sharedMemPerBlockOptin = OPTIN_SMEM;
    p->maxThreadsPerBlock = 1024;
    p->warpSize = 32;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->concurrentKernels = 1;
    p->unifiedAddressing = 1;
    p->asyncEngineCount = 2;
    p->pciBusID = pci_bus();
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
    case cudaDevAttrPciBusId: *v = pci_bus(); break;
    case cudaDevAttrPciDeviceId: *v = 0; break;
    case cudaDevAttrPciDomainId: *v = 0; break;
    case cudaDevAttrComputeMode: *v = cudaComputeModeDefault; break;
    case cudaDevAttrConcurrentKernels: *v = 1; break;
    case cudaDevAttrUnifiedAddressing: *v = 1; break;
    default: return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d not emulated", (int)a);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    if (d)
        return g_last = cudaErrorInvalidDevice;
    snprintf(buf, (size_t)len, "0000:%02x:00.0", pci_bus());
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    EMU_LOCK;
    *free_b = g_cap - g_allocated;
    *total = g_cap;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute a, int v)
{
    EMU_LOCK;
    if (a != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute not emulated");
    if (v < 0 || v > OPTIN_SMEM)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: dynamic shared memory above the opt-in limit");
    (*g_dyn_limit)[func] = v;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    sz_emu_device open;
    *p = dev_alloc(n);
    if (!*p)
        return g_last = cudaErrorMemoryAllocation;
    if (!g_ends) /* (ends: results mean nothing; the pages stay untouched) */
        memset(*p, 0xFF, n); /* uninitialised device memory */
    (*g_allocs)[(uintptr_t)*p] = n;
    g_allocated += n;
    return cudaSuccess;
}
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    EMU_LOCK;
    run_all(false); /* cudaFree waits for the device */
    auto it = g_allocs->find((uintptr_t)p);
    if (it == g_allocs->end())
        return fail(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
    g_allocated -= it->second;
    dev_release(p, it->second);
    g_allocs->erase(it);
    return cudaSuccess;
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return cudaFree(p); }

/* Page-locked host memory: ordinary host memory, remembered (cudaFreeHost checks its pointer; copies
 * with it run in stream order) */
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned)
{
    EMU_LOCK;
    /* SZ_CUDA_EMU_HOST_ALLOC_FAIL=main: the calls of the process's main thread fail as a GPU host's
     * would without page-locked memory left (the model's pinned homes are made there; StarPU's own,
     * whose failure aborts it, on its workers) */
    static const char *fail_main = getenv("SZ_CUDA_EMU_HOST_ALLOC_FAIL");
    if (fail_main && !strcmp(fail_main, "main") && syscall(SYS_gettid) == getpid())
        return g_last = cudaErrorMemoryAllocation;
    if (posix_memalign(p, 4096, n ? n : 1))
        return g_last = cudaErrorMemoryAllocation;
    (*g_pinned)[(uintptr_t)*p] = n;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) { return cudaHostAlloc(p, n, 0); }
cudaError_t cudaFreeHost(void *p)
{
    EMU_LOCK;
    if (!p)
        return cudaSuccess;
    run_all(false); /* as cudaFree */
    if (!g_pinned->erase((uintptr_t)p))
        return fail(cudaErrorInvalidValue, "cudaFreeHost of a pointer cudaHostAlloc did not return");
    free(p);
    return cudaSuccess;
}
cudaError_t cudaHostRegister(void *p, size_t n, unsigned)
{
    EMU_LOCK;
    if (any_device(p) || (n && any_device((char *)p + n - 1)))
        return fail(cudaErrorInvalidValue, "cudaHostRegister of device memory");
    (*g_pinned)[(uintptr_t)p] = n;
    return cudaSuccess;
}
cudaError_t cudaHostUnregister(void *p)
{
    EMU_LOCK;
    run_all(false);
    g_pinned->erase((uintptr_t)p);
    return cudaSuccess;
}

/* One copy of n bytes, checked now: each side must be what the kind says (a device side inside one
 * allocation, a host side outside every one; cudaMemcpyDefault: whatever the pointers are); done
 * on stream s as the streams' rules say (the default stream for cudaMemcpy). */
static cudaError_t copy(const char *what, void *dst, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s)
{
    if (!n)
        return cudaSuccess;
    EMU_LOCK;
    bool wd, ws;
    {
        sz_emu_device open;
        bool dd = sz_emu_in_device(dst, n), sd = sz_emu_in_device(src, n);
        switch (k) {
        case cudaMemcpyHostToHost: wd = ws = false; break;
        case cudaMemcpyHostToDevice: wd = true, ws = false; break;
        case cudaMemcpyDeviceToHost: wd = false, ws = true; break;
        case cudaMemcpyDeviceToDevice: wd = ws = true; break;
        case cudaMemcpyDefault:
            wd = any_device(dst), ws = any_device(src);
            break;
        default: return fail(cudaErrorInvalidMemcpyDirection, "%s: kind %d", what, (int)k);
        }
        if (wd && !dd)
            return fail(cudaErrorInvalidValue, "%s: the destination [%p, +%zu) is not inside one device allocation",
                        what, dst, n);
        if (ws && !sd)
            return fail(cudaErrorInvalidValue, "%s: the source [%p, +%zu) is not inside one device allocation", what,
                        src, n);
        if ((!wd && any_device(dst)) || (!ws && any_device(src)))
            return fail(cudaErrorInvalidValue, "%s: a host side (kind %d) that is device memory", what, (int)k);
    }
    bool pageable_dst = !wd && !pinned(dst, n), pageable_src = !ws && !pinned(src, n);
    if (pageable_dst || pageable_src)
        g_pageable++, g_pageable_bytes += (double)n;
    if (pageable_dst) { /* into pageable memory: done when the call returns */
        sz_emu_flush(s);
        sz_emu_device open;
        memmove(dst, src, n);
    } else if (pageable_src) { /* from pageable memory: read now, written in order */
        auto buf = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
        sz_emu_enqueue(s, [dst, buf] {
            sz_emu_device open;
            memcpy(dst, buf->data(), buf->size());
        });
    } else
        sz_emu_enqueue(s, [dst, src, n] {
            sz_emu_device open;
            memmove(dst, src, n);
        });
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
    return copy("cudaMemcpy", dst, src, n, k, 0);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s)
{
    return copy("cudaMemcpyAsync", dst, src, n, k, s);
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind k, cudaStream_t s)
{
    if (width > dpitch || width > spitch)
        return fail(cudaErrorInvalidPitchValue, "cudaMemcpy2D: width %zu above a pitch (%zu, %zu)", width, dpitch,
                    spitch);
    EMU_LOCK;
    long pageable = g_pageable;
    for (size_t r = 0; r < height; r++) {
        cudaError_t e = copy("cudaMemcpy2D", (char *)dst + r * dpitch, (const char *)src + r * spitch, width, k, s);
        if (e)
            return e;
    }
    g_pageable = pageable + (g_pageable > pageable); /* one copy, however many rows */
    return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind k)
{
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, k, 0);
}
cudaError_t cudaMemcpyPeer(void *, int, const void *, int, size_t)
{
    return fail(cudaErrorInvalidDevice, "cudaMemcpyPeer: one emulated device, no peers");
}
cudaError_t cudaMemcpyPeerAsync(void *, int, const void *, int, size_t, cudaStream_t)
{
    return fail(cudaErrorInvalidDevice, "cudaMemcpyPeerAsync: one emulated device, no peers");
}
cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *)
{
    return fail(cudaErrorInvalidDevice, "cudaMemcpy3DPeer: one emulated device, no peers");
}
cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *, cudaStream_t)
{
    return fail(cudaErrorInvalidDevice, "cudaMemcpy3DPeerAsync: one emulated device, no peers");
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    EMU_LOCK;
    if (n && !sz_emu_in_device(p, n))
        return fail(cudaErrorInvalidValue, "cudaMemset: [%p, +%zu) outside every allocation", p, n);
    if (!g_ends) /* (ends: results mean nothing; the pages stay untouched) */
        sz_emu_enqueue(s, [p, v, n] {
            sz_emu_device open;
            memset(p, v, n);
        });
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) { return cudaMemsetAsync(p, v, n, 0); }

/* Streams and events: the rules above (SZ_CUDA_EMU_STREAMS). A destroyed stream's remaining work
 * runs first; its record stays (events may still name it). */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    EMU_LOCK;
    emu_stream *t = new emu_stream{!(flags & cudaStreamNonBlocking), 0, 0, {}};
    g_streams->push_back(t);
    *s = (cudaStream_t)(void *)t;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t cs)
{
    EMU_LOCK;
    emu_stream *s = stream_of(cs);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of the default stream");
    run_to(s, s->issued);
    g_streams->erase(std::find(g_streams->begin(), g_streams->end(), s));
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    sz_emu_flush(s);
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t cs)
{
    EMU_LOCK;
    emu_stream *s = stream_of(cs);
    bool idle = true;
    for (emu_stream *t : *g_streams)
        if (s ? t == s : t->blocking)
            idle = idle && t->done == t->issued;
    sz_emu_flush(cs);
    g_notready += !idle;
    return idle ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned)
{
    EMU_LOCK;
    emu_event_state *st = ev(e);
    if (!ev_done(st)) {
        emu_stream *on = st->s;
        uint64_t seq = st->seq;
        sz_emu_enqueue(s, [on, seq] { run_to(on, seq); });
    }
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    EMU_LOCK;
    *e = (cudaEvent_t)(void *)new emu_event{std::make_shared<emu_event_state>(emu_event_state{nullptr, 0, 0, 0.0})};
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    EMU_LOCK;
    delete (emu_event *)(void *)e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t cs)
{
    EMU_LOCK;
    std::shared_ptr<emu_event_state> st = ((emu_event *)(void *)e)->st;
    unsigned gen = ++st->gen;
    emu_stream *s = g_deferred ? stream_of(cs) : nullptr;
    st->s = s;
    st->seq = s ? s->issued + 1 : 0;
    sz_emu_enqueue(cs, [st, gen] {
        if (st->gen == gen)
            st->ms = now_ms();
    });
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    EMU_LOCK;
    emu_event_state *st = ev(e);
    if (st->s)
        run_to(st->s, st->seq);
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    EMU_LOCK;
    emu_event_state *st = ev(e);
    if (ev_done(st))
        return cudaSuccess;
    run_to(st->s, st->seq); /* finished by the next query */
    g_notready++;
    return cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    EMU_LOCK;
    if (!ev_done(ev(a)) || !ev_done(ev(b)))
        return cudaErrorNotReady;
    *ms = (float)(ev(b)->ms - ev(a)->ms);
    return cudaSuccess;
}

} /* extern "C" */
