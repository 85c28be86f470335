/* out = in^T for an n x n matrix (one thread per element, reads coalesced along x). */
#include "harness.cuh"

__global__ void transpose(const float *in, float *out, long n) {
  long x = blockIdx.x * (long)blockDim.x + threadIdx.x, y = blockIdx.y * (long)blockDim.y + threadIdx.y;
  if (x < n && y < n)
    out[x * n + y] = in[y * n + x];
}

int main(int argc, char **argv) {
  Options o = parse_options(argc, argv);
  for (long n : o.sizes) {
    std::vector<float> a((size_t)n * n);
    fill(a, 1);
    float *da = to_device(a), *db;
    CK(cudaMalloc(&db, a.size() * sizeof(float)));
    dim3 block(MIRECC_BLOCK_X(transpose, 32), MIRECC_BLOCK_Y(transpose, 8));
    dim3 grid(blocks_for(n, block.x), blocks_for(n, block.y));
    double t = time_launches([&] { transpose<<<grid, block>>>(da, db, n); }, o.reps);
    long m = 0;
    if (o.check) {
      std::vector<float> got = to_host(db, a.size()), want(a.size());
      for (long y = 0; y < n; y++)
        for (long x = 0; x < n; x++) want[x * n + y] = a[y * n + x];
      m = misses(got, want);
    }
    report(n, t, o.check, m);
    CK(cudaFree(da));
    CK(cudaFree(db));
  }
  return 0;
}
