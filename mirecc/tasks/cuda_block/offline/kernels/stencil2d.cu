/* 20 steps of a 5-point Jacobi stencil on an n x n grid (borders fixed), two buffers. */
#include "harness.cuh"

__global__ void stencil2d(const float *in, float *out, long n) {
  long x = blockIdx.x * (long)blockDim.x + threadIdx.x, y = blockIdx.y * (long)blockDim.y + threadIdx.y;
  if (x >= n || y >= n)
    return;
  if (x == 0 || y == 0 || x == n - 1 || y == n - 1) {
    out[y * n + x] = in[y * n + x];
    return;
  }
  out[y * n + x] = 0.2f * (in[y * n + x] + in[y * n + x - 1] + in[y * n + x + 1] +
                           in[(y - 1) * n + x] + in[(y + 1) * n + x]);
}

static const int STEPS = 20;

int main(int argc, char **argv) {
  Options o = parse_options(argc, argv);
  for (long n : o.sizes) {
    std::vector<float> a((size_t)n * n);
    fill(a, 2);
    float *da = to_device(a), *db;
    CK(cudaMalloc(&db, a.size() * sizeof(float)));
    dim3 block(MIRECC_BLOCK_X(stencil2d, 16), MIRECC_BLOCK_Y(stencil2d, 16));
    dim3 grid(blocks_for(n, block.x), blocks_for(n, block.y));
    auto steps = [&] {
      for (int s = 0; s < STEPS; s++) {
        stencil2d<<<grid, block>>>(s % 2 ? db : da, s % 2 ? da : db, n);
      }
    };
    double t = time_launches(steps, o.reps);
    long m = 0;
    if (o.check) {
      CK(cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
      steps();
      std::vector<float> got = to_host(STEPS % 2 ? db : da, a.size());
      std::vector<float> p = a, q(a.size());
      for (int s = 0; s < STEPS; s++) {
        for (long y = 0; y < n; y++)
          for (long x = 0; x < n; x++)
            q[y * n + x] = (x == 0 || y == 0 || x == n - 1 || y == n - 1)
                               ? p[y * n + x]
                               : 0.2f * (p[y * n + x] + p[y * n + x - 1] + p[y * n + x + 1] +
                                         p[(y - 1) * n + x] + p[(y + 1) * n + x]);
        std::swap(p, q);
      }
      m = misses(got, p);
    }
    report(n, t, o.check, m);
    CK(cudaFree(da));
    CK(cudaFree(db));
  }
  return 0;
}
