/* saxpy: y += a*x over float arrays that stay in L2, repeated. */
#include <stdio.h>
#include <stdlib.h>

static void saxpy(int n, float a, const float *restrict x, float *restrict y) {
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

int main(int argc, char **argv) {
    int n = 4096, reps = argc > 1 ? atoi(argv[1]) : 400000;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (int i = 0; i < n; i++) { x[i] = (float)(i % 17) * 0.25f; y[i] = 1.0f; }
    for (int r = 0; r < reps; r++)
        saxpy(n, r % 2 ? 1e-4f : -1e-4f, x, y);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += y[i];
    printf("saxpy checksum %.6f\n", sum);
    free(x); free(y);
    return 0;
}
