// sgemm: C = alpha * A * B + beta * C, row-major, A is MxK, B is KxN.
// Tiled: each 16x16 block stages one tile of A and one of B in shared
// memory per step along K.
#define TILE 16

extern "C" __global__ void sgemm(int M, int N, int K, float alpha,
                                 const float* __restrict__ A,
                                 const float* __restrict__ B, float beta,
                                 float* __restrict__ C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    const int ak = k0 + threadIdx.x;
    const int bk = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) {
      acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    }
    __syncthreads();
  }
  if (row < M && col < N) {
    const float c = beta == 0.0f ? 0.0f : beta * C[row * N + col];
    C[row * N + col] = alpha * acc + c;
  }
}
