// gpuattest_burn_mma: the burn-in's tensor-core load (sm_80 and later),
// the harness's default burn on such GPUs; gpuattest_burn (checksum.cu)
// is the FFMA one. burn_mma_ptx.h embeds this file's PTX (compute_80),
// which the driver JIT-compiles as it does the checksum kernel's;
// regenerate it with `make checksum-ptx` after changing this file. It is
// harness machinery, not a released kernel.
//
// Each warp keeps four 16x16 A tiles (fp16) and one 16x8 B tile, all in
// registers, and runs iters rounds of eight mma.sync.m16n8k16 (fp16
// inputs, fp32 accumulate) on four independent accumulators: each
// accumulator gets A_j*B and then A_j*(-B). Every A value is k/8 with
// |k| <= 8 and B is 1/2, so every product and sum is a small dyadic
// rational that any tensor core computes exactly: a healthy GPU brings
// the accumulators back to zero after every round, and a wrong product
// anywhere stays in them. A last A_j*B each makes the result depend on
// the A values. Each warp writes the total of its accumulators to
// out[warp]: the sum over a tile does not depend on which lane holds
// which element, so the host computes it (burn_mma_host in harness.cc)
// without the fragment layout.

// burn_mma_value is element e (0-7) of lane's A fragment of tile j, for
// warp w and seed bits s: k/8 with k in [-8, 8].
__device__ __forceinline__ float burn_mma_value(unsigned w, unsigned lane, unsigned j, unsigned e, unsigned s) {
  unsigned h = (w * 0x9E3779B9u) ^ (lane * 0x85EBCA6Bu) ^ (j * 0xC2B2AE35u) ^ (e * 0x27D4EB2Fu) ^ s;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return float(int(h % 17u) - 8) * 0.125f;
}

__device__ __forceinline__ unsigned burn_pack(float lo, float hi) {
  unsigned short l, h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(l) : "f"(lo));
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(hi));
  return unsigned(l) | (unsigned(h) << 16);
}

#define BURN_MMA(c, a, b0, b1)                                                                   \
  asm volatile(                                                                                   \
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
      "{%0,%1,%2,%3};"                                                                            \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                            \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

extern "C" __global__ void gpuattest_burn_mma(float* __restrict__ out, unsigned iters, float seed) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned lane = threadIdx.x & 31, w = t >> 5;
  const unsigned s = __float_as_uint(seed);
  unsigned a[4][4];
#pragma unroll
  for (unsigned j = 0; j < 4; ++j)
#pragma unroll
    for (unsigned r = 0; r < 4; ++r)
      a[j][r] = burn_pack(burn_mma_value(w, lane, j, 2 * r, s), burn_mma_value(w, lane, j, 2 * r + 1, s));
  const unsigned b = burn_pack(0.5f, 0.5f), nb = b ^ 0x80008000u;
  float c[4][4] = {};
  for (unsigned i = 0; i < iters; ++i) {
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) BURN_MMA(c[j], a[j], b, b);
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) BURN_MMA(c[j], a[j], nb, nb);
  }
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) BURN_MMA(c[j], a[j], b, b);
  float sum = 0.0f;
#pragma unroll
  for (unsigned j = 0; j < 4; ++j)
#pragma unroll
    for (unsigned r = 0; r < 4; ++r) sum += c[j][r];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if (lane == 0) out[w] = sum;
}
