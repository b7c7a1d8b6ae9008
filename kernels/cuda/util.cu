/* kernels/cuda/util.cu — CUDA twins of the small kernels: conversion between fp32, bf16 and fp16
 * with optional accumulation (acc: 0 set, 1 add, 2 onto zeros; tasks/convert.c: bitwise the CPU's
 * sz_k_convert), the clip factor from the per-unit squared norms with fp16's loss scale divided out
 * (tasks/clip_scale.c, bitwise: the same double sums in the same order), scale, zero, the device
 * count, and reduce-scatter's rank-ordered sum of received pieces. */
#include <stdio.h>
#include <string.h>
#include "sz_cuda_common.cuh"

/* sz_k_convert's element rule: a set between equal 16-bit types copies the bits; otherwise the
 * source widened exactly, the sum (dst + src when acc 1, 0 + src when acc 2) taken in fp32, a
 * 16-bit destination rounded once (bf16 <-> fp16 included). */
__global__ static void convert_k(void *dst, int ddt, const void *src, int sdt, size_t n, int acc)
{
    SZ_GRID_STRIDE(i, n) {
        if (ddt == sdt && ddt != SZ_CUDA_F32 && !acc)
            ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i];
        else
            sz_d_stx(dst, ddt, i,
                     acc == 1   ? sz_d_ldx(dst, ddt, i) + sz_d_ldx(src, sdt, i)
                     : acc == 2 ? 0.0f + sz_d_ldx(src, sdt, i) /* onto zeros: -0 becomes +0, dst unread */
                                : sz_d_ldx(src, sdt, i));
    }
}

static int sz_dt_ok(int dt) { return dt == SZ_CUDA_F32 || dt == SZ_CUDA_BF16 || dt == SZ_CUDA_F16; }

extern "C" int sz_cuda_convert(cudaStream_t s, void *dst, int dst_dt, const void *src, int src_dt, size_t n, int acc)
{
    if (!sz_dt_ok(dst_dt) || !sz_dt_ok(src_dt) || acc < 0 || acc > 2)
        return (int)cudaErrorInvalidValue;
    if (!n)
        return 0;
    convert_k<<<sz_blocks(n, 256), 256, 0, s>>>(dst, dst_dt, src, src_dt, n, acc);
    return sz_launch_rc();
}

/* tasks/clip_scale.c's clip_factor, line for line: with a loss scale (fp16) the norm is the
 * unscaled one, the factor divides the scale out, and a norm that is not finite (an overflow) gives
 * a NaN factor, the optimizers' skipped step. */
__global__ static void clip_k(float *out, const float *sums, int n, float clip, float loss_scale)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += sums[i];
    double norm = sqrt(s);
    if (loss_scale > 0.0f) {
        norm /= loss_scale;
        if (!isfinite(norm)) {
            out[0] = __uint_as_float(0x7FC00000u); /* the CPU's NAN */
            out[1] = (float)norm;
            return;
        }
    }
    double f = (clip > 0.0f && norm > clip) ? clip / norm : 1.0;
    out[0] = loss_scale > 0.0f ? (float)(f / loss_scale) : (float)f;
    out[1] = (float)norm;
}

extern "C" int sz_cuda_clip_scale(cudaStream_t s, float *out, const float *sums, int n, float clip, float loss_scale)
{
    clip_k<<<1, 1, 0, s>>>(out, sums, n, clip, loss_scale);
    return sz_launch_rc();
}

__global__ static void scale_k(float *x, size_t n, float alpha)
{
    SZ_GRID_STRIDE(i, n) x[i] *= alpha;
}

extern "C" int sz_cuda_scale(cudaStream_t s, float *x, size_t n, float alpha)
{
    if (!n)
        return 0;
    scale_k<<<sz_blocks(n, 256), 256, 0, s>>>(x, n, alpha);
    return sz_launch_rc();
}

extern "C" int sz_cuda_zero(cudaStream_t s, void *x, size_t bytes)
{
    return bytes ? (int)cudaMemsetAsync(x, 0, bytes, s) : 0;
}

extern "C" int sz_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky error */
        return 0;
    }
    return n;
}

/* Dense bf16 tensor-core FLOPs per clock per SM (fp32 accumulation), by compute capability, from
 * NVIDIA's datasheet peaks divided by SMs x the clock the datasheet uses: sm_80 (A100: 312 TFLOP/s
 * = 108 SMs x 1.41 GHz x 2048), sm_86/sm_87/sm_89 (A10/A40/L40-class professional parts: 1024;
 * GeForce parts with fp32 accumulation have half), sm_90 (H100/H200: 989 TFLOP/s = 132 x 1.83 GHz
 * x 4096), sm_100/sm_103 (B200-class: 8192). 0 where there are no bf16 tensor cores (before sm_80)
 * or the architecture is not in this table. */
static int bf16_flops_per_clock_sm(int major, int minor)
{
    if (major == 8)
        return minor == 0 ? 2048 : 1024;
    if (major == 9)
        return 4096;
    if (major == 10)
        return 8192;
    return 0;
}

