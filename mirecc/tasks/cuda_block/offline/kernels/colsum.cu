/* y = A^T x, row-major n x n, one thread per column (neighbouring threads read neighbouring words). */
#include "harness.cuh"

__global__ void colsum(const float *a, const float *x, float *y, long n) {
  long j = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (j >= n)
    return;
  float s = 0.0f;
  for (long i = 0; i < n; i++) s += a[i * n + j] * x[i];
  y[j] = s;
}

int main(int argc, char **argv) {
  Options o = parse_options(argc, argv);
  for (long n : o.sizes) {
    std::vector<float> a((size_t)n * n), x(n);
    fill(a, 6);
    fill(x, 7);
    float *da = to_device(a), *dx = to_device(x), *dy;
    CK(cudaMalloc(&dy, n * sizeof(float)));
    dim3 block(MIRECC_BLOCK_X(colsum, 128));
    dim3 grid(blocks_for(n, block.x));
    double t = time_launches([&] { colsum<<<grid, block>>>(da, dx, dy, n); }, o.reps);
    long m = 0;
    if (o.check) {
      std::vector<float> got = to_host(dy, n), want(n, 0.0f);
      for (long j = 0; j < n; j++) {
        float s = 0.0f;
        for (long i = 0; i < n; i++) s += a[i * n + j] * x[i];
        want[j] = s;
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
