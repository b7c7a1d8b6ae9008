/* core/tensor.c — sz_tensor: a StarPU vector handle with a dtype, element count and name, and
 * the blocking copies in and out that apps use (they acquire the handle, so they wait for the
 * tasks that write it and hold back the tasks that come after). */
#include <stdlib.h>
#include <string.h>
#include "sz_core.h"
#include "sz_cuda.h"
#include "sz_kernels.h"

size_t sz_dtype_size(sz_dtype dtype)
{
    switch (dtype) {
    case SZ_DTYPE_F32: return 4;
    case SZ_DTYPE_BF16: return 2;
    case SZ_DTYPE_I32: return 4;
    case SZ_DTYPE_F16: return 2;
    }
    return 0;
}

sz_tensor *sz_tensor_register(void *home, int64_t numel, sz_dtype dtype, const char *name)
{
    sz_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->numel = numel;
    t->handle_numel = numel;
    t->dtype = dtype;
    t->home = home;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    starpu_vector_data_register(&t->h, STARPU_MAIN_RAM, (uintptr_t)home, (uint32_t)numel, sz_dtype_size(dtype));
    starpu_data_set_name(t->h, t->name);
    return t;
}

sz_tensor *sz_tensor_register_on(unsigned node, void *home, int64_t numel, sz_dtype dtype, const char *name)
{
    sz_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->numel = t->handle_numel = numel;
    t->dtype = dtype;
    t->home = home;
    t->on_gpu = node != STARPU_MAIN_RAM;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    starpu_vector_data_register(&t->h, (int)node, (uintptr_t)home, (uint32_t)numel, sz_dtype_size(dtype));
    starpu_data_set_name(t->h, t->name);
    return t;
}

sz_tensor *sz_tensor_register_lazy(int64_t numel, sz_dtype dtype, const char *name)
{
    sz_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->numel = t->handle_numel = numel;
    t->dtype = dtype;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    starpu_vector_data_register(&t->h, -1, 0, (uint32_t)numel, sz_dtype_size(dtype));
    starpu_data_set_name(t->h, t->name);
    return t;
}

sz_tensor sz_tensor_view(const sz_tensor *base, int64_t offset, int64_t numel, const char *name)
{
    sz_tensor v = *base;
    v.offset = base->offset + offset;
    v.numel = numel;
    v.home = NULL;
    snprintf(v.name, sizeof v.name, "%s", name ? name : base->name);
    return v;
}

/* A home of tasks/model.c's pinned_buffer: cudaHostAlloc's (sz_cuda_host_alloc), or StarPU's pinned
 * malloc in a library built without CUDA. */
void sz_tensor_free_pinned(void *home, size_t bytes)
{
#if SZ_WITH_CUDA
    (void)bytes;
    sz_cuda_host_free(home);
#else
    starpu_free_flags(home, bytes, STARPU_MALLOC_PINNED);
#endif
}

void sz_tensor_unregister(sz_tensor *t)
{
    if (!t)
        return;
    if (t->h) /* (no copy back into the home buffer, freed next: with CUDA workers, the model's
                 whole state would cross to RAM at the end of every run) */
        starpu_data_unregister_no_coherency(t->h);
    if (t->on_gpu)
        ; /* a block of the model's GPU arena, freed with it */
    else if (t->pinned)
        sz_tensor_free_pinned(t->home, t->pinned);
    else if (!sz_devpool_release(t->home))
        free(t->home);
    free(t);
}

int64_t sz_tensor_numel(const sz_tensor *t) { return t ? t->numel : 0; }
sz_dtype sz_tensor_dtype(const sz_tensor *t) { return t ? t->dtype : SZ_DTYPE_F32; }
const char *sz_tensor_name(const sz_tensor *t) { return t ? t->name : ""; }

static sz_status copy(sz_tensor *t, void *dst, const void *src)
{
    if (!t || (!dst && !src))
        return SZ_ERR_INVALID;
    int whole = t->offset == 0 && t->numel == t->handle_numel;
    /* in main memory, whatever the handle's home: starpu_data_acquire would acquire a tensor of the
     * GPU arena (home: the GPU's node) there, where the host cannot touch it */
    if (starpu_data_acquire_on_node(t->h, STARPU_MAIN_RAM, src ? (whole ? STARPU_W : STARPU_RW) : STARPU_R) != 0)
        return SZ_ERR_RUNTIME;
    char *p = (char *)starpu_data_handle_to_pointer(t->h, STARPU_MAIN_RAM) + (size_t)t->offset * sz_dtype_size(t->dtype);
    size_t bytes = (size_t)t->numel * sz_dtype_size(t->dtype);
    memcpy(src ? p : dst, src ? src : p, bytes);
    starpu_data_release_on_node(t->h, STARPU_MAIN_RAM);
    return SZ_OK;
}

sz_status sz_tensor_read(sz_tensor *t, void *dst) { return copy(t, dst, NULL); }
sz_status sz_tensor_write(sz_tensor *t, const void *src) { return copy(t, NULL, src); }

sz_status sz_tensor_read_f32(sz_tensor *t, float *dst)
{
    if (!t || !dst)
        return SZ_ERR_INVALID;
    if (t->dtype != SZ_DTYPE_BF16 && t->dtype != SZ_DTYPE_F16)
        return sz_tensor_read(t, dst);
    uint16_t *h = malloc((size_t)t->numel * sizeof *h);
    if (!h)
        return SZ_ERR_NOMEM;
    sz_status st = sz_tensor_read(t, h);
    sz_k_convert(dst, SZ_K_F32, h, (sz_k_dtype)sz_kdt_of(t->dtype), (size_t)t->numel, SZ_K_CONVERT_SET);
    free(h);
    return st;
}

sz_status sz_tensor_write_f32(sz_tensor *t, const float *src)
{
    if (!t || !src)
        return SZ_ERR_INVALID;
    if (t->dtype != SZ_DTYPE_BF16 && t->dtype != SZ_DTYPE_F16)
        return sz_tensor_write(t, src);
    uint16_t *h = malloc((size_t)t->numel * sizeof *h);
    if (!h)
        return SZ_ERR_NOMEM;
    sz_k_convert(h, (sz_k_dtype)sz_kdt_of(t->dtype), src, SZ_K_F32, (size_t)t->numel, SZ_K_CONVERT_SET);
    sz_status st = sz_tensor_write(t, h);
    free(h);
    return st;
}
