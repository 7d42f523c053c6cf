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

// gpuattest_burn is the burn-in's load: an FMA-dense loop that keeps the
// FP32 pipes busy from registers (no memory traffic in the loop), as
// gpu-burn's does. Each thread runs 8 independent chains (so the FMA
// latency is hidden) of iters x 16 fused multiply-adds, then writes the
// chains' sum, added in order, to out[thread]: the same seed gives the
// same bits on every GPU and on the host (fmaf is exactly rounded), so
// the harness checks it against a host computation and every repeat
// against the first. 256 flops per thread per iteration.
extern "C" __global__ void gpuattest_burn(float* __restrict__ out, unsigned iters, float seed) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  const float m = 0.9999999f, c = 1e-7f;
  float a0 = seed + float(t & 1023) * 1e-6f, a1 = a0 + 0.125f, a2 = a0 + 0.25f, a3 = a0 + 0.375f;
  float a4 = a0 + 0.5f, a5 = a0 + 0.625f, a6 = a0 + 0.75f, a7 = a0 + 0.875f;
  for (unsigned i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      a0 = fmaf(a0, m, c);
      a1 = fmaf(a1, m, c);
      a2 = fmaf(a2, m, c);
      a3 = fmaf(a3, m, c);
      a4 = fmaf(a4, m, c);
      a5 = fmaf(a5, m, c);
      a6 = fmaf(a6, m, c);
      a7 = fmaf(a7, m, c);
    }
  }
  out[t] = ((((((a0 + a1) + a2) + a3) + a4) + a5) + a6) + a7;
}

// The memory sweep (--memsweep): every 32-bit word of a chunk gets a
// pattern that depends on its address in the sweep and on the pass, so a
// stuck bit, a coupling between cells or an address-decoder fault (two
// addresses reaching one cell) changes some word; odd passes write the
// inverse of the pass before (moving inversions: every bit is written
// both ways). gpuattest_mem_check counts the words that differ.
__device__ __forceinline__ unsigned mem_pattern(u64 addr, unsigned pass) {
  const unsigned v = unsigned(mix64(addr ^ (u64(pass >> 1) << 48)));
  return (pass & 1) ? ~v : v;
}

extern "C" __global__ void gpuattest_mem_write(unsigned* __restrict__ p, u64 n, u64 base, unsigned pass) {
  const u64 stride = u64(blockDim.x) * gridDim.x;
  for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = mem_pattern(base + i, pass);
}

// gpuattest_mem_check adds the words that differ to errors[0] and lowers
// errors[1] to the sweep address (base + i) of the first one it finds.
extern "C" __global__ void gpuattest_mem_check(const unsigned* __restrict__ p, u64 n, u64 base, unsigned pass, u64* __restrict__ errors) {
  const u64 stride = u64(blockDim.x) * gridDim.x;
  u64 bad = 0, first = ~0ull;
  for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (p[i] != mem_pattern(base + i, pass)) {
      ++bad;
      first = first < base + i ? first : base + i;
    }
  }
  if (bad) {
    atomicAdd(errors, bad);
    atomicMin(errors + 1, first);
  }
}

// gpuattest_copy is the bandwidth case (--membw): dst = src, n16 16-byte
// words, grid-stride; every byte is read once and written once.
extern "C" __global__ void gpuattest_copy(const uint4* __restrict__ src, uint4* __restrict__ dst, u64 n16) {
  const u64 stride = u64(blockDim.x) * gridDim.x;
  for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride) dst[i] = src[i];
}