extern "C" int sz_cuda_mem_info(int dev, int64_t *free_bytes, int64_t *total_bytes)
{
    int was = -1;
    size_t f = 0, t = 0;
    int rc = (int)cudaGetDevice(&was);
    if (!rc && was != dev)
        rc = (int)cudaSetDevice(dev);
    if (!rc)
        rc = (int)cudaMemGetInfo(&f, &t);
    if (was >= 0 && was != dev)
        (void)cudaSetDevice(was); /* the calling thread's device as it was */
    if (rc) {
        (void)cudaGetLastError();
        return rc;
    }
    *free_bytes = (int64_t)f;
    *total_bytes = (int64_t)t;
    return 0;
}

extern "C" int sz_cuda_pci_bus_id(int dev, char *buf, int len)
{
    int rc = (int)cudaDeviceGetPCIBusId(buf, len, dev);
    if (rc)
        (void)cudaGetLastError();
    return rc;
}

extern "C" int sz_cuda_device_peak(int dev, char *name, size_t name_len, int *sms, int *clock_khz, int *major,
                                   int *minor, int *flops_per_clock_sm, double *bf16_tflops)
{
    cudaDeviceProp p;
    int rc = (int)cudaGetDeviceProperties(&p, dev);
    if (!rc)
        rc = (int)cudaDeviceGetAttribute(clock_khz, cudaDevAttrClockRate, dev); /* peak clock (kHz) */
    if (rc) {
        (void)cudaGetLastError();
        return rc;
    }
    snprintf(name, name_len, "%s", p.name);
    *sms = p.multiProcessorCount;
    *major = p.major;
    *minor = p.minor;
    *flops_per_clock_sm = bf16_flops_per_clock_sm(p.major, p.minor);
    *bf16_tflops = (double)*sms * (*clock_khz * 1e3) * *flops_per_clock_sm / 1e12;
    return 0;
}

/* Device memory for the GPU arena (tasks/model.c), synchronous, on device dev (the calling
 * thread's current device is left as it was): allocated and zeroed, or freed. 0 or a cudaError_t. */
extern "C" int sz_cuda_arena_alloc(int dev, size_t bytes, void **out)
{
    *out = NULL;
    int prev = 0;
    int rc = (int)cudaGetDevice(&prev);
    if (!rc)
        rc = (int)cudaSetDevice(dev);
    if (!rc)
        rc = (int)cudaMalloc(out, bytes);
    if (!rc)
        rc = (int)cudaMemset(*out, 0, bytes);
    if (!rc)
        rc = (int)cudaDeviceSynchronize();
    if (rc) {
        if (*out)
            cudaFree(*out);
        *out = NULL;
        (void)cudaGetLastError();
    }
    (void)cudaSetDevice(prev);
    return rc;
}

extern "C" int sz_cuda_arena_free(int dev, void *p)
{
    int prev = 0;
    int rc = (int)cudaGetDevice(&prev);
    if (!rc)
        rc = (int)cudaSetDevice(dev);
    if (!rc)
        rc = (int)cudaFree(p);
    (void)cudaSetDevice(prev);
    return rc;
}

/* Page-locked host memory for the model's pinned homes (tasks/model.c): cudaHostAlloc (portable)
 * with device dev made the calling thread's current one (the rank's GPU: no context is made on
 * another), zeroed; a failure is returned, where StarPU's starpu_malloc_flags(STARPU_MALLOC_PINNED)
 * aborts the process. And its cudaFreeHost. 0 or a cudaError_t. */
extern "C" int sz_cuda_host_alloc(int dev, size_t bytes, void **out)
{
    *out = NULL;
    int rc = (int)cudaSetDevice(dev);
    if (!rc)
        rc = (int)cudaHostAlloc(out, bytes, cudaHostAllocPortable);
    if (rc) {
        *out = NULL;
        (void)cudaGetLastError();
        return rc;
    }
    memset(*out, 0, bytes);
    return 0;
}

extern "C" int sz_cuda_host_free(void *p) { return (int)cudaFreeHost(p); }

__global__ static void reduce_pieces_k(void *shard, int dt, const void *pieces, int nd, size_t len, int acc)
{
    SZ_GRID_STRIDE(i, len) {
        float x = acc ? sz_d_ldx(shard, dt, i) + sz_d_ldx(pieces, dt, i) : sz_d_ldx(pieces, dt, i);
        for (int r = 1; r < nd; r++)
            x += sz_d_ldx(pieces, dt, (size_t)r * len + i);
        sz_d_stx(shard, dt, i, x); /* fp16: an overflow becomes inf */
    }
}

extern "C" int sz_cuda_reduce_pieces(cudaStream_t s, void *shard, int dt, const void *pieces, int nd, int64_t o,
                                     int64_t len, int acc)
{
    if (len <= 0)
        return 0;
    if (!sz_dt_ok(dt))
        return (int)cudaErrorInvalidValue;
    char *dst = (char *)shard + (size_t)o * sz_cuda_esize(dt);
    reduce_pieces_k<<<sz_blocks((size_t)len, 256), 256, 0, s>>>(dst, dt, pieces, nd, (size_t)len, acc);
    return sz_launch_rc();
}
