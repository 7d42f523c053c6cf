// The few CUDA driver API declarations the harness needs, so it builds
// with no CUDA headers. Symbols are resolved at run time from
// libcuda.so.1 (dlopen), so the harness also runs where no driver exists
// (then only the CPU backend is available). kernels/harness_test.go
// checks every declaration here against cuda.h where one is installed.
#pragma once
#include <cstddef>

namespace cu {

typedef int CUresult;  // CUDA_SUCCESS == 0
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

const int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
const int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
const int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
const int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;

const unsigned CU_STREAM_NON_BLOCKING = 0x1;
const int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;

const unsigned CU_EVENT_DEFAULT = 0x0;
const unsigned CU_EVENT_BLOCKING_SYNC = 0x1;
const unsigned CU_EVENT_DISABLE_TIMING = 0x2;

struct Api {
  void* lib = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetUuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
  CUresult (*cuCtxCreate)(CUcontext*, unsigned, CUdevice) = nullptr;       // cuCtxCreate_v2
  CUresult (*cuCtxDestroy)(CUcontext) = nullptr;                            // cuCtxDestroy_v2
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;                   // cuMemAlloc_v2
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;                             // cuMemFree_v2
  CUresult (*cuMemAllocHost)(void**, size_t) = nullptr;                     // cuMemAllocHost_v2
  CUresult (*cuMemFreeHost)(void*) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;     // cuMemcpyHtoD_v2
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;           // cuMemcpyDtoH_v2
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;  // cuMemcpyDtoHAsync_v2
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;     // cuMemsetD8_v2
  CUresult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;                     // cuMemGetInfo_v2
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;                            // cuEventDestroy_v2
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, size_t) = nullptr;
  // Streams and graphs: the benchmark captures its timed batch in a CUDA
  // graph (optional: without them it launches the batch directly).
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;                          // cuStreamDestroy_v2
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;                // cuStreamBeginCapture_v2
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
};

}  // namespace cu
