/* Dot product of int8 vectors accumulated in int32 (quantised inference). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int32_t dot(const int8_t *a, const int8_t *b, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

int main(int argc, char **argv) {
    int n = 8192, reps = argc > 1 ? atoi(argv[1]) : 100000;
    int8_t *a = malloc(n), *b = malloc(n);
    for (int i = 0; i < n; i++) { a[i] = (int8_t)(i * 7 % 255 - 127); b[i] = (int8_t)(i * 13 % 251 - 125); }
    int64_t total = 0;
    for (int r = 0; r < reps; r++) {
        a[r % n] ^= 1;
        total += dot(a, b, n);
    }
    printf("dot_int8 checksum %lld\n", (long long)total);
    free(a); free(b);
    return 0;
}
