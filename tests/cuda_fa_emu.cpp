/* tests/cuda_fa_emu.cpp — the tiled CUDA attention kernels (codelets/kernels/cuda/sz_cuda_fa.cuh,
 * the same source nvcc compiles) run on the host without a GPU, against a double-precision
 * reference of the CPU kernel's semantics (causal, scale 1/sqrt(hs), max from -10000, stats
 * (max, 1/sum), dinp set or accumulated). Each block's 128 threads are std::threads, __syncthreads
 * and __syncwarp barriers, warp shuffles go through a buffer, a WMMA fragment is the whole 16x16
 * tile in every lane (loads by the row_major / col_major definitions of the CUDA programming
 * guide, products summed over k in order, stores by lane 0), exp is the C library's. What it
 * checks: the tiling, the thread and warp ownership of rows, the barriers' placement (shared
 * memory starts as garbage), the masks, the two-sweep dQ, the dK/dV ranges, set. What it cannot:
 * the real WMMA fragment hardware, the GPU's memory model, launch limits, speed. Bounds: fp32
 * out/stats 1e-5 + 1e-4 |ref|, dinp 1e-4 + 1e-4 |ref|; bf16 (q, k, v, dout already bf16 values)
 * out 1e-2 + 1e-2 |ref|, dinp 2e-2 + 2e-2 |ref|. Built and run by tests/cuda_fa_emu.sh. */
#define SZ_FA_EMULATE 1
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <barrier>
#include <thread>
#include <vector>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
struct u3 { unsigned x, y, z; };
thread_local u3 threadIdx_, blockIdx_;
u3 gridDim_;
#define threadIdx threadIdx_
#define blockIdx blockIdx_
#define gridDim gridDim_
static std::barrier<> *g_bar;
static std::barrier<> *g_wbar[4];
static unsigned char *g_smem;
static float g_shfl[128];
static inline void __syncthreads() { g_bar->arrive_and_wait(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { g_wbar[threadIdx.x >> 5]->arrive_and_wait(); }
static inline float __shfl_xor_sync(unsigned, float v, int o)
{
    int t = threadIdx.x;
    g_shfl[t] = v;
    __syncwarp();
    float r = g_shfl[(t & ~31) | ((t & 31) ^ o)];
    __syncwarp();
    return r;
}
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
struct sz_att_dims { int B, T, C, NH, hs; float scale; };
template <typename T> static inline T sz_warp_sum(T v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o); return v; }
static inline float sz_warp_max(float v) { for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o)); return v; }
static inline uint16_t sz_d_f2h(float f) { uint32_t u = __float_as_uint(f); if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16); }
static inline float sz_d_h2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
static inline float sz_d_expf(float x) { return expf(x); }
static inline float sz_mx_get(const float *p, size_t i) { return p[i]; }
static inline float sz_mx_get(const uint16_t *p, size_t i) { return sz_d_h2f(p[i]); }
static inline void sz_mx_put(float *p, size_t i, float x) { p[i] = x; }
static inline void sz_mx_put(uint16_t *p, size_t i, float x) { p[i] = sz_d_f2h(x); }
template <typename T> static inline void sz_mx_acc(T *p, size_t i, float x, int set) { sz_mx_put(p, i, set ? x : sz_mx_get(p, i) + x); }
namespace nvcuda { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {}; struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename U, int M, int N, int K, typename T, typename L = void> struct fragment { float x[256]; };
template <typename U, typename T, typename L> void load_matrix_sync(fragment<U, 16, 16, 16, T, L> &f, const T *p, unsigned ld)
{
    for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++)
        f.x[i * 16 + j] = (float)(std::is_same<L, row_major>::value ? p[i * ld + j] : p[i + j * ld]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ld, layout_t l)
{ for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) f.x[i * 16 + j] = l == mem_row_major ? p[i * ld + j] : p[i + j * ld]; }
inline void fill_fragment(fragment<accumulator, 16, 16, 16, float> &f, float v) { for (int i = 0; i < 256; i++) f.x[i] = v; }
template <typename A, typename B> void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const A &a, const B &b, const fragment<accumulator, 16, 16, 16, float> &c)
{
    float r[256];
    for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) { float s = c.x[i * 16 + j]; for (int k = 0; k < 16; k++) s += a.x[i * 16 + k] * b.x[k * 16 + j]; r[i * 16 + j] = s; }
    memcpy(d.x, r, sizeof r);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ld, layout_t)
{
    __syncwarp();
    if ((threadIdx.x & 31) == 0) for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) p[i * ld + j] = f.x[i * 16 + j];
    __syncwarp();
}
}}
#undef __launch_bounds__
#define __launch_bounds__(x)
#undef __global__
#define __global__
#undef __device__
#define __device__
#define SZ_FA_SMEM(name) unsigned char *name = g_smem
#include "sz_cuda_fa.cuh"

