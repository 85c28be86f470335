/* gather: a sum over a float array read through an index array (L2-resident). */
#include <stdio.h>
#include <stdlib.h>

static float gather(int n, const float *restrict a, const int *restrict idx) {
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[idx[i]];
    return s;
}

int main(int argc, char **argv) {
    int n = 8192, reps = argc > 1 ? atoi(argv[1]) : 30000;
    float *a = malloc(n * sizeof *a);
    int *idx = malloc(n * sizeof *idx);
    for (int i = 0; i < n; i++) { a[i] = (float)(i % 13) * 0.5f; idx[i] = (i * 7919) % n; }
    double sum = 0;
    for (int r = 0; r < reps; r++)
        sum += gather(n - (r & 7), a, idx);
    printf("gather checksum %.3f\n", sum);
    free(a); free(idx);
    return 0;
}
