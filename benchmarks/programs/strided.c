/* Interleaved complex multiply (stride-2 access) on short arrays. */
#include <stdio.h>
#include <stdlib.h>

static void cmul(int n, const float *restrict a, const float *restrict b, float *restrict c) {
    for (int i = 0; i < n; i++) {
        float ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
        c[2 * i] = ar * br - ai * bi;
        c[2 * i + 1] = ar * bi + ai * br;
    }
}

int main(int argc, char **argv) {
    int n = 1000, reps = argc > 1 ? atoi(argv[1]) : 400000;
    float *a = malloc(2 * n * sizeof *a), *b = malloc(2 * n * sizeof *b), *c = malloc(2 * n * sizeof *c);
    for (int i = 0; i < 2 * n; i++) { a[i] = (float)(i % 9) * 0.1f; b[i] = (float)(i % 5) * 0.2f; }
    double sum = 0;
    for (int r = 0; r < reps; r++) {
        cmul(n, a, b, c);
        sum += c[r % (2 * n)];
    }
    printf("strided checksum %.4f\n", sum);
    free(a); free(b); free(c);
    return 0;
}
