/* y = A x, row-major n x n, one thread per row (each thread walks its row: strided across threads). */
#include "harness.cuh"

__global__ void matvec(const float *a, const float *x, float *y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float s = 0.0f;
  for (long j = 0; j < n; j++) s += a[i * n + j] * x[j];
  y[i] = s;
}

int main(int argc, char **argv) {
  Options o = parse_options(argc, argv);
  for (long n : o.sizes) {
    std::vector<float> a((size_t)n * n), x(n);
    fill(a, 4);
    fill(x, 5);
    float *da = to_device(a), *dx = to_device(x), *dy;
    CK(cudaMalloc(&dy, n * sizeof(float)));
    dim3 block(MIRECC_BLOCK_X(matvec, 256));
    dim3 grid(blocks_for(n, block.x));
    double t = time_launches([&] { matvec<<<grid, block>>>(da, dx, dy, n); }, o.reps);
    long m = 0;
    if (o.check) {
      std::vector<float> got = to_host(dy, n), want(n);
      for (long i = 0; i < n; i++) {
        float s = 0.0f;
        for (long j = 0; j < n; j++) s += a[i * n + j] * x[j];
        want[i] = s;
      }
      m = misses(got, want);
    }
    report(n, t, o.check, m);
    CK(cudaFree(da));
    CK(cudaFree(dx));
    CK(cudaFree(dy));
  }
  return 0;
}
