/* tests/cuda_emu/selftest.cu — the host CUDA emulation (sz_cuda_emu.cpp) catches what it claims
 * to: each case is a small kernel with one known bug, run in a child process that must fail with
 * the expected message (deadlock, lanes that returned before a shuffle, a partial warp, a read of
 * shared memory before any thread wrote it, a launch over the limits, dynamic shared memory past its
 * end under AddressSanitizer, a bad cublasGemmEx, a result read before its stream is waited for),
 * next to correct kernels and stream use that must pass. Built from
 * this file through launch.sed like the .cu files of kernels/cuda. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

/* correct: block sum through shared memory, 256 threads */
__global__ void sum_k(float *out, const float *x)
{
    __shared__ float part[8];
    float v = warp_sum(x[blockIdx.x * blockDim.x + threadIdx.x]);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (int i = 0; i < 8; i++)
            s += part[i];
        out[blockIdx.x] = s;
    }
}

/* bug: the partial sums read without the barrier (by the first and the last warp's lane 0, so
 * that either order of running the threads shows it) */
__global__ void sum_nobarrier_k(float *out, const float *x)
{
    __shared__ float part[8];
    float v = warp_sum(x[threadIdx.x]);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    if (threadIdx.x == 0 || threadIdx.x == 224) {
        float s = 0;
        for (int i = 0; i < 8; i++)
            s += part[i];
        out[threadIdx.x == 0 ? 0 : 1] = s;
    }
}

/* bug: half a warp at __syncwarp, the other half at __syncthreads */
__global__ void deadlock_k(float *out)
{
    if ((threadIdx.x & 31) < 16)
        __syncwarp();
    else
        __syncthreads();
    out[threadIdx.x] = 1.0f;
}

/* bug: an early return, then a full-mask shuffle */
__global__ void exited_k(float *out, int n)
{
    if ((int)threadIdx.x >= n)
        return;
    out[threadIdx.x] = warp_sum(1.0f);
}

/* bug: 48 threads, a full-mask shuffle in the second, partial warp */
__global__ void partial_k(float *out) { out[threadIdx.x] = warp_sum(1.0f); }

/* bug: one element past the dynamic shared memory */
__global__ void smem_oob_k(float *out, int n)
{
    extern __shared__ float buf[];
    buf[threadIdx.x] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0)
        out[0] = buf[n];
}

__global__ void nop_k(float *out) { out[0] = 0.0f; }
__global__ void fill_k(float *out, float v) { out[threadIdx.x] = v; }

static float *dev(int n, float v)
{
    float *h = (float *)malloc(n * sizeof(float)), *d;
    for (int i = 0; i < n; i++)
        h[i] = v;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    free(h);
    return d;
}
static float get(const float *d, int i)
{
    float h;
    cudaMemcpy(&h, d + i, sizeof h, cudaMemcpyDeviceToHost);
    return h;
}

/* streams (deferred, as a GPU's run after the call): the case's value read back, wrong = an error */
static int expect_value(const char *what, float got, float want)
{
    if (got == want)
        return 0;
    fprintf(stderr, "%s: %g, not %g\n", what, got, want);
    return 1;
}
static int streams_case(int c, float *o)
{
    cudaStream_t a, b;
    cudaEvent_t e;
    float *h, pageable = 3.0f;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEventCreate(&e);
    cudaHostAlloc((void **)&h, 32 * sizeof(float), 0);
    h[0] = -1.0f;
    fill_k<<<1, 32, 0, a>>>(o, 7.0f);
    if (c == 10) { /* bug: a page-locked copy's result read before the stream is waited for */
        cudaMemcpyAsync(h, o, sizeof(float), cudaMemcpyDeviceToHost, a);
        return expect_value("read before the wait", h[0], 7.0f);
    }
    if (c == 11) /* bug: cudaMemcpy does not wait for a non-blocking stream */
        return expect_value("cudaMemcpy past a non-blocking stream", get(o, 0), 7.0f);
    /* correct: an event waited for by another stream, queried, synchronized; a pageable source read
     * at the call */
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(b, e, 0);
    cudaMemcpyAsync(h, o, sizeof(float), cudaMemcpyDeviceToHost, b);
    cudaMemcpyAsync(o + 1, &pageable, sizeof(float), cudaMemcpyHostToDevice, b);
    pageable = 4.0f;
    int bad = cudaEventQuery(e) != cudaErrorNotReady; /* the first query of unfinished work */
    cudaStreamSynchronize(b);
    bad += cudaEventQuery(e) != cudaSuccess;
    return bad + expect_value("waited", h[0], 7.0f) + expect_value("pageable source", get(o, 1), 3.0f);
}

