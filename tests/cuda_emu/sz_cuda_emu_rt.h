/* tests/cuda_emu/sz_cuda_emu_rt.h — what the emulation's libraries share beyond the device side
 * (sz_cuda_emu.h): the runtime's error count, the lock every entry point holds, the device
 * memory checks and the streams. sz_cuda_emu.cpp defines them; sz_cublas_emu.cpp and sz_nccl_emu.cpp use them. */
#ifndef SZ_CUDA_EMU_RT_H
#define SZ_CUDA_EMU_RT_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <functional>

/* An emulation error (counted; the program exits 1 at the end): in what (a kernel's or an API
 * call's name), at the running thread when a kernel runs. */
void sz_emu_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The name errors name until the next call (a string literal); "(host)" between calls. */
void sz_emu_set_site(const char *what);
/* SZ_CUDA_EMU_BLOCKS=ends: only the ends of each launch and GEMM run (sz_cuda_emu.cpp). */
bool sz_emu_ends(void);
/* [p, p + n) inside one device allocation. */
bool sz_emu_in_device(const void *p, size_t n);

/* Held by every entry point (the runtime is called by StarPU's threads at once). While one is held
 * with the device open, the device memory is readable and writable; else, in the engine build
 * (SZ_CUDA_EMU_HEAP), the host's access to it faults, as a dereference of a device pointer does. */
struct sz_emu_device {
    sz_emu_device();
    ~sz_emu_device();
    sz_emu_device(const sz_emu_device &) = delete;
    sz_emu_device &operator=(const sz_emu_device &) = delete;
};

/* Work on stream s, run in the stream's order: under SZ_CUDA_EMU_STREAMS=deferred (the default)
 * when something waits for it, else now. The default stream (0, cudaStreamLegacy,
 * cudaStreamPerThread) runs it now, after every blocking stream's work. */
void sz_emu_enqueue(cudaStream_t s, std::function<void()> op);
/* Everything given to s so far done (the default stream: every blocking stream's work). */
void sz_emu_flush(cudaStream_t s);

#endif /* SZ_CUDA_EMU_RT_H */
