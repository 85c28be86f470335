/* A 5x5 convolution of an n x n image (zero outside), weights in constant memory. */
#include "harness.cuh"

__constant__ float weights[25];

__global__ void conv5x5(const float *in, float *out, long n) {
  long x = blockIdx.x * (long)blockDim.x + threadIdx.x, y = blockIdx.y * (long)blockDim.y + threadIdx.y;
  if (x >= n || y >= n)
    return;
  float s = 0.0f;
  for (int dy = -2; dy <= 2; dy++)
    for (int dx = -2; dx <= 2; dx++) {
      long yy = y + dy, xx = x + dx;
      if (yy >= 0 && yy < n && xx >= 0 && xx < n)
        s += weights[(dy + 2) * 5 + dx + 2] * in[yy * n + xx];
    }
  out[y * n + x] = s;
}

int main(int argc, char **argv) {
  Options o = parse_options(argc, argv);
  std::vector<float> w(25);
  fill(w, 10);
  CK(cudaMemcpyToSymbol(weights, w.data(), sizeof(float) * 25));
  for (long n : o.sizes) {
    std::vector<float> a((size_t)n * n);
    fill(a, 11);
    float *da = to_device(a), *db;
    CK(cudaMalloc(&db, a.size() * sizeof(float)));
    dim3 block(MIRECC_BLOCK_X(conv5x5, 32), MIRECC_BLOCK_Y(conv5x5, 8));
    dim3 grid(blocks_for(n, block.x), blocks_for(n, block.y));
    double t = time_launches([&] { conv5x5<<<grid, block>>>(da, db, n); }, o.reps);
    long m = 0;
    if (o.check) {
      std::vector<float> got = to_host(db, a.size()), want(a.size());
      for (long y = 0; y < n; y++)
        for (long x = 0; x < n; x++) {
          float s = 0.0f;
          for (int dy = -2; dy <= 2; dy++)
            for (int dx = -2; dx <= 2; dx++) {
              long yy = y + dy, xx = x + dx;
              if (yy >= 0 && yy < n && xx >= 0 && xx < n)
                s += w[(dy + 2) * 5 + dx + 2] * a[yy * n + xx];
            }
          want[y * n + x] = s;
        }
      m = misses(got, want);
    }
    report(n, t, o.check, m);
    CK(cudaFree(da));
    CK(cudaFree(db));
  }
  return 0;
}
