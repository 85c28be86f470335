/* 5-point Jacobi stencil on a 2-D grid, ping-ponging two buffers. */
#include <stdio.h>
#include <stdlib.h>

#define N 512

static void sweep(const double *restrict in, double *restrict out) {
    for (int i = 1; i < N - 1; i++)
        for (int j = 1; j < N - 1; j++)
            out[i * N + j] = 0.2 * (in[i * N + j] + in[(i - 1) * N + j] + in[(i + 1) * N + j]
                                    + in[i * N + j - 1] + in[i * N + j + 1]);
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 1200;
    double *a = calloc(N * N, sizeof *a), *b = calloc(N * N, sizeof *b);
    for (int j = 0; j < N; j++) { a[j] = b[j] = 100.0; }
    for (int s = 0; s < steps; s++) {
        sweep(a, b);
        double *t = a; a = b; b = t;
    }
    double sum = 0;
    for (int i = 0; i < N * N; i++) sum += a[i];
    printf("stencil2d checksum %.6f\n", sum);
    free(a); free(b);
    return 0;
}
