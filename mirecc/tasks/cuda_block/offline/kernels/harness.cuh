/* offline/kernels/harness.cuh: what the project's own CUDA kernels
 * share.  Each program is one kernel whose launch takes its block shape from
 * <mirecc/launch.h> (MIRECC_BLOCK_X/Y(kernel, default)); the grid follows the
 * block.  Command line:  prog SIZE [SIZE ...] [-r REPS] [-c]
 * For each SIZE it prints, in PolyBench-ACC's words (cuda_labels.py
 * parses them):
 *     size N
 *     GPU Time in seconds:
 *     0.000123          (median of REPS timed launches, CUDA events, after one warm-up)
 *     Number of misses: M   (with -c: outputs off the CPU reference)
 */
#ifndef MIRECC_BENCH_HARNESS_CUH
#define MIRECC_BENCH_HARNESS_CUH
#include <cuda_runtime.h>
#include <mirecc/launch.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      printf("CUDA error: %s (%s:%d)\n", cudaGetErrorName(e_), __FILE__, __LINE__); \
      exit(3);                                                                    \
    }                                                                             \
  } while (0)

struct Options {
  std::vector<long> sizes;
  int reps = 10;
  bool check = false;
};

static Options parse_options(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-r") && i + 1 < argc)
      o.reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-c"))
      o.check = true;
    else
      o.sizes.push_back(atol(argv[i]));
  }
  if (o.sizes.empty()) {
    fprintf(stderr, "usage: %s SIZE [SIZE ...] [-r REPS] [-c]\n", argv[0]);
    exit(2);
  }
  return o;
}

/* deterministic inputs in [-0.5, 0.5) */
static void fill(std::vector<float> &v, unsigned salt) {
  for (size_t i = 0; i < v.size(); i++)
    v[i] = (float)((i * 7919u + salt * 104729u) % 1013u) / 1013.0f - 0.5f;
}

static float *to_device(const std::vector<float> &v) {
  float *d = nullptr;
  CK(cudaMalloc(&d, v.size() * sizeof(float)));
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

static std::vector<float> to_host(const float *d, size_t n) {
  std::vector<float> v(n);
  CK(cudaMemcpy(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

static unsigned blocks_for(long n, unsigned block) { return (unsigned)((n + block - 1) / block); }

/* median seconds of `reps` timed calls of `launch` after one warm-up */
template <class F>
static double time_launches(F launch, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int r = 0; r < reps; r++) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3);
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

static long misses(const std::vector<float> &got, const std::vector<float> &want) {
  long m = 0;
  for (size_t i = 0; i < got.size(); i++) {
    float tol = 1e-3f * std::max(1.0f, std::fabs(want[i]));
    if (!(std::fabs(got[i] - want[i]) <= tol))
      m++;
  }
  return m;
}

static void report(long n, double seconds, bool check, long missed) {
  printf("size %ld\nGPU Time in seconds:\n%0.6f\n", n, seconds);
  if (check)
    printf("Number of misses: %ld\n", missed);
  fflush(stdout);
}
#endif
