/* A 7-point stencil on an n^3 grid, 4 steps: a 2-D block over (x, y), each thread walks z. */
#include "harness.cuh"

__global__ void stencil3d(const float *in, float *out, long n) {
  long x = blockIdx.x * (long)blockDim.x + threadIdx.x, y = blockIdx.y * (long)blockDim.y + threadIdx.y;
  if (x >= n || y >= n)
    return;
  long plane = n * n;
  for (long z = 0; z < n; z++) {
    long i = z * plane + y * n + x;
    if (x == 0 || y == 0 || z == 0 || x == n - 1 || y == n - 1 || z == n - 1)
      out[i] = in[i];
    else
      out[i] = 0.4f * in[i] + 0.1f * (in[i - 1] + in[i + 1] + in[i - n] + in[i + n] +
                                      in[i - plane] + in[i + plane]);
  }
}

static const int STEPS = 4;

int main(int argc, char **argv) {
  Options o = parse_options(argc, argv);
  for (long n : o.sizes) {
    std::vector<float> a((size_t)n * n * n);
    fill(a, 3);
    float *da = to_device(a), *db;
    CK(cudaMalloc(&db, a.size() * sizeof(float)));
    dim3 block(MIRECC_BLOCK_X(stencil3d, 32), MIRECC_BLOCK_Y(stencil3d, 4));
    dim3 grid(blocks_for(n, block.x), blocks_for(n, block.y));
    auto steps = [&] {
      for (int s = 0; s < STEPS; s++)
        stencil3d<<<grid, block>>>(s % 2 ? db : da, s % 2 ? da : db, n);
    };
    double t = time_launches(steps, o.reps);
    long m = 0;
    if (o.check) {
      CK(cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
      steps();
      std::vector<float> got = to_host(STEPS % 2 ? db : da, a.size());
      std::vector<float> p = a, q(a.size());
      long plane = n * n;
      for (int s = 0; s < STEPS; s++) {
        for (long z = 0; z < n; z++)
          for (long y = 0; y < n; y++)
            for (long x = 0; x < n; x++) {
              long i = z * plane + y * n + x;
              q[i] = (x == 0 || y == 0 || z == 0 || x == n - 1 || y == n - 1 || z == n - 1)
                         ? p[i]
                         : 0.4f * p[i] + 0.1f * (p[i - 1] + p[i + 1] + p[i - n] + p[i + n] +
                                                 p[i - plane] + p[i + plane]);
            }
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
