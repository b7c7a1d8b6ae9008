/* tests/sz_test_check.h — the checks the kernel suites (test_kernels, test_ops) share: a float
 * result against a double reference within atol + rtol |want|, and a kernel's gradient against
 * central finite differences of a loss computed in double. */
#ifndef SZ_TEST_CHECK_H
#define SZ_TEST_CHECK_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static inline double dot_d(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* 1 if |got - want| <= atol + rtol |want| everywhere; else prints the worst. */
static inline int check_arr(const char *what, const float *got, const double *want, size_t n, double rtol,
                            double atol)
{
    size_t bad = 0, worst = 0;
    double worst_ex = 0.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), lim = atol + rtol * fabs(want[i]);
        if (!(err <= lim)) bad++;
        if (!(err - lim <= worst_ex)) { worst_ex = err - lim; worst = i; }
    }
    if (bad)
        printf("\n  %s: %zu of %zu off, worst [%zu] got %.9g want %.9g\n", what, bad, n, worst,
               (double)got[worst], want[worst]);
    return bad == 0;
}

/* Central finite differences of loss() over x[0..n) (double, perturbed in place), compared with
 * grad (the kernel's), which started from grad0 (NULL: 0). */
typedef double (*loss_fn)(void *ctx);
static inline int check_fd(const char *what, loss_fn loss, void *ctx, double *x, size_t n, const float *grad,
                           const float *grad0, double tol)
{
    double *want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = 1e-5;
        x[i] = xi + h; double lp = loss(ctx);
        x[i] = xi - h; double lm = loss(ctx);
        x[i] = xi;
        want[i] = (grad0 ? grad0[i] : 0.0) + (lp - lm) / (2 * h);
    }
    int ok = check_arr(what, grad, want, n, tol, tol);
    free(want);
    return ok;
}
#endif
