// reduce_sum: out[blockIdx.x] = sum of the elements of in that this block
// visits (grid-stride). Warp shuffles reduce within a warp, shared memory
// across the warps of a block. The harness launches it twice (grid of G
// blocks, then one block over the G partial sums), so the result is
// deterministic: no atomics, a fixed summation order for a given launch.
// blockDim.x must be a multiple of 32 and at most 1024.
extern "C" __global__ void reduce_sum(const float* __restrict__ in,
                                      float* __restrict__ out, int n) {
  __shared__ float warp_sums[32];
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += blockDim.x * gridDim.x) {
    v += in[i];
  }
  for (int off = 16; off > 0; off >>= 1) {
    v += __shfl_down_sync(0xffffffffu, v, off);
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int nwarps = blockDim.x >> 5;
    v = lane < nwarps ? warp_sums[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
      v += __shfl_down_sync(0xffffffffu, v, off);
    }
    if (lane == 0) out[blockIdx.x] = v;
  }
}
