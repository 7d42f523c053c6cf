// The harness's output checksum for sustained runs (--duration): every
// repeat's output is summed on the device, so the host compares 4 KiB per
// repeat instead of copying the whole output back.
//
//   checksum(x[0..n)) = sum over i of mix64((i << 32) | x[i])  (mod 2^64)
//
// where x are the output's 32-bit words and mix64 is splitmix64's
// finaliser. The sum is order-independent, so the grid shape does not
// change it; the harness adds the per-block partial sums on the host and
// computes the same function on the host for the first repeat's output.
// checksum_ptx.h embeds this file's PTX, so the harness needs neither nvcc
// nor a fatbin for it; regenerate it with `make checksum-ptx` after
// changing this file. It is harness machinery, not a released kernel.
typedef unsigned long long u64;

__device__ __forceinline__ u64 mix64(u64 z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Launch with blockDim.x a multiple of 32, at most 256; partial[blockIdx.x] gets the block's sum.
extern "C" __global__ void gpuattest_checksum(const unsigned* __restrict__ x, u64 n, u64* __restrict__ partial) {
  __shared__ u64 warp_sums[8];
  u64 acc = 0;
  const u64 stride = u64(blockDim.x) * gridDim.x;
  for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    acc += mix64((i << 32) | x[i]);
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    u64 s = 0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) s += warp_sums[w];
    partial[blockIdx.x] = s;
  }
}
