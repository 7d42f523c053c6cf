// vector_add: c[i] = a[i] + b[i]. Memory bound: 12 bytes moved per flop.
// Grid-stride loop so any grid size covers any n.
extern "C" __global__ void vector_add(const float* __restrict__ a,
                                      const float* __restrict__ b,
                                      float* __restrict__ c, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += blockDim.x * gridDim.x) {
    c[i] = a[i] + b[i];
  }
}
