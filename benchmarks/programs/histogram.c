/* Byte histogram: a scatter with conflicts, hard for vectorizers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int n = 1 << 20, reps = argc > 1 ? atoi(argv[1]) : 450;
    uint8_t *data = malloc(n);
    uint32_t state = 12345;
    for (int i = 0; i < n; i++) { state = state * 1103515245u + 12345u; data[i] = (uint8_t)(state >> 24); }
    uint64_t hist[256] = {0};
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++)
            hist[data[i]]++;
    uint64_t check = 0;
    for (int b = 0; b < 256; b++) check = check * 31 + hist[b];
    printf("histogram checksum %llu\n", (unsigned long long)check);
    free(data);
    return 0;
}
