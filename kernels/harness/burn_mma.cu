// gpuattest_burn_mma: the burn-in's tensor-core load (sm_80 and later),
// the harness's default burn on such GPUs; gpuattest_burn (checksum.cu)
// is the FFMA one. burn_mma_ptx.h and burn_mma_cubin.h embed this file
// (PTX for compute_80, cubins for sm_80 and sm_90); regenerate them with
// `make -C kernels checksum-ptx` after changing it. It is harness
// machinery, not a released kernel.
//
// Operands. Each warp keeps four 16x16 A tiles and two 16x8 B tiles
// (fp16) in registers. In every tile the values at reduction index k < 3
// (A's columns 0-2, B's rows 0-2) are "wide": integers with 11
// significant bits (1024 <= |v| <= 2047, every bit of the fp16 mantissa
// in use); the others are "narrow" (|v| <= 255). So in every dot product
// of 16 three products pair two full mantissas (every bit of both of the
// multiplier's inputs, and of its 22-bit product, is exercised) and
// thirteen pair narrow values. Tiles are scaled by powers of two (A 2^0,
// 2^-3, 2^2, 2^-5; B 2^-2, 2^3) so that the aligner sees different
// exponents. A dot product is then an integer (times the two tiles'
// scales) below 3 * 2047^2 + 13 * 255^2 < 2^24, and so is every partial
// sum in any order: any tensor core computes it exactly (mma.sync
// m16n8k16, fp16 inputs, fp32 accumulate). Full mantissas on every
// product would not fit: sixteen 22-bit products need 26 bits.
//
// Rounds. A round runs eight mma: each accumulator gets A*B and then
// A*(-B), which brings it back exactly, so a wrong product or sum in any
// round stays in it to the end. Operands change every round: round u of
// a block of 16 rotates A register u (of 16) by four lanes across the
// warp (__shfl_sync, lane L takes lane L+4's: a value keeps its column
// and moves to another row) and B register u % 4 by twelve (another
// column), and odd rounds pair each accumulator with another A tile, so
// the A and B values that meet in a dot product change from round to
// round. After 128 rounds (8 rotations of every register) the fragments
// are back where they started, so the harness sizes launches in
// multiples of BURN_PERIOD and a launch's result does not depend on its
// length: GPUs of one model give identical outputs whatever their
// calibration, and the harness compares them.
//
// Memory. Every mem_every blocks of 16 rounds each lane loads 16 bytes of
// a buffer far larger than L2 (stream, n16 uint4 words, filled by
// gpuattest_burn_stream_init), checks each word against its address
// pattern or its inverse and writes the inverse back: the warps sweep the
// buffer together, coalesced, so HBM and its power are loaded beside the
// tensor cores, and a word that is neither value counts as an error.
//
// Result. After the rounds each accumulator gets A*B once more; each
// warp writes out[warp] = the wrapping sum over its lanes of
// burn_mix(value bits, lane, accumulator, element), plus the memory
// errors times BURN_ERROR_WEIGHT. The harness computes every warp's value
// on the host (burn_mma_host in harness.cc) from the fragment layout and
// compares them all.

#define BURN_PERIOD 128u  // rounds after which every fragment is back

typedef unsigned long long u64;

// burn_hash is a 32-bit finaliser (murmur3's).
__device__ __forceinline__ unsigned burn_hash(unsigned h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// burn_int is the integer behind element e (0-7 for A, 0-3 for B) of
// lane's fragment of tile j (A: 0-3, B: 4-5) in warp w, for seed s: wide
// (1024 <= |v| <= 2047) at reduction index k < 3, narrow (|v| <= 255)
// elsewhere. mma.sync m16n8k16 puts A's element e of lane at column
// 2 * (lane % 4) + (e & 1) + (e >= 4 ? 8 : 0) and B's at row
// 2 * (lane % 4) + (e & 1) + (e >= 2 ? 8 : 0).
__device__ __forceinline__ int burn_int(unsigned w, unsigned lane, unsigned j, unsigned e, unsigned s) {
  const unsigned h = burn_hash(burn_hash(w * 0x9E3779B9u + s) ^ (lane << 8) ^ (j << 4) ^ e);
  const unsigned k = 2 * (lane % 4) + (e & 1) + ((j < 4 ? e >= 4 : e >= 2) ? 8 : 0);
  const int mag = k < 3 ? int(1024u + (h & 1023u)) : int((h >> 10) % 256u);
  return (h >> 31) ? -mag : mag;
}

// burn_scale is tile j's power-of-two scale.
__device__ __forceinline__ float burn_scale(unsigned j) {
  const float sc[6] = {1.0f, 0.125f, 4.0f, 0.03125f, 0.25f, 8.0f};
  return sc[j];
}

__device__ __forceinline__ unsigned burn_pack(float lo, float hi) {
  unsigned short l, h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(l) : "f"(lo));
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(hi));
  return unsigned(l) | (unsigned(h) << 16);
}

// burn_mix hashes one accumulator element's bits with its position.
__device__ __forceinline__ unsigned burn_mix(float v, unsigned lane, unsigned j, unsigned r) {
  return burn_hash(__float_as_uint(__fadd_rn(v, 0.0f)) ^ (lane * 0x01000193u) ^ (j << 28) ^ (r << 24));
}

