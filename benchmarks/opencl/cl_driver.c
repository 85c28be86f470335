/* cl_driver: a small OpenCL host program that runs one kernel of a source
 * file, for mire bench opencl and the tests (an ordinary OpenCL program: it
 * knows nothing of mirecc).
 *
 *   cl_driver FILE.cl KERNEL GLOBAL LOCAL LAUNCHES ARG...
 *
 * GLOBAL: work-items, "N" or "NxM" or "NxMxK"; LOCAL: the same, or 0 (the
 * platform's choice).  ARG, in the kernel's order: f:N a float buffer of N
 * elements ((i % 16 + 1) / 16), i:N an int buffer (i % 16), F:x a float, I:n
 * an int, c:N a buffer of N bytes (i % 16).  Prints the wall time of the launches (after clFinish) and an FNV
 * digest of every buffer's bytes after them.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x, what)                                                       \
  do {                                                                       \
    cl_int e_ = (x);                                                         \
    if (e_ != CL_SUCCESS) {                                                  \
      fprintf(stderr, "cl_driver: %s failed: %d\n", what, (int)e_);          \
      return 1;                                                              \
    }                                                                        \
  } while (0)

static int dims_of(const char *text, size_t *v) {
  int n = 0;
  char *end;
  v[0] = v[1] = v[2] = 1;
  do {
    v[n++] = strtoul(text, &end, 10);
    text = end + 1;
  } while (*end == 'x' && n < 3);
  return n;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: cl_driver FILE.cl KERNEL GLOBAL LOCAL LAUNCHES ARG...\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "r");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  static char source[1 << 20];
  size_t len = fread(source, 1, sizeof source - 1, f);
  fclose(f);
  source[len] = 0;
  size_t global[3], local[3];
  cl_uint dims = (cl_uint)dims_of(argv[3], global);
  int has_local = strcmp(argv[4], "0") != 0;
  if (has_local) dims_of(argv[4], local);
  int launches = atoi(argv[5]);

  cl_platform_id platform;
  cl_device_id device;
  cl_int err;
  CHECK(clGetPlatformIDs(1, &platform, NULL), "clGetPlatformIDs");
  CHECK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL), "clGetDeviceIDs");
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  CHECK(err, "clCreateContext");
  cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
  CHECK(err, "clCreateCommandQueue");
  const char *src = source;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  CHECK(err, "clCreateProgramWithSource");
  if (clBuildProgram(prog, 1, &device, "", NULL, NULL) != CL_SUCCESS) {
    char log[8192];
    clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    fprintf(stderr, "cl_driver: build failed:\n%s\n", log);
    return 1;
  }
  cl_kernel k = clCreateKernel(prog, argv[2], &err);
  CHECK(err, "clCreateKernel");
  int nargs = argc - 6;
  cl_mem bufs[32] = {0};
  size_t sizes[32] = {0};
  for (int a = 0; a < nargs && a < 32; a++) {
    const char *spec = argv[6 + a];
    if ((spec[0] == 'f' || spec[0] == 'i' || spec[0] == 'c') && spec[1] == ':') {
      size_t n = strtoul(spec + 2, NULL, 10);
      sizes[a] = spec[0] == 'c' ? n : n * 4;
      void *host = malloc(sizes[a]);
      for (size_t i = 0; i < n; i++) {
        if (spec[0] == 'f') ((float *)host)[i] = (float)(i % 16 + 1) / 16.0f;
        else if (spec[0] == 'i') ((int *)host)[i] = (int)(i % 16);
        else ((unsigned char *)host)[i] = (unsigned char)(i % 16);
      }
      bufs[a] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizes[a], host,
                               &err);
      free(host);
      CHECK(err, "clCreateBuffer");
      CHECK(clSetKernelArg(k, (cl_uint)a, sizeof(cl_mem), &bufs[a]), "clSetKernelArg");
    } else if (spec[0] == 'F' && spec[1] == ':') {
      float v = strtof(spec + 2, NULL);
      CHECK(clSetKernelArg(k, (cl_uint)a, sizeof v, &v), "clSetKernelArg");
    } else if (spec[0] == 'I' && spec[1] == ':') {
      int v = atoi(spec + 2);
      CHECK(clSetKernelArg(k, (cl_uint)a, sizeof v, &v), "clSetKernelArg");
    } else {
      fprintf(stderr, "cl_driver: argument %d: %s is not f:N, i:N, c:N, F:x or I:n\n", a, spec);
      return 2;
    }
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int r = 0; r < launches; r++)
    CHECK(clEnqueueNDRangeKernel(q, k, dims, NULL, global, has_local ? local : NULL, 0, NULL,
                                 NULL), "clEnqueueNDRangeKernel");
  CHECK(clFinish(q), "clFinish");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  uint64_t h = 14695981039346656037ull;
  for (int a = 0; a < nargs && a < 32; a++) {
    if (!bufs[a]) continue;
    unsigned char *host = malloc(sizes[a]);
    CHECK(clEnqueueReadBuffer(q, bufs[a], CL_TRUE, 0, sizes[a], host, 0, NULL, NULL),
          "clEnqueueReadBuffer");
    for (size_t i = 0; i < sizes[a]; i++) h = (h ^ host[i]) * 1099511628211ull;
    free(host);
    clReleaseMemObject(bufs[a]);
  }
  printf("seconds %.6f\ndigest %016llx\n",
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
         (unsigned long long)h);
  clReleaseKernel(k);
  clReleaseProgram(prog);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return 0;
}
