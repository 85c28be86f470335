/* C = A B^T, n x n, one thread per element of C (both operands walked along their rows). */
#include "harness.cuh"

__global__ void matmul_nt(const float *a, const float *b, float *c, long n) {
  long j = blockIdx.x * (long)blockDim.x + threadIdx.x, i = blockIdx.y * (long)blockDim.y + threadIdx.y;
  if (i >= n || j >= n)
    return;
  float s = 0.0f;
  for (long k = 0; k < n; k++) s += a[i * n + k] * b[j * n + k];
  c[i * n + j] = s;
}

int main(int argc, char **argv) {
  Options o = parse_options(argc, argv);
  for (long n : o.sizes) {
    std::vector<float> a((size_t)n * n), b((size_t)n * n);
    fill(a, 8);
    fill(b, 9);
    float *da = to_device(a), *db = to_device(b), *dc;
    CK(cudaMalloc(&dc, a.size() * sizeof(float)));
    dim3 block(MIRECC_BLOCK_X(matmul_nt, 16), MIRECC_BLOCK_Y(matmul_nt, 16));
    dim3 grid(blocks_for(n, block.x), blocks_for(n, block.y));
    double t = time_launches([&] { matmul_nt<<<grid, block>>>(da, db, dc, n); }, o.reps);
    long m = 0;
    if (o.check) {
      std::vector<float> got = to_host(dc, a.size()), want(a.size());
      for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
          float s = 0.0f;
          for (long k = 0; k < n; k++) s += a[i * n + k] * b[j * n + k];
          want[i * n + j] = s;
        }
      m = misses(got, want);
    }
    report(n, t, o.check, m);
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
  }
  return 0;
}
