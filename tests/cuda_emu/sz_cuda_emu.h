/* tests/cuda_emu/sz_cuda_emu.h — the device side of the host CUDA emulation, force-included
 * (g++ -include) into every .cu file of kernels/cuda after tests/cuda_emu/launch.sed has
 * rewritten its launches and shared-memory declarations, so that the same kernel source nvcc
 * compiles runs on the host (the runtime is sz_cuda_emu.cpp; what is checked and what cannot be is
 * said there). A block's threads are fibers run one at a time until each reaches a barrier;
 * threadIdx / blockIdx / blockDim / gridDim are the running fiber's; __syncthreads, __syncwarp and
 * the warp shuffles are barriers with the hardware's rules (full masks, no exited lanes); WMMA is a
 * whole-tile stand-in. */
#ifndef SZ_CUDA_EMU_H
#define SZ_CUDA_EMU_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#define SZ_FA_EMULATE 1 /* sz_cuda_fa.cuh: no <mma.h>, the WMMA stand-in below */

#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __forceinline__
#define __forceinline__ inline
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __align__
#define __align__(n) alignas(n)

/* ---- the running thread (sz_cuda_emu.cpp) */
struct sz_emu_thread {
    uint3 tid;
};
struct sz_emu_block {
    uint3 bid, bdim, gdim;
};
extern sz_emu_thread *sz_emu_cur;
extern sz_emu_block sz_emu_blk;
#define threadIdx (sz_emu_cur->tid)
#define blockIdx (sz_emu_blk.bid)
#define blockDim (sz_emu_blk.bdim)
#define gridDim (sz_emu_blk.gdim)

void __syncthreads(void);
void __syncwarp(unsigned mask = 0xFFFFFFFFu);
/* One warp shuffle: this lane's value (up to 8 bytes) in, lane (this lane ^ xor_mask)'s out. */
uint64_t sz_emu_shfl(unsigned mask, uint64_t v, int xor_mask, int width);
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    static_assert(sizeof(T) <= 8, "shuffles of up to 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof(T));
    u = sz_emu_shfl(mask, u, lane_mask, width);
    memcpy(&v, &u, sizeof(T));
    return v;
}

static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __fmul_rn(float a, float b) /* never contracted into an FMA */
{
    volatile float p = a * b;
    return p;
}

/* ---- shared memory: a __shared__ array is a function-static one, refilled with garbage at the
 * first thread of each block that reaches its declaration; extern __shared__ is the launch's buffer */
void sz_emu_shared(void *p, size_t bytes);
void *sz_emu_dyn_smem(void);
#define SZ_FA_SMEM(name) unsigned char *name = (unsigned char *)sz_emu_dyn_smem()

/* ---- launches: k<<<g, b, smem, s>>>(args) becomes sz_emu_launch("k", k, g, b, smem, s)(args); the
 * configuration is checked at the launch, the body (the kernel on a copy of the arguments) runs in
 * stream order (sz_cuda_emu.cpp: SZ_CUDA_EMU_STREAMS) */
void sz_emu_run(const char *name, const void *kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                std::function<void()> body);
template <typename... P> struct sz_emu_launcher {
    const char *name;
    void (*k)(P...);
    dim3 g, b;
    size_t smem;
    cudaStream_t s;
    void operator()(P... args) const
    {
        auto a = std::make_shared<std::tuple<typename std::decay<P>::type...>>(args...);
        void (*kf)(P...) = k;
        sz_emu_run(name, (const void *)k, g, b, smem, s, [kf, a] { std::apply(kf, *a); });
    }
};
template <typename... P>
sz_emu_launcher<P...> sz_emu_launch(const char *name, void (*k)(P...), dim3 g, dim3 b, size_t smem = 0,
                                    cudaStream_t s = 0)
{
    return sz_emu_launcher<P...>{name, k, g, b, smem, s};
}

/* cuda_runtime.h's overload for a kernel (nvcc declares it; the host compiler does not see it) */
template <typename... P> cudaError_t cudaFuncSetAttribute(void (*k)(P...), enum cudaFuncAttribute a, int v)
{
    return cudaFuncSetAttribute((const void *)k, a, v);
}

/* ---- WMMA 16x16x16 stand-in: every lane holds the whole tile. load_matrix_sync, mma_sync and
 * store_matrix_sync first wait for the warp's lanes, as the programming guide says they do; a
 * store writes each lane's share of the elements (i % 32 == lane), so a lane reading what another
 * stored needs the kernel's own barrier, as on the hardware. Products in fp32, k in order. */
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename U, int M, int N, int K, typename T, typename L = void> struct fragment {
    static constexpr int num_elements = 256;
    float x[256];
};
static inline float sz_wmma_f(float v) { return v; }
static inline float sz_wmma_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename U, typename T, typename L>
void load_matrix_sync(fragment<U, 16, 16, 16, T, L> &f, const T *p, unsigned ld)
{
    __syncwarp();
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.x[i * 16 + j] = sz_wmma_f(std::is_same<L, row_major>::value ? p[i * ld + j] : p[i + j * ld]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ld, layout_t l)
{
    __syncwarp();
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.x[i * 16 + j] = l == mem_row_major ? p[i * ld + j] : p[i + j * ld];
}
inline void fill_fragment(fragment<accumulator, 16, 16, 16, float> &f, float v)
{
    for (int i = 0; i < 256; i++)
        f.x[i] = v;
}
template <typename A, typename B>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const A &a, const B &b,
              const fragment<accumulator, 16, 16, 16, float> &c)
{
    __syncwarp();
    float r[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[i * 16 + j];
            for (int k = 0; k < 16; k++)
                s += a.x[i * 16 + k] * b.x[k * 16 + j];
            r[i * 16 + j] = s;
        }
    memcpy(d.x, r, sizeof r);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ld, layout_t l)
{
    __syncwarp();
    for (int e = (int)(threadIdx.x & 31); e < 256; e += 32) {
        int i = e / 16, j = e % 16;
        (l == mem_row_major ? p[i * ld + j] : p[i + j * ld]) = f.x[e];
    }
}
} // namespace wmma
} // namespace nvcuda

#endif /* SZ_CUDA_EMU_H */