// burn_pattern is the stream word at index i.
__device__ __forceinline__ unsigned burn_pattern(u64 i) {
  return unsigned(i) * 0x9E3779B1u ^ unsigned(i >> 32) ^ 0x5bd1e995u;
}

#define BURN_MMA(c, a, b0, b1)                                                                   \
  asm volatile(                                                                                   \
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
      "{%0,%1,%2,%3};"                                                                            \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                            \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

// kErrorWeight is what one memory error adds to a warp's result.
#define BURN_ERROR_WEIGHT 0x9E3779B1u

extern "C" __global__ void gpuattest_burn_stream_init(uint4* __restrict__ p, u64 n16) {
  const u64 stride = u64(blockDim.x) * gridDim.x;
  for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride)
    p[i] = make_uint4(burn_pattern(4 * i), burn_pattern(4 * i + 1), burn_pattern(4 * i + 2), burn_pattern(4 * i + 3));
}

// gpuattest_burn_mma: iters rounds (a multiple of BURN_PERIOD), then the
// result as above. inject != 0 flips the lowest mantissa bit of one A
// value of warp 0 before the last pass (the harness's --inject-fault
// burn: what a stuck multiplier bit does to the result).
extern "C" __global__ void gpuattest_burn_mma(unsigned* __restrict__ out, unsigned iters, unsigned seed, uint4* __restrict__ stream,
                                              u64 n16, unsigned mem_every, unsigned inject) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned lane = threadIdx.x & 31, w = t >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
  unsigned a[4][4], b[4];  // b: B tile 4 (b[0], b[1]) and B tile 5 (b[2], b[3])
#pragma unroll
  for (unsigned j = 0; j < 4; ++j)
#pragma unroll
    for (unsigned r = 0; r < 4; ++r)
      a[j][r] = burn_pack(float(burn_int(w, lane, j, 2 * r, seed)) * burn_scale(j), float(burn_int(w, lane, j, 2 * r + 1, seed)) * burn_scale(j));
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const unsigned j = 4 + r / 2, e = 2 * (r % 2);
    b[r] = burn_pack(float(burn_int(w, lane, j, e, seed)) * burn_scale(j), float(burn_int(w, lane, j, e + 1, seed)) * burn_scale(j));
  }
  float c[4][4] = {};
  unsigned errors = 0;
  u64 slot = w;  // this warp's next 512-byte slot of the stream
  const u64 slots = n16 / 32;
  unsigned until_mem = mem_every;
  for (unsigned i = 0; i < iters; i += 16) {
#pragma unroll
    for (unsigned u = 0; u < 16; ++u) {
      const unsigned nb0 = b[0] ^ 0x80008000u, nb1 = b[1] ^ 0x80008000u, nb2 = b[2] ^ 0x80008000u, nb3 = b[3] ^ 0x80008000u;
      const unsigned p = u & 1;  // odd rounds pair accumulator j with A tile j ^ 1
      BURN_MMA(c[0], a[0 ^ p], b[0], b[1]);
      BURN_MMA(c[1], a[1 ^ p], b[0], b[1]);
      BURN_MMA(c[2], a[2 ^ p], b[2], b[3]);
      BURN_MMA(c[3], a[3 ^ p], b[2], b[3]);
      BURN_MMA(c[0], a[0 ^ p], nb0, nb1);
      BURN_MMA(c[1], a[1 ^ p], nb0, nb1);
      BURN_MMA(c[2], a[2 ^ p], nb2, nb3);
      BURN_MMA(c[3], a[3 ^ p], nb2, nb3);
      a[u / 4][u % 4] = __shfl_sync(0xffffffffu, a[u / 4][u % 4], (lane + 4) & 31);
      b[u % 4] = __shfl_sync(0xffffffffu, b[u % 4], (lane + 12) & 31);
    }
    if (slots && mem_every && --until_mem == 0) {
      until_mem = mem_every;
      const u64 k = (slot % slots) * 32 + lane;
      uint4 x = stream[k];
      const unsigned d0 = x.x ^ burn_pattern(4 * k), d1 = x.y ^ burn_pattern(4 * k + 1);
      const unsigned d2 = x.z ^ burn_pattern(4 * k + 2), d3 = x.w ^ burn_pattern(4 * k + 3);
      errors += (d0 != 0u && d0 != ~0u) + (d1 != 0u && d1 != ~0u) + (d2 != 0u && d2 != ~0u) + (d3 != 0u && d3 != ~0u);
      stream[k] = make_uint4(~x.x, ~x.y, ~x.z, ~x.w);
      slot += nwarps;
    }
  }
  if (inject && w == 0 && lane == 0) a[0][0] ^= 1u;
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) {
    if (j < 2) {
      BURN_MMA(c[j], a[j], b[0], b[1]);
    } else {
      BURN_MMA(c[j], a[j], b[2], b[3]);
    }
  }
  unsigned h = errors * BURN_ERROR_WEIGHT;
#pragma unroll
  for (unsigned j = 0; j < 4; ++j)
#pragma unroll
    for (unsigned r = 0; r < 4; ++r) h += burn_mix(c[j][r], lane, j, r);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) h += __shfl_down_sync(0xffffffffu, h, off);
  if (lane == 0) out[w] = h;
}
