/* Conditional update and integer max reduction (if-conversion). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int32_t clamp_and_max(int32_t *v, int n, int32_t lo, int32_t hi) {
    int32_t best = INT32_MIN;
    for (int i = 0; i < n; i++) {
        int32_t x = v[i];
        if (x < lo) x = lo;
        if (x > hi) x = hi;
        v[i] = x;
        best = x > best ? x : best;
    }
    return best;
}

int main(int argc, char **argv) {
    int n = 10000, reps = argc > 1 ? atoi(argv[1]) : 100000;
    int32_t *v = malloc(n * sizeof *v);
    int64_t total = 0;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < 8; i++) v[(r * 8 + i) % n] = (r * 2654435761u + i) % 20000 - 10000;
        if (r == 0) for (int i = 0; i < n; i++) v[i] = (i * 37) % 20000 - 10000;
        total += clamp_and_max(v, n, -5000 + r % 7, 5000 - r % 11);
    }
    printf("cond_max checksum %lld\n", (long long)total);
    free(v);
    return 0;
}
