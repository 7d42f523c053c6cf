// softmax: row-wise, numerically stable: out[r][j] = exp(x[r][j] - max_r) /
// sum_j exp(x[r][j] - max_r). One block per row; the block reduces the
// row's max, then the sum of exponentials, in shared memory.
// blockDim.x must be a power of two, at most 1024.
extern "C" __global__ void softmax(const float* __restrict__ in,
                                   float* __restrict__ out, int rows,
                                   int cols) {
  extern __shared__ float red[];
  const int r = blockIdx.x;
  if (r >= rows) return;
  const float* x = in + (size_t)r * cols;
  float* y = out + (size_t)r * cols;

  float m = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, x[j]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();

  float sum = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(x[j] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.0f / red[0];
  for (int j = threadIdx.x; j < cols; j += blockDim.x) y[j] = expf(x[j] - m) * inv;
}
