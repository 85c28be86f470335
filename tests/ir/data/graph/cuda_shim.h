/* Minimal CUDA shim for clang --cuda-device-only -nocudainc -nocudalib. */
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __host__ __attribute__((host))
struct __cuda_builtin_threadIdx_t {
  static __attribute__((device)) unsigned int __fetch_builtin_x() { return __nvvm_read_ptx_sreg_tid_x(); }
  __declspec(property(get = __fetch_builtin_x)) unsigned int x;
};
struct __cuda_builtin_blockIdx_t {
  static __attribute__((device)) unsigned int __fetch_builtin_x() { return __nvvm_read_ptx_sreg_ctaid_x(); }
  __declspec(property(get = __fetch_builtin_x)) unsigned int x;
};
struct __cuda_builtin_blockDim_t {
  static __attribute__((device)) unsigned int __fetch_builtin_x() { return __nvvm_read_ptx_sreg_ntid_x(); }
  __declspec(property(get = __fetch_builtin_x)) unsigned int x;
};
extern const __attribute__((device)) __cuda_builtin_threadIdx_t threadIdx;
extern const __attribute__((device)) __cuda_builtin_blockIdx_t blockIdx;
extern const __attribute__((device)) __cuda_builtin_blockDim_t blockDim;
extern "C" __device__ void __syncthreads() __asm__("llvm.nvvm.barrier0");
