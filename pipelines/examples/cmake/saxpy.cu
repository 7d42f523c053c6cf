// saxpy: y = a*x + y, as a CUDA kernel and a CPU reference. With --cpu
// it checks the CPU reference only (no GPU needed: the CPU tier's test);
// without, it runs the kernel and compares it with the reference.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

static void saxpy_ref(int n, float a, const float *x, float *y) {
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv) {
  bool cpu = argc > 1 && std::strcmp(argv[1], "--cpu") == 0;
  int n = argc > 2 ? std::atoi(argv[2]) : 64;
  std::vector<float> x(n), y(n), want(n);
  for (int i = 0; i < n; i++) { x[i] = float(i); y[i] = want[i] = 1.0f; }
  saxpy_ref(n, 2.0f, x.data(), want.data());
  for (int i = 0; i < n; i++) {
    if (want[i] != 2.0f * float(i) + 1.0f) { std::printf("reference wrong at %d\n", i); return 1; }
  }
  if (cpu) { std::printf("saxpy reference ok (n=%d)\n", n); return 0; }
  float *dx, *dy;
  if (cudaMalloc(&dx, n * sizeof(float)) != cudaSuccess || cudaMalloc(&dy, n * sizeof(float)) != cudaSuccess) {
    std::printf("no CUDA device\n");
    return 2;
  }
  cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
  cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) {
    if (std::fabs(y[i] - want[i]) > 0) { std::printf("mismatch at %d\n", i); return 1; }
  }
  std::printf("saxpy ok on the GPU (n=%d)\n", n);
  return 0;
}
