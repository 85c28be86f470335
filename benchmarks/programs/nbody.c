/* All-pairs gravitational n-body step (sqrt, division, reductions). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define NB 1024

struct bodies { float x[NB], y[NB], z[NB], vx[NB], vy[NB], vz[NB], m[NB]; };

static void step(struct bodies *b, float dt) {
    for (int i = 0; i < NB; i++) {
        float ax = 0, ay = 0, az = 0;
        for (int j = 0; j < NB; j++) {
            float dx = b->x[j] - b->x[i], dy = b->y[j] - b->y[i], dz = b->z[j] - b->z[i];
            float d2 = dx * dx + dy * dy + dz * dz + 1e-3f;
            float inv = b->m[j] / (d2 * sqrtf(d2));
            ax += dx * inv; ay += dy * inv; az += dz * inv;
        }
        b->vx[i] += dt * ax; b->vy[i] += dt * ay; b->vz[i] += dt * az;
    }
    for (int i = 0; i < NB; i++) { b->x[i] += dt * b->vx[i]; b->y[i] += dt * b->vy[i]; b->z[i] += dt * b->vz[i]; }
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 60;
    struct bodies *b = calloc(1, sizeof *b);
    for (int i = 0; i < NB; i++) {
        b->x[i] = (float)(i % 32); b->y[i] = (float)(i / 32); b->z[i] = (float)(i % 7);
        b->m[i] = 1.0f + (float)(i % 3);
    }
    for (int s = 0; s < steps; s++) step(b, 1e-3f);
    double e = 0;
    for (int i = 0; i < NB; i++) e += b->m[i] * (b->vx[i] * b->vx[i] + b->vy[i] * b->vy[i] + b->vz[i] * b->vz[i]);
    printf("nbody checksum %.6e\n", e);
    free(b);
    return 0;
}