template <typename F> static void launch(int gx, int gy, int gz, size_t smem, F f)
{
    gridDim_ = {(unsigned)gx, (unsigned)gy, (unsigned)gz};
    std::vector<unsigned char> buf(smem + 128);
    for (int z = 0; z < gz; z++) for (int y = 0; y < gy; y++) for (int x = 0; x < gx; x++) {
        unsigned char *sm = buf.data() + (128 - ((uintptr_t)buf.data() & 127)) % 128;
        memset(sm, 0xCD, smem); /* garbage */
        g_smem = sm;
        std::barrier<> bar(128); std::barrier<> w0(32), w1(32), w2(32), w3(32);
        g_bar = &bar; g_wbar[0] = &w0; g_wbar[1] = &w1; g_wbar[2] = &w2; g_wbar[3] = &w3;
        std::vector<std::thread> th;
        for (int t = 0; t < 128; t++) th.emplace_back([=] { threadIdx_ = {(unsigned)t, 0, 0}; blockIdx_ = {(unsigned)x, (unsigned)y, (unsigned)z}; f(); });
        for (auto &t : th) t.join();
    }
}
static float frand(void) { static uint64_t r = 88172645463325252ull; r ^= r << 13; r ^= r >> 7; r ^= r << 17; return (float)((r >> 40) * (1.0 / 16777216.0)) * 2 - 1; }
static float bfr(float x) { return sz_d_h2f(sz_d_f2h(x)); }

