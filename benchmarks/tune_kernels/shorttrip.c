/* shorttrip: a u16 multiply-accumulate over rows of 23 elements, row after row. */
#include <stdio.h>
#include <stdlib.h>

static unsigned row(const unsigned short *restrict a, const unsigned short *restrict b, int n) {
    unsigned s = 0;
    for (int i = 0; i < n; i++)
        s += (unsigned)a[i] * b[i];
    return s;
}

int main(int argc, char **argv) {
    int rows = 4096, width = 23, reps = argc > 1 ? atoi(argv[1]) : 30000;
    unsigned short *a = malloc((size_t)rows * width * sizeof *a);
    unsigned short *b = malloc((size_t)width * sizeof *b);
    for (int i = 0; i < rows * width; i++) a[i] = (unsigned short)(i * 31 % 1000);
    for (int i = 0; i < width; i++) b[i] = (unsigned short)(i + 1);
    unsigned long long total = 0;
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < rows; k++)
            total += row(a + (size_t)k * width, b, width - (r & 1));
    printf("shorttrip checksum %llu\n", total);
    free(a); free(b);
    return 0;
}
