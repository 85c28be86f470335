/* Dense matrix multiply, i-k-j order so the inner loop is unit-stride. */
#include <stdio.h>
#include <stdlib.h>

#define N 384

static void matmul(const double *a, const double *b, double *restrict c) {
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++) {
            double aik = a[i * N + k];
            for (int j = 0; j < N; j++)
                c[i * N + j] += aik * b[k * N + j];
        }
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 16;
    double *a = malloc(N * N * sizeof *a), *b = malloc(N * N * sizeof *b), *c = calloc(N * N, sizeof *c);
    for (int i = 0; i < N * N; i++) { a[i] = (i % 13) * 0.5; b[i] = (i % 7) * 0.25; }
    for (int r = 0; r < reps; r++) matmul(a, b, c);
    double sum = 0;
    for (int i = 0; i < N * N; i++) sum += c[i];
    printf("matmul checksum %.3f\n", sum);
    free(a); free(b); free(c);
    return 0;
}