static int run_case(int c)
{
    float *x = dev(1024, 1.0f), *o = dev(1024, 0.0f);
    switch (c) {
    case 0: /* correct */
        sum_k<<<4, 256>>>(o, x);
        return get(o, 3) == 256.0f && cudaGetLastError() == cudaSuccess ? 0 : 1;
    case 1:
        sum_nobarrier_k<<<1, 256>>>(o, x);
        if (get(o, 0) != 256.0f || get(o, 1) != 256.0f) {
            fprintf(stderr, "wrong sum %g %g\n", get(o, 0), get(o, 1));
            return 1;
        }
        return 0;
    case 2: deadlock_k<<<1, 64>>>(o); return 0;
    case 3: exited_k<<<1, 32>>>(o, 20); return 0;
    case 4: partial_k<<<1, 48>>>(o); return 0;
    case 5: smem_oob_k<<<1, 64, 64 * sizeof(float)>>>(o, 64); return 0;
    case 6: nop_k<<<1, 2048>>>(o); return cudaGetLastError() == cudaSuccess;
    case 7: nop_k<<<1, 32, 64 << 10>>>(o); return cudaGetLastError() == cudaSuccess;
    case 8: { /* ... unless raised with cudaFuncSetAttribute: correct */
        cudaFuncSetAttribute(nop_k, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10);
        nop_k<<<1, 32, 64 << 10>>>(o);
        return cudaGetLastError() != cudaSuccess;
    }
    case 9: { /* lda smaller than the rows of A */
        cublasHandle_t h;
        cublasCreate(&h);
        float one = 1, zero = 0;
        return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &one, x, CUDA_R_32F, 8, x, CUDA_R_32F, 16, &zero,
                            o, CUDA_R_32F, 16, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    }
    case 10: case 11: case 12: return streams_case(c, o);
    }
    return 2;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return run_case(atoi(argv[1]));
    static const char *expect[] = {
        NULL, "wrong sum", "deadlock", "others returned", "partial warp", "heap-buffer-overflow",
        "more than 1024 threads", "48 KB without cudaFuncSetAttribute", NULL, "invalid value",
        "read before the wait", "cudaMemcpy past a non-blocking stream", NULL,
    };
    const char *order = getenv("SZ_CUDA_EMU_ORDER");
    int failed = 0, n = (int)(sizeof expect / sizeof *expect);
    for (int c = 0; c < n; c++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s' %d 2>&1", argv[0], c);
        FILE *p = popen(cmd, "r");
        char out[65536];
        size_t len = p ? fread(out, 1, sizeof out - 1, p) : 0;
        out[len] = 0;
        int st = p ? pclose(p) : -1, rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        int ok = expect[c] ? rc != 0 && strstr(out, expect[c]) : rc == 0;
        printf("case %d (%s): exit %d, %s\n", c, expect[c] ? expect[c] : "correct, must pass", rc, ok ? "ok" : "WRONG");
        if (!ok) {
            printf("%s\n", out);
            failed++;
        }
    }
    printf("%d of %d cases as expected (order %s)\n", n - failed, n, order ? order : "forward");
    return failed != 0;
}