template <int HS, typename OT> static int run(int B, int T, int NH, int set)
{
    const bool bf = std::is_same<OT, uint16_t>::value;
    typedef typename std::conditional<bf, __nv_bfloat16, float>::type E;
    int C = NH * HS; size_t ni = (size_t)B * T * 3 * C, no = (size_t)B * T * C, ns = (size_t)B * NH * T * 2;
    std::vector<float> inp(ni), dout(no), di0(ni);
    for (auto &v : inp) v = bf ? bfr(frand()) : frand();
    for (auto &v : dout) v = bf ? bfr(frand()) : frand();
    for (auto &v : di0) v = frand();
    float scale = 1.0f / sqrtf((float)HS);
    /* double reference */
    std::vector<double> ro(no), rst(ns), rdi(ni, 0.0);
    for (int b = 0; b < B; b++) for (int h = 0; h < NH; h++) for (int t = 0; t < T; t++) {
        const float *q = &inp[((size_t)b * T + t) * 3 * C + h * HS];
        std::vector<double> p(t + 1), da(t + 1); double mx = -10000;
        for (int t2 = 0; t2 <= t; t2++) { const float *k = &inp[((size_t)b * T + t2) * 3 * C + C + h * HS]; double s = 0; for (int i = 0; i < HS; i++) s += (double)q[i] * k[i]; p[t2] = s * scale; mx = std::max(mx, p[t2]); }
        double sum = 0; for (auto &x : p) { x = exp(x - mx); sum += x; } for (auto &x : p) x /= sum;
        rst[(((size_t)b * NH + h) * T + t) * 2] = mx; rst[(((size_t)b * NH + h) * T + t) * 2 + 1] = 1 / sum;
        const float *dd = &dout[((size_t)b * T + t) * C + h * HS];
        for (int i = 0; i < HS; i++) { double o = 0; for (int t2 = 0; t2 <= t; t2++) o += p[t2] * inp[((size_t)b * T + t2) * 3 * C + 2 * C + h * HS + i]; ro[((size_t)b * T + t) * C + h * HS + i] = o; }
        double sd = 0;
        for (int t2 = 0; t2 <= t; t2++) { double a = 0; for (int i = 0; i < HS; i++) a += (double)dd[i] * inp[((size_t)b * T + t2) * 3 * C + 2 * C + h * HS + i]; da[t2] = a; sd += p[t2] * a; }
        for (int t2 = 0; t2 <= t; t2++) {
            double g = p[t2] * (da[t2] - sd) * scale;
            for (int i = 0; i < HS; i++) {
                rdi[((size_t)b * T + t) * 3 * C + h * HS + i] += g * inp[((size_t)b * T + t2) * 3 * C + C + h * HS + i];
                rdi[((size_t)b * T + t2) * 3 * C + C + h * HS + i] += g * q[i];
                rdi[((size_t)b * T + t2) * 3 * C + 2 * C + h * HS + i] += p[t2] * dd[i];
            }
        }
    }
    if (!set) for (size_t i = 0; i < ni; i++) rdi[i] += di0[i];
    sz_att_dims d = {B, T, C, NH, HS, scale};
    std::vector<OT> out(no), dinp(ni), dt(no);
    for (size_t i = 0; i < no; i++) { if (bf) ((uint16_t *)dt.data())[i] = sz_d_f2h(dout[i]); else ((float *)dt.data())[i] = dout[i]; }
    for (size_t i = 0; i < ni; i++) { if (set) memset(&dinp[i], 0xFF, sizeof(OT)); else if (bf) ((uint16_t *)dinp.data())[i] = sz_d_f2h(di0[i]); else ((float *)dinp.data())[i] = di0[i]; }
    std::vector<float> st(ns, NAN), Dg((size_t)B * NH * T, NAN);
    int nt = (T + 63) / 64;
    typedef sz_fa_lay<HS, E> L;
    launch(nt, NH, B, L::fwd, [&] { fa_fwd_k<HS, E, OT>(out.data(), st.data(), inp.data(), d); });
    launch(nt, NH, B, L::dq, [&] { fa_bwd_dq_k<HS, E, OT, OT>(dinp.data(), Dg.data(), dt.data(), inp.data(), st.data(), d, set); });
    launch(nt, NH, B, L::dkv, [&] { fa_bwd_dkv_k<HS, E, OT, OT>(dinp.data(), Dg.data(), dt.data(), inp.data(), st.data(), d, set); });
    auto get = [&](const std::vector<OT> &v, size_t i) { return bf ? sz_d_h2f(((const uint16_t *)v.data())[i]) : ((const float *)v.data())[i]; };
    double eo = 0, es = 0, ed = 0, ro_ = 0, rd_ = 0; int bad = 0;
    for (size_t i = 0; i < no; i++) { double e = fabs(get(out, i) - ro[i]); eo = std::max(eo, e); ro_ = std::max(ro_, e / ((bf ? 4e-3 : 1e-5) + (bf ? 1e-2 : 1e-4) * fabs(ro[i]))); if (!(e <= (bf ? 1e-2 : 1e-5) + (bf ? 1e-2 : 1e-4) * fabs(ro[i]))) bad++; }
    for (size_t i = 0; i < ns; i++) { double e = fabs(st[i] - rst[i]); es = std::max(es, e); if (!(e <= 1e-5 + 1e-4 * fabs(rst[i]))) bad++; }
    for (size_t i = 0; i < ni; i++) { double e = fabs(get(dinp, i) - rdi[i]); ed = std::max(ed, e); rd_ = std::max(rd_, e / ((bf ? 1e-2 : 1e-5 * T) + (bf ? 2e-2 : 1e-4) * fabs(rdi[i]))); if (!(e <= (bf ? 2e-2 : 1e-4) + (bf ? 2e-2 : 1e-4) * fabs(rdi[i]))) bad++; }
    printf("%s HS %d B %d T %d NH %d set %d: max err out %.3g stats %.3g dinp %.3g  worst/testbound out %.2f dinp %.2f %s\n", bf ? "bf16" : "fp32", HS, B, T, NH, set, eo, es, ed, ro_, rd_, bad ? "BAD" : "ok");
    return bad != 0;
}
int main()
{
    int f = 0;
    f |= run<64, float>(2, 17, 2, 0);  /* B*NH > 1, a partial tile */
    f |= run<32, float>(1, 1, 3, 1);   /* one row */
    f |= run<64, float>(1, 130, 1, 1); /* three tiles, the last with two rows */
    f |= run<64, uint16_t>(2, 17, 2, 1);
    f |= run<64, uint16_t>(1, 100, 1, 0);
    f |= run<128, uint16_t>(1, 70, 1, 1);
    f |= run<128, float>(1, 65, 1, 0);
    return f;
}
