/* A user's own benchmark of GSL's reference CBLAS (libgslcblas), the
 * program `benchmarks/tune_project.py gsl` tunes: level-3 and level-2
 * routines on single and double matrices, unit strides, sizes that fit the
 * caches.  The output is a checksum of every result, printed exactly (%a),
 * so any change in a computed value is caught. */
#include <stdio.h>
#include <stdlib.h>
#include <gsl/gsl_cblas.h>

enum { N = 192, REPEAT = 40 };

static unsigned long long state = 0x9E3779B97F4A7C15ull;

static double next_value(void)
{
    /* xorshift64*: a fixed sequence, the same on every machine */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return (double)((state * 2685821657736338717ull) >> 40) / (double)(1ull << 24) - 0.5;
}

static double sum_d(const double *x, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += x[i] * (double)(i % 7 + 1);
    return s;
}

static double sum_f(const float *x, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += (double)x[i] * (double)(i % 7 + 1);
    return s;
}

int main(void)
{
    double *a = malloc(sizeof(double) * N * N), *b = malloc(sizeof(double) * N * N);
    double *c = malloc(sizeof(double) * N * N), *x = malloc(sizeof(double) * N);
    double *y = malloc(sizeof(double) * N);
    float *fa = malloc(sizeof(float) * N * N), *fb = malloc(sizeof(float) * N * N);
    float *fc = malloc(sizeof(float) * N * N), *fx = malloc(sizeof(float) * N);
    float *fy = malloc(sizeof(float) * N);
    if (!a || !b || !c || !x || !y || !fa || !fb || !fc || !fx || !fy) {
        fputs("cblas_bench: out of memory\n", stderr);
        return 1;
    }
    for (int i = 0; i < N * N; i++) {
        a[i] = next_value();
        b[i] = next_value();
        c[i] = 0.0;
        fa[i] = (float)next_value();
        fb[i] = (float)next_value();
        fc[i] = 0.0f;
    }
    for (int i = 0; i < N; i++) {
        x[i] = next_value();
        y[i] = 0.0;
        fx[i] = (float)next_value();
        fy[i] = 0.0f;
    }

    double check = 0.0;
    for (int r = 0; r < REPEAT; r++) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N,
                    1.0, a, N, b, N, 0.5, c, N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N,
                    1.0f, fa, N, fb, N, 0.5f, fc, N);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, N, N, N,
                    0.25, a, N, b, N, 1.0, c, N);
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, N, N,
                    0.5f, fa, N, 0.75f, fc, N);
        for (int k = 0; k < 40; k++) {
            cblas_dgemv(CblasRowMajor, CblasTrans, N, N, 1.0, a, N, x, 1, 0.0, y, 1);
            cblas_sgemv(CblasColMajor, CblasNoTrans, N, N, 1.0f, fa, N, fx, 1, 0.5f, fy, 1);
            cblas_dger(CblasRowMajor, N, N, 1e-3, x, 1, y, 1, b, N);
        }
        check += sum_d(c, N * N) + sum_f(fc, N * N) + sum_d(y, N) + sum_f(fy, N);
    }
    printf("checksum %a\n", check);
    printf("c[0] %a fc[0] %a y[0] %a\n", c[0], (double)fc[0], y[0]);
    free(a); free(b); free(c); free(x); free(y);
    free(fa); free(fb); free(fc); free(fx); free(fy);
    return 0;
}
