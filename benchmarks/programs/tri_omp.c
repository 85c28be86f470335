/* Triangular OpenMP loop nest: row i does i units of work, so the runtime's
 * default static schedule hands the last thread most of it (an irregular
 * loop where the schedule matters).  Built without -fopenmp the pragma is
 * ignored and it runs on one thread, with the same output: each row's sum is
 * computed by one thread in a fixed order. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) * 1000 : 32000;
    unsigned *row = malloc(sizeof *row * (size_t)n);
    unsigned *x = malloc(sizeof *x * (size_t)n);
    for (int i = 0; i < n; i++) x[i] = (unsigned)i * 2654435761u;
#pragma omp parallel for
    for (int i = 0; i < n; i++) {
        unsigned s = 0;
        for (int j = 0; j <= i; j++) {
            unsigned v = x[j] ^ (unsigned)i;
            s += (v * v) >> (j & 7);
        }
        row[i] = s;
    }
    unsigned long long check = 0;
    for (int i = 0; i < n; i++) check = check * 1000003u + row[i];
    printf("tri_omp checksum %llu\n", check);
    free(row);
    free(x);
    return 0;
}
