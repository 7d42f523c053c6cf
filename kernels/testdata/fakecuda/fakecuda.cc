// fakecuda: a fake CUDA driver (built as libcuda.so.1) for the harness's
// tests on machines without a GPU. It is NOT a GPU and proves nothing
// about one: it lets the tests drive the harness's cuda backend (its
// driver calls, event timing, batching, context-loss handling, sustained
// loop and device identity) through the same dlopen path a real driver
// takes. Tests that use it say so in their names ("FakeDriver").
//
// "Kernels" are looked up by name and emulated on the host at
// cuLaunchKernel (the device time they take is modelled: see "the
// device's clock"): vector_add, reduce_sum, sgemm, softmax (fp32, the
// harness's argument layouts) and the harness's own (the checksum, the
// burns and the tensor-core burn's stream, the memory sweep, the
// bandwidth copy). Events record the host's steady clock. Device memory
// is host memory; every pointer a kernel or copy gets must lie inside an
// allocation, as on a GPU, or the context is lost.
//
// Knobs (environment, read at cuInit):
//   FAKE_CUDA_DEVICES=N          physical devices (default 1)
//   CUDA_VISIBLE_DEVICES         applied as the driver does: indices or
//                                UUID prefixes ("GPU-..."), up to the first
//                                invalid entry; empty hides every device
//   FAKE_CUDA_STICKY=KERNEL[:N]  the Nth launch (default 1st) of KERNEL
//                                faults with CUDA_ERROR_ILLEGAL_ADDRESS:
//                                the launch returns success, the next
//                                synchronising call and every call after
//                                it return 700 (a sticky error)
//   FAKE_CUDA_CORRUPT=KERNEL:N[@P]
//                                the Nth launch of KERNEL (N "*": every
//                                launch) flips the lowest bit of its
//                                output's first word; with @P only on
//                                physical device P (a GPU that computes
//                                consistently wrong, within tolerance)
//
// Contexts are per device and current per host thread (cuCtxCreate makes
// its context current on the calling thread), as in the driver: a sticky
// error loses only that device's context, and launches are counted per
// device, so one process may drive several devices from several threads.
//   FAKE_CUDA_KERNEL_NS=NS       each reference-kernel launch takes at least
//                                NS nanoseconds of device time (a microsecond
//                                kernel); see "the device's clock" below
//   FAKE_CUDA_UUIDS=GPU-a,GPU-b  the UUIDs of physical devices 0, 1, ...
//                                (e.g. a simulated NVML node's, so that the
//                                harness's results name the GPUs telemetry
//                                watches); default GPU-face<index pattern>
//   FAKE_CUDA_NAME=NAME          every device's name (one model, as on an HGX
//                                node); default "Fake GPU <physical index> ..."
//   FAKE_CUDA_HANG=KERNEL[@P]    after a launch of KERNEL (on physical device
//                                P only, with @P) every synchronising call
//                                of that device blocks forever (a hung GPU);
//                                KERNEL "init": cuInit blocks forever, or
//                                with @P creating a context on device P does
//                                (a GPU that hangs the driver's start)
//   FAKE_CUDA_CTX_ERROR=RC@P     creating a context on physical device P
//                                returns RC (e.g. 999, CUDA_ERROR_UNKNOWN)
//   FAKE_CUDA_STUCK_BIT=B@P      on physical device P every product of the
//                                tensor-core burn's mma has bit B (0 the
//                                lowest) of its 22-bit significand (the
//                                product of the two 11-bit fp16 significands)
//                                stuck at 0: a multiplier with a stuck bit
//   FAKE_CUDA_CLOCK=F@P[,F@Q]    physical device P runs at F (0 < F <= 1) of
//                                its clock: the time the fake gives its
//                                kernels (FAKE_CUDA_KERNEL_NS, the burn's
//                                rounds) is divided by F
//   FAKE_CUDA_SMS=N              every device's multiprocessor count (default
//                                2); cuOccupancyMaxActiveBlocksPerMultiprocessor
//                                answers 2048 threads per SM over the block
//                                size, at most 32 blocks (an H100's limits)
//   FAKE_CUDA_L2=BYTES           every device's L2 size (default 4 MiB, small
//                                so that the buffers the harness sizes from it,
//                                its L2 flush and the burn's stream, stay small
//                                in the host's memory)
//   FAKE_CUDA_MEMORY=BYTES       every device's memory as cuMemGetInfo reports it
//                                (default 80 GiB; what the process allocated
//                                on the device counts as used)
//   FAKE_CUDA_GRAPH_LOG=FILE     each cuGraphLaunch appends "graph NODES KERNEL"
//                                to FILE (streams and graphs are modelled:
//                                launches on a capturing stream become nodes
//                                holding copies of their argument values, run
//                                at every cuGraphLaunch; only the reference
//                                kernels can be captured, others fail with
//                                CUDA_ERROR_NOT_SUPPORTED; the legacy default
//                                stream cannot be captured)
//   FAKE_CUDA_INIT_ERROR=RC      cuInit returns RC (e.g. 802,
//                                CUDA_ERROR_SYSTEM_NOT_READY: an HGX node
//                                whose fabric manager has not started)
//   FAKE_CUDA_CC=M.m[,M.m...]    the compute capability of physical devices
//                                0, 1, ... (the last one given applies to
//                                the rest); default 9.0
//   FAKE_CUDA_NO_JIT=1           the driver has no PTX JIT compiler
//                                (libnvidia-ptxjitcompiler.so.1 missing):
//                                loading a PTX image returns
//                                CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)
//
// Modules: cuModuleLoadData tells images apart as the driver does. An ELF
// image (\x7fELF) is a cubin: its e_flags name the sm it was built for,
// and it loads only on a device of that major and at least that minor
// (else CUDA_ERROR_NO_BINARY_FOR_GPU, 209). Text with a ".version" line
// is PTX, which needs the JIT. Anything else is taken for a fatbin (the
// tests' placeholders). cuModuleGetFunction finds a name in a cubin or
// PTX module only if the image holds it.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <string>
#include <vector>

extern "C" {
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct {
  char bytes[16];
} CUuuid;
}

namespace {

const CUresult kSuccess = 0, kInvalidValue = 1, kNotInitialized = 3, kNoDevice = 100, kInvalidDevice = 101,
               kInvalidHandle = 400, kNotFound = 500, kIllegalAddress = 700, kNotSupported = 801,
               kIllegalCapture = 901, kCaptureInvalidated = 902;

struct Event {
  std::chrono::steady_clock::time_point t;     // on the recording thread's device clock (t_dev_end)
  std::chrono::steady_clock::time_point wall;  // the same instant in wall time
  bool recorded = false;
  unsigned flags = 0;
};

struct Func {
  std::string name;
};

// Module is a loaded module: for a cubin or PTX image, its bytes (the
// names cuModuleGetFunction may find); empty for a fatbin.
struct Module {
  std::string image;
};

// Node is one captured launch: its function, shape and argument values.
struct Node {
  Func* f;
  unsigned gx, bx;
  std::vector<std::array<unsigned char, 8>> args;
};

// Graph is a captured graph (cuStreamEndCapture) or an instantiated one.
struct Graph {
  std::vector<Node> nodes;
};

// Stream is a created stream; launches on it while capturing become
// nodes.
struct Stream {
  bool capturing = false;
  CUresult capture_error = 0;
  std::vector<Node> nodes;
};

// arg_sizes are the byte sizes of the arguments of the reference
// kernels, the ones the harness captures; empty for any other (its
// capture fails with CUDA_ERROR_NOT_SUPPORTED).
std::vector<size_t> arg_sizes(const std::string& k) {
  if (k == "vector_add") return {8, 8, 8, 4};
  if (k == "reduce_sum") return {8, 8, 4};
  if (k == "sgemm") return {4, 4, 4, 4, 8, 8, 4, 8};
  if (k == "softmax") return {8, 8, 4, 4};
  return {};
}

struct State {
  std::mutex mu;
  bool inited = false;
  int physical = 1;
  std::vector<int> visible;  // physical index of each visible ordinal
  std::map<int, CUresult> sticky;  // per physical device
  std::map<uintptr_t, size_t> allocs;
  std::map<uintptr_t, int> alloc_device;  // the device each allocation is on
  std::map<std::pair<int, std::string>, long> launches;  // per device and kernel
  std::string sticky_kernel, corrupt_kernel;
  long sticky_at = 1, corrupt_at = 0;  // corrupt_at -1: every launch
  int corrupt_device = -1;             // -1: every device
  std::string hang_kernel;
  int hang_device = -1;
  std::map<int, CUresult> ctx_error;  // FAKE_CUDA_CTX_ERROR, by physical device
  int stuck_bit = -1, stuck_device = -1;  // FAKE_CUDA_STUCK_BIT
  std::map<int, double> clock;            // FAKE_CUDA_CLOCK, by physical device
  std::set<int> hung;  // devices whose next synchronisation never returns
  long long kernel_ns = 0;
  int sms = 2;
  long long plain_launches = 0, graph_launches = 0;
  std::string graph_log;  // FAKE_CUDA_GRAPH_LOG
  size_t memory = size_t(80) << 30;  // FAKE_CUDA_MEMORY: each device's memory
  int l2 = 4 << 20;                  // FAKE_CUDA_L2
  std::vector<std::pair<int, int>> cc;  // FAKE_CUDA_CC, by physical index
  bool no_jit = false;                  // FAKE_CUDA_NO_JIT
};

State& st() {
  static State s;
  return s;
}

// cur is the physical device whose context is current on this thread; -1
// before cuCtxCreate.
thread_local int cur = -1;

// The device's clock. Launches are emulated on the host at once, but
// the device time they take is modelled as a GPU's is: a launch returns
// at once (it is asynchronous), the device runs what was launched in
// order, and only synchronising calls wait for it. Each host thread
// drives one device (as the harness does), so the clocks are per thread:
//   t_dev_end  the device's own clock: the sum of the device time of
//              everything launched (each launch's modelled time,
//              FAKE_CUDA_KERNEL_NS or the tensor-core burn's rounds, each
//              divided by the device's FAKE_CUDA_CLOCK, or for a kernel
//              with none the host time its emulation took). Events take
//              it, so an event pair measures the device time of the
//              launches between them exactly, however long the host took
//              to emulate them or to get to its next call on a loaded
//              machine (the host is never slower than the device);
//   w_dev_end  the same end in wall time: a launch starts at the later of
//              it and the launch call, so that synchronising calls
//              (device_wait) sleep until the device's time has really
//              passed, and durations and watchdogs see real time.
using fclock = std::chrono::steady_clock;
thread_local fclock::time_point t_dev_end{}, w_dev_end{};
// t_model_ns is the modelled time the kernel being run asks for (-1:
// none); run() sets it.
thread_local long long t_model_ns = -1;

// queue_launch queues device time d, for a launch called at wall time
// at, on the device.
void queue_launch(fclock::time_point at, fclock::duration d) {
  t_dev_end += d;
  w_dev_end = std::max(w_dev_end, at) + d;
}

// sleep_until_wall waits, with the driver's lock released, until wall
// time t: a long wait sleeps until its last 200 us (so that eight fake
// devices on a two-core machine do not spin each other off the CPU) and
// spins those, so that microsecond kernels keep their time.
void sleep_until_wall(std::unique_lock<std::mutex>& lock, fclock::time_point t) {
  if (fclock::now() >= t) return;
  lock.unlock();
  const auto spin = std::chrono::microseconds(200);
  if (t - fclock::now() > spin) std::this_thread::sleep_until(t - spin);
  while (fclock::now() < t) {
  }
}

// device_wait is a synchronising call's wait: until everything launched
// on this thread's device has run, in wall time.
void device_wait(std::unique_lock<std::mutex>& lock) { sleep_until_wall(lock, w_dev_end); }

// uuids are FAKE_CUDA_UUIDS' entries, by physical index.
std::vector<std::string>& uuids() {
  static std::vector<std::string> u;
  return u;
}

CUuuid uuid_of(int phys) {
  CUuuid u;
  if (size_t(phys) < uuids().size()) {
    std::string hex;
    for (char c : uuids()[size_t(phys)].substr(4))
      if (c != '-') hex += c;
    for (int i = 0; i < 16; ++i) u.bytes[i] = char(i * 2 + 1 < int(hex.size()) ? std::stoi(hex.substr(size_t(i) * 2, 2), nullptr, 16) : 0);
    return u;
  }
  for (int i = 0; i < 16; ++i) u.bytes[i] = char(0x10 * (phys + 1) + i);
  u.bytes[0] = char(0xfa);
  u.bytes[1] = char(0xce);
  return u;
}

std::string uuid_string(int phys) {
  CUuuid u = uuid_of(phys);
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  std::snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return s;
}

void parse_env(State& s) {
  if (const char* e = std::getenv("FAKE_CUDA_DEVICES")) s.physical = std::max(0, std::atoi(e));
  uuids().clear();
  if (const char* e = std::getenv("FAKE_CUDA_UUIDS")) {
    std::string v = e;
    for (size_t pos = 0; pos < v.size();) {
      size_t comma = v.find(',', pos);
      std::string tok = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (tok.rfind("GPU-", 0) == 0) uuids().push_back(tok);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  s.visible.clear();
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!cvd) {
    for (int i = 0; i < s.physical; ++i) s.visible.push_back(i);
  } else {
    std::string all = cvd;
    size_t pos = 0;
    while (pos <= all.size() && !all.empty()) {
      size_t comma = all.find(',', pos);
      std::string tok = all.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      int found = -1;
      if (!tok.empty() && tok.find_first_not_of("0123456789") == std::string::npos) {
        int i = std::atoi(tok.c_str());
        if (i < s.physical) found = i;
      } else if (tok.rfind("GPU-", 0) == 0) {
        for (int i = 0; i < s.physical; ++i)
          if (uuid_string(i).rfind(tok, 0) == 0) found = i;
      }
      if (found < 0) break;  // the driver stops at the first invalid entry
      s.visible.push_back(found);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  auto kernel_at = [](const char* env, std::string& kernel, long& at) {
    const char* e = std::getenv(env);
    if (!e || !*e) return;
    std::string v = e;
    auto colon = v.find(':');
    kernel = v.substr(0, colon);
    if (colon != std::string::npos) at = std::atol(v.c_str() + colon + 1);
  };
  kernel_at("FAKE_CUDA_STICKY", s.sticky_kernel, s.sticky_at);
  if (const char* e = std::getenv("FAKE_CUDA_CORRUPT"); e && *e) {
    std::string v = e;
    if (auto at = v.find('@'); at != std::string::npos) {
      s.corrupt_device = std::atoi(v.c_str() + at + 1);
      v = v.substr(0, at);
    }
    auto colon = v.find(':');
    s.corrupt_kernel = v.substr(0, colon);
    if (colon != std::string::npos) s.corrupt_at = v.substr(colon + 1) == "*" ? -1 : std::atol(v.c_str() + colon + 1);
  }
  if (const char* e = std::getenv("FAKE_CUDA_HANG"); e && *e) {
    std::string v = e;
    if (auto at = v.find('@'); at != std::string::npos) {
      s.hang_device = std::atoi(v.c_str() + at + 1);
      v = v.substr(0, at);
    }
    s.hang_kernel = v;
  }
  s.ctx_error.clear();
  if (const char* e = std::getenv("FAKE_CUDA_CTX_ERROR"); e && *e) {
    int rc = 0, p = 0;
    if (std::sscanf(e, "%d@%d", &rc, &p) == 2) s.ctx_error[p] = rc;
  }
  s.stuck_bit = s.stuck_device = -1;
  if (const char* e = std::getenv("FAKE_CUDA_STUCK_BIT"); e && *e) std::sscanf(e, "%d@%d", &s.stuck_bit, &s.stuck_device);
  s.clock.clear();
  if (const char* e = std::getenv("FAKE_CUDA_CLOCK")) {
    for (const char* p = e; *p;) {
      double f = 0;
      int dev = 0;
      if (std::sscanf(p, "%lf@%d", &f, &dev) == 2 && f > 0 && f <= 1) s.clock[dev] = f;
      p = std::strchr(p, ',');
      if (!p) break;
      ++p;
    }
  }
  if (const char* e = std::getenv("FAKE_CUDA_KERNEL_NS")) s.kernel_ns = std::atoll(e);
  if (const char* e = std::getenv("FAKE_CUDA_SMS")) s.sms = std::max(1, std::atoi(e));
  if (const char* e = std::getenv("FAKE_CUDA_GRAPH_LOG")) s.graph_log = e;
  if (const char* e = std::getenv("FAKE_CUDA_MEMORY")) s.memory = size_t(std::max(1LL, std::atoll(e)));
  if (const char* e = std::getenv("FAKE_CUDA_L2")) s.l2 = std::max(1, std::atoi(e));
  s.cc.clear();
  if (const char* e = std::getenv("FAKE_CUDA_CC")) {
    for (const char* p = e; *p;) {
      int major = 0, minor = 0;
      if (std::sscanf(p, "%d.%d", &major, &minor) == 2) s.cc.push_back({major, minor});
      p = std::strchr(p, ',');
      if (!p) break;
      ++p;
    }
  }
  const char* nj = std::getenv("FAKE_CUDA_NO_JIT");
  s.no_jit = nj && *nj && std::strcmp(nj, "0") != 0;
}

// clock_of is physical device p's share of its clock (FAKE_CUDA_CLOCK).
double clock_of(const State& s, int p) {
  auto it = s.clock.find(p);
  return it == s.clock.end() ? 1.0 : it->second;
}

// cc_of is physical device p's compute capability (FAKE_CUDA_CC).
std::pair<int, int> cc_of(const State& s, int p) {
  if (s.cc.empty()) return {9, 0};
  return s.cc[std::min(size_t(std::max(p, 0)), s.cc.size() - 1)];
}

// cubin_size is the extent of the ELF image at b (its section and program
// header tables end it, as nvcc writes cubins), at most 64 MiB; 0 when
// the header is not a 64-bit ELF's.
size_t cubin_size(const unsigned char* b) {
  if (b[4] != 2) return 0;
  auto u64 = [&](int o) { uint64_t v; std::memcpy(&v, b + o, 8); return v; };
  auto u16 = [&](int o) { uint16_t v; std::memcpy(&v, b + o, 2); return uint64_t(v); };
  uint64_t end = std::max(u64(0x28) + u16(0x3a) * u16(0x3c), u64(0x20) + u16(0x36) * u16(0x38));
  return end > (uint64_t(64) << 20) ? 0 : size_t(end);
}

// valid reports whether [p, p+n) lies inside one allocation.
bool valid(State& s, CUdeviceptr p, size_t n) {
  auto it = s.allocs.upper_bound(uintptr_t(p));
  if (it == s.allocs.begin()) return false;
  --it;
  return uintptr_t(p) >= it->first && uintptr_t(p) + n <= it->first + it->second;
}

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// ---- burn_mma.cu's gpuattest_burn_mma, warp by warp --------------------------
//
// mma.sync.m16n8k16 (f16 inputs, f32 accumulate) as the PTX ISA lays its
// fragments out over a warp's lanes (group g = lane / 4, t = lane % 4):
//   A (16x16): element i of a lane is row g (i in 0,1,4,5) or g+8, column
//              2t + (i & 1), plus 8 for i >= 4;
//   B (16x8):  element i is row 2t + (i & 1), plus 8 for i >= 2, column g;
//   C, D:      element i is row g (i < 2) or g+8, column 2t + (i & 1).
// Every value the kernel uses is an integer of at most 11 bits times a
// power of two, and every sum fits in 24 bits, so float arithmetic here
// gives a tensor core's bits. The rounds cancel exactly and leave the
// fragments where they started (the harness asks for a multiple of 128),
// so the fake runs the last pass only; with a stuck multiplier bit
// (FAKE_CUDA_STUCK_BIT) both halves of a round are wrong alike and still
// cancel, and the last pass carries the fault, as on a GPU.

uint32_t burn_hash(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

int burn_int(unsigned w, unsigned lane, unsigned j, unsigned e, unsigned s) {
  const uint32_t h = burn_hash(burn_hash(w * 0x9E3779B9u + s) ^ (lane << 8) ^ (j << 4) ^ e);
  const unsigned k = 2 * (lane % 4) + (e & 1) + ((j < 4 ? e >= 4 : e >= 2) ? 8 : 0);
  const int mag = k < 3 ? int(1024u + (h & 1023u)) : int((h >> 10) % 256u);
  return (h >> 31) ? -mag : mag;
}

float burn_scale(unsigned j) {
  static const float sc[6] = {1.0f, 0.125f, 4.0f, 0.03125f, 0.25f, 8.0f};
  return sc[j];
}

uint32_t burn_mix(float v, unsigned lane, unsigned j, unsigned r) {
  v = v + 0.0f;
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return burn_hash(bits ^ (lane * 0x01000193u) ^ (j << 28) ^ (r << 24));
}

uint32_t burn_pattern(uint64_t i) { return uint32_t(i) * 0x9E3779B1u ^ uint32_t(i >> 32) ^ 0x5bd1e995u; }

// product is a * b as a multiplier computes it, with bit stuck (-1: none)
// of the product of the two 11-bit significands stuck at 0.
float product(float a, float b, int stuck) {
  if (stuck < 0 || a == 0.0f || b == 0.0f) return a * b;
  int ea = 0, eb = 0;
  const double fa = std::frexp(std::fabs(double(a)), &ea), fb = std::frexp(std::fabs(double(b)), &eb);
  // fp16 significands: 11 bits, 1024 <= m < 2048.
  uint64_t m = uint64_t(std::ldexp(fa, 11)) * uint64_t(std::ldexp(fb, 11));
  m &= ~(uint64_t(1) << stuck);
  const double v = std::ldexp(double(m), ea + eb - 22);
  return float(((a < 0) != (b < 0)) ? -v : v);
}

// kBurnMmaRoundNs is the time the fake gives one round of
// gpuattest_burn_mma at full clock (a launch of N rounds lasts at least N
// times it, divided by the device's FAKE_CUDA_CLOCK).
const long long kBurnMmaRoundNs = 2000;

// burn_mma writes gpuattest_burn_mma's per-warp results for warps warps;
// errors[w] are the memory errors warp w found in the stream.
void burn_mma(uint32_t* y, unsigned warps, unsigned seed, const std::vector<unsigned>& errors, bool inject, int stuck) {
  for (unsigned w = 0; w < warps; ++w) {
    float A[4][16][16], B[2][16][8];
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned g = lane / 4, t = lane % 4;
      for (unsigned j = 0; j < 4; ++j)
        for (unsigned i = 0; i < 8; ++i) {
          float v = float(burn_int(w, lane, j, i, seed)) * burn_scale(j);
          if (inject && w == 0 && lane == 0 && j == 0 && i == 0) {
            // The kernel flips the lowest bit of that fp16 value's mantissa.
            int e = 0;
            const double f = std::frexp(std::fabs(double(v)), &e);
            const int64_t m = int64_t(std::ldexp(f, 11)) ^ 1;
            v = float(std::ldexp(double(m), e - 11)) * (v < 0 ? -1.0f : 1.0f);
          }
          A[j][(i == 2 || i == 3 || i >= 6) ? g + 8 : g][2 * t + (i & 1) + (i >= 4 ? 8 : 0)] = v;
        }
      for (unsigned j = 4; j < 6; ++j)
        for (unsigned i = 0; i < 4; ++i) B[j - 4][2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = float(burn_int(w, lane, j, i, seed)) * burn_scale(j);
    }
    uint32_t h = errors[w] * 0x9E3779B1u;
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned g = lane / 4, t = lane % 4;
      for (unsigned j = 0; j < 4; ++j)
        for (unsigned r = 0; r < 4; ++r) {
          const unsigned row = r < 2 ? g : g + 8, col = 2 * t + (r & 1);
          float acc = 0.0f;
          for (unsigned k = 0; k < 16; ++k) acc += product(A[j][row][k], B[j < 2 ? 0 : 1][k][col], stuck);
          h += burn_mix(acc, lane, j, r);
        }
    }
    y[w] = h;
  }
}

template <typename T>
T arg(void** params, int i) {
  return *static_cast<T*>(params[i]);
}

// run executes fn on the host; false when a pointer argument is invalid
// (an illegal address on a GPU). out receives the output pointer.
bool run(State& s, const std::string& fn, unsigned grid, unsigned block, void** a, CUdeviceptr& out, size_t& out_bytes) {
  const size_t threads = size_t(grid) * block;
  if (fn == "vector_add") {
    auto x = arg<CUdeviceptr>(a, 0), y = arg<CUdeviceptr>(a, 1), z = arg<CUdeviceptr>(a, 2);
    int n = arg<int>(a, 3);
    size_t b = size_t(n) * 4;
    if (!valid(s, x, b) || !valid(s, y, b) || !valid(s, z, b)) return false;
    const float *fx = reinterpret_cast<const float*>(x), *fy = reinterpret_cast<const float*>(y);
    float* fz = reinterpret_cast<float*>(z);
    for (int i = 0; i < n; ++i) fz[i] = fx[i] + fy[i];
    out = z, out_bytes = b;
  } else if (fn == "reduce_sum") {
    auto in = arg<CUdeviceptr>(a, 0), o = arg<CUdeviceptr>(a, 1);
    int n = arg<int>(a, 2);
    if (!valid(s, in, size_t(n) * 4) || !valid(s, o, size_t(grid) * 4)) return false;
    const float* x = reinterpret_cast<const float*>(in);
    std::vector<float> part(grid, 0.0f);
    for (int i = 0; i < n; ++i) part[(size_t(i) % threads) / block] += x[i];
    std::memcpy(reinterpret_cast<void*>(o), part.data(), size_t(grid) * 4);
    out = o, out_bytes = size_t(grid) * 4;
  } else if (fn == "sgemm") {
    int M = arg<int>(a, 0), N = arg<int>(a, 1), K = arg<int>(a, 2);
    float alpha = arg<float>(a, 3), beta = arg<float>(a, 6);
    auto A = arg<CUdeviceptr>(a, 4), B = arg<CUdeviceptr>(a, 5), C = arg<CUdeviceptr>(a, 7);
    if (!valid(s, A, size_t(M) * K * 4) || !valid(s, B, size_t(K) * N * 4) || !valid(s, C, size_t(M) * N * 4)) return false;
    const float *fa = reinterpret_cast<const float*>(A), *fb = reinterpret_cast<const float*>(B);
    float* fc = reinterpret_cast<float*>(C);
    std::vector<float> acc(static_cast<size_t>(N));
    for (int i = 0; i < M; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int q = 0; q < K; ++q)
        for (int j = 0; j < N; ++j) acc[j] += fa[size_t(i) * K + q] * fb[size_t(q) * N + j];
      for (int j = 0; j < N; ++j) fc[size_t(i) * N + j] = alpha * acc[j] + (beta == 0.0f ? 0.0f : beta * fc[size_t(i) * N + j]);
    }
    out = C, out_bytes = size_t(M) * N * 4;
  } else if (fn == "softmax") {
    auto in = arg<CUdeviceptr>(a, 0), o = arg<CUdeviceptr>(a, 1);
    int rows = arg<int>(a, 2), cols = arg<int>(a, 3);
    size_t b = size_t(rows) * cols * 4;
    if (!valid(s, in, b) || !valid(s, o, b)) return false;
    const float* x = reinterpret_cast<const float*>(in);
    float* y = reinterpret_cast<float*>(o);
    for (int r = 0; r < rows; ++r) {
      float m = -INFINITY, sum = 0.0f;
      for (int j = 0; j < cols; ++j) m = std::max(m, x[size_t(r) * cols + j]);
      for (int j = 0; j < cols; ++j) sum += std::exp(x[size_t(r) * cols + j] - m);
      for (int j = 0; j < cols; ++j) y[size_t(r) * cols + j] = std::exp(x[size_t(r) * cols + j] - m) / sum;
    }
    out = o, out_bytes = b;
  } else if (fn == "gpuattest_burn") {
    // checksum.cu's burn kernel, thread by thread (fmaf is exact: the same
    // bits as a GPU's).
    auto o = arg<CUdeviceptr>(a, 0);
    unsigned iters = arg<unsigned>(a, 1);
    float seed = arg<float>(a, 2);
    if (!valid(s, o, threads * 4)) return false;
    float* y = reinterpret_cast<float*>(o);
    const float m = 0.9999999f, c = 1e-7f;
    for (size_t t = 0; t < threads; ++t) {
      float v[8];
      v[0] = seed + float(t & 1023) * 1e-6f;
      for (int j = 1; j < 8; ++j) v[j] = v[0] + 0.125f * float(j);
      for (unsigned i = 0; i < iters; ++i)
        for (int k = 0; k < 16; ++k)
          for (int j = 0; j < 8; ++j) v[j] = std::fma(v[j], m, c);
      float sum = v[0];
      for (int j = 1; j < 8; ++j) sum = sum + v[j];
      y[t] = sum;
    }
    out = o, out_bytes = threads * 4;
  } else if (fn == "gpuattest_burn_mma") {
    auto o = arg<CUdeviceptr>(a, 0);
    const unsigned iters = arg<unsigned>(a, 1), seed = arg<unsigned>(a, 2);
    auto stream = arg<CUdeviceptr>(a, 3);
    const auto n16 = arg<unsigned long long>(a, 4);
    const unsigned mem_every = arg<unsigned>(a, 5), inject = arg<unsigned>(a, 6);
    const unsigned warps = unsigned(threads / 32);
    if (!valid(s, o, size_t(warps) * 4) || (n16 > 0 && !valid(s, stream, size_t(n16) * 16))) return false;
    // The stream, as the kernel sweeps it: each warp's k-th memory
    // operation takes slot w + k * warps of the buffer's 512-byte slots,
    // checks each word against its pattern or its inverse and writes the
    // inverse back.
    std::vector<unsigned> errors(warps, 0);
    const uint64_t slots = n16 / 32;
    if (slots > 0 && mem_every > 0) {
      uint32_t* words = reinterpret_cast<uint32_t*>(stream);
      const uint64_t ops = (iters / 16) / mem_every;
      for (uint64_t k = 0; k < ops; ++k)
        for (unsigned w = 0; w < warps; ++w)
          for (unsigned lane = 0; lane < 32; ++lane) {
            const uint64_t q = ((w + k * warps) % slots) * 32 + lane;
            for (uint64_t c = 0; c < 4; ++c) {
              const uint32_t d = words[4 * q + c] ^ burn_pattern(4 * q + c);
              errors[w] += d != 0u && d != ~0u;
              words[4 * q + c] = ~words[4 * q + c];
            }
          }
    }
    const int stuck = cur == s.stuck_device ? s.stuck_bit : -1;
    burn_mma(reinterpret_cast<uint32_t*>(o), warps, seed, errors, inject != 0, stuck);
    // A launch lasts kBurnMmaRoundNs per round at full clock, as a
    // kernel's time grows with its iterations on a GPU, so that the
    // harness's calibration sizes it as it would there.
    t_model_ns = static_cast<long long>(double(kBurnMmaRoundNs) * iters / clock_of(s, cur));
    out = o, out_bytes = size_t(warps) * 4;
  } else if (fn == "gpuattest_burn_stream_init") {
    auto p = arg<CUdeviceptr>(a, 0);
    const auto n16 = arg<unsigned long long>(a, 1);
    if (!valid(s, p, size_t(n16) * 16)) return false;
    uint32_t* words = reinterpret_cast<uint32_t*>(p);
    for (uint64_t i = 0; i < 4 * n16; ++i) words[i] = burn_pattern(i);
    out = p, out_bytes = size_t(n16) * 16;
  } else if (fn == "gpuattest_copy") {
    auto src = arg<CUdeviceptr>(a, 0), dst = arg<CUdeviceptr>(a, 1);
    const auto n16 = arg<unsigned long long>(a, 2);
    if (!valid(s, src, size_t(n16) * 16) || !valid(s, dst, size_t(n16) * 16)) return false;
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), size_t(n16) * 16);
    out = dst, out_bytes = size_t(n16) * 16;
  } else if (fn == "gpuattest_mem_write" || fn == "gpuattest_mem_check") {
    // checksum.cu's memory sweep.
    auto p = arg<CUdeviceptr>(a, 0);
    auto n = arg<unsigned long long>(a, 1), base = arg<unsigned long long>(a, 2);
    unsigned pass = arg<unsigned>(a, 3);
    if (!valid(s, p, size_t(n) * 4)) return false;
    uint32_t* w = reinterpret_cast<uint32_t*>(p);
    auto pattern = [pass](uint64_t addr) {
      uint32_t v = uint32_t(mix64(addr ^ (uint64_t(pass >> 1) << 48)));
      return (pass & 1) ? ~v : v;
    };
    if (fn == "gpuattest_mem_write") {
      for (uint64_t i = 0; i < n; ++i) w[i] = pattern(base + i);
      out = p, out_bytes = size_t(n) * 4;
    } else {
      auto e = arg<CUdeviceptr>(a, 4);
      if (!valid(s, e, 16)) return false;
      uint64_t bad = 0, first = ~0ull;
      for (uint64_t i = 0; i < n; ++i) {
        if (w[i] != pattern(base + i)) {
          ++bad;
          first = std::min<uint64_t>(first, base + i);
        }
      }
      uint64_t* errs = reinterpret_cast<uint64_t*>(e);
      errs[0] += bad;
      if (bad) errs[1] = std::min<uint64_t>(errs[1], first);
    }
  } else if (fn == "gpuattest_checksum") {
    auto x = arg<CUdeviceptr>(a, 0), p = arg<CUdeviceptr>(a, 2);
    auto n = arg<unsigned long long>(a, 1);
    if (!valid(s, x, size_t(n) * 4) || !valid(s, p, size_t(grid) * 8)) return false;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(x);
    uint64_t* part = reinterpret_cast<uint64_t*>(p);
    for (unsigned j = 0; j < grid; ++j) part[j] = 0;
    for (uint64_t i = 0; i < n; ++i) part[(i % threads) / block] += mix64((i << 32) | w[i]);
    out = p, out_bytes = size_t(grid) * 8;
  } else {
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

#define FAKE_GUARD()                        \
  State& s = st();                          \
  std::unique_lock<std::mutex> lock(s.mu);  \
  if (!s.inited) return kNotInitialized;    \
  if (s.sticky[cur]) return s.sticky[cur]

// FAKE_HANG blocks a synchronising call forever once the current device
// hung (FAKE_CUDA_HANG), as a GPU that stopped answering does; the other
// devices go on.
#define FAKE_HANG()                                                   \
  if (s.hung.count(cur)) {                                            \
    lock.unlock();                                                    \
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));    \
  }

CUresult cuInit(unsigned) {
  State& s = st();
  std::unique_lock<std::mutex> lock(s.mu);
  parse_env(s);
  if (s.hang_kernel == "init" && s.hang_device < 0) {
    lock.unlock();
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (const char* e = std::getenv("FAKE_CUDA_INIT_ERROR"); e && *e) return CUresult(std::atoi(e));
  if (s.visible.empty()) return kNoDevice;
  s.inited = true;
  return kSuccess;
}

CUresult cuDeviceGetCount(int* n) {
  FAKE_GUARD();
  *n = int(s.visible.size());
  return kSuccess;
}

CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  FAKE_GUARD();
  if (ordinal < 0 || ordinal >= int(s.visible.size())) return kInvalidDevice;
  *d = ordinal;
  return kSuccess;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  FAKE_GUARD();
  if (d < 0 || d >= int(s.visible.size())) return kInvalidDevice;
  if (const char* e = std::getenv("FAKE_CUDA_NAME"); e && *e) {
    std::snprintf(name, size_t(len), "%s", e);
  } else {
    std::snprintf(name, size_t(len), "Fake GPU %d (gpuattest test driver)", s.visible[size_t(d)]);
  }
  return kSuccess;
}

CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
  FAKE_GUARD();
  if (d < 0 || d >= int(s.visible.size())) return kInvalidDevice;
  const std::pair<int, int> cc = cc_of(s, s.visible[size_t(d)]);
  switch (attr) {
    case 16: *v = s.sms; break;     // SM count
    case 38: *v = s.l2; break;      // L2 cache size
    case 75: *v = cc.first; break;  // compute capability major
    case 76: *v = cc.second; break;
    default: return kInvalidValue;
  }
  return kSuccess;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, void* f, int block, size_t) {
  FAKE_GUARD();
  if (!f || block <= 0 || block > 1024) return kInvalidValue;
  *n = std::min(32, 2048 / block);
  return kSuccess;
}

CUresult cuDeviceGetUuid(CUuuid* u, CUdevice d) {
  FAKE_GUARD();
  if (d < 0 || d >= int(s.visible.size())) return kInvalidDevice;
  *u = uuid_of(s.visible[size_t(d)]);
  return kSuccess;
}

CUresult cuDeviceGetPCIBusId(char* id, int len, CUdevice d) {
  FAKE_GUARD();
  if (d < 0 || d >= int(s.visible.size())) return kInvalidDevice;
  std::snprintf(id, size_t(len), "0000:%02X:00.0", 0x18 + 0x10 * s.visible[size_t(d)]);
  return kSuccess;
}

CUresult cuCtxCreate_v2(void** ctx, unsigned, CUdevice d) {
  FAKE_GUARD();
  if (d < 0 || d >= int(s.visible.size())) return kInvalidDevice;
  const int phys = s.visible[size_t(d)];
  if (s.hang_kernel == "init" && s.hang_device == phys) {
    lock.unlock();
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (auto it = s.ctx_error.find(phys); it != s.ctx_error.end()) return it->second;
  static int token[1024];
  cur = phys;
  *ctx = &token[cur % 1024];
  return kSuccess;
}

CUresult cuCtxDestroy_v2(void*) {
  FAKE_GUARD();
  return kSuccess;
}

CUresult cuCtxSynchronize() {
  FAKE_GUARD();
  FAKE_HANG();
  device_wait(lock);
  return kSuccess;
}

CUresult cuModuleLoadData(void** mod, const void* image) {
  FAKE_GUARD();
  if (!image) return kInvalidValue;
  const unsigned char* b = static_cast<const unsigned char*>(image);
  auto m = std::make_unique<Module>();
  if (std::memcmp(b, "\x7f" "ELF", 4) == 0) {
    size_t n = cubin_size(b);
    if (n < 64) return 200;  // CUDA_ERROR_INVALID_IMAGE
    const int sm = int(b[0x30]);  // e_flags' low byte: the sm (0x5a: sm_90)
    const std::pair<int, int> cc = cc_of(s, cur);
    if (sm / 10 != cc.first || sm % 10 > cc.second) return 209;  // CUDA_ERROR_NO_BINARY_FOR_GPU
    m->image.assign(reinterpret_cast<const char*>(b), n);
  } else {
    std::string head(reinterpret_cast<const char*>(b), strnlen(reinterpret_cast<const char*>(b), size_t(1) << 20));
    if (head.find("\n.version ") != std::string::npos) {
      if (s.no_jit) return 221;  // CUDA_ERROR_JIT_COMPILER_NOT_FOUND
      m->image = head;
    }
  }
  *mod = m.release();
  return kSuccess;
}

CUresult cuModuleUnload(void* mod) {
  FAKE_GUARD();
  delete static_cast<Module*>(mod);
  return kSuccess;
}

CUresult cuModuleGetFunction(void** fn, void* mod, const char* name) {
  FAKE_GUARD();
  if (!mod) return kInvalidHandle;
  const std::string& image = static_cast<Module*>(mod)->image;
  if (!image.empty() && image.find(std::string(name) + '\0') == std::string::npos && image.find(std::string(name) + '(') == std::string::npos) return kNotFound;
  static const char* known[] = {"vector_add",         "reduce_sum",          "sgemm",          "softmax",
                                "gpuattest_checksum", "gpuattest_burn",      "gpuattest_burn_mma", "gpuattest_burn_stream_init",
                                "gpuattest_mem_write", "gpuattest_mem_check", "gpuattest_copy"};
  for (const char* k : known) {
    if (std::strcmp(k, name) == 0) {
      *fn = new Func{name};
      return kSuccess;
    }
  }
  return kNotFound;
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  FAKE_GUARD();
  void* m = std::calloc(1, std::max<size_t>(n, 1));
  if (!m) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  s.allocs[uintptr_t(m)] = n;
  s.alloc_device[uintptr_t(m)] = cur;
  *p = CUdeviceptr(uintptr_t(m));
  return kSuccess;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  FAKE_GUARD();
  auto it = s.allocs.find(uintptr_t(p));
  if (it == s.allocs.end()) return kInvalidValue;
  std::free(reinterpret_cast<void*>(p));
  s.allocs.erase(it);
  s.alloc_device.erase(uintptr_t(p));
  return kSuccess;
}

CUresult cuMemAllocHost_v2(void** p, size_t n) {
  FAKE_GUARD();
  *p = std::calloc(1, std::max<size_t>(n, 1));
  return *p ? kSuccess : 2;
}

CUresult cuMemFreeHost(void* p) {
  FAKE_GUARD();
  std::free(p);
  return kSuccess;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* h, size_t n) {
  FAKE_GUARD();
  if (!valid(s, d, n)) return kInvalidValue;
  std::memcpy(reinterpret_cast<void*>(d), h, n);
  return kSuccess;
}

CUresult cuMemcpyDtoH_v2(void* h, CUdeviceptr d, size_t n) {
  FAKE_GUARD();
  FAKE_HANG();
  if (!valid(s, d, n)) return kInvalidValue;
  std::memcpy(h, reinterpret_cast<const void*>(d), n);
  device_wait(lock);  // a synchronous copy waits for what was launched
  return kSuccess;
}

CUresult cuMemcpyDtoHAsync_v2(void* h, CUdeviceptr d, size_t n, void*) {
  FAKE_GUARD();
  if (!valid(s, d, n)) return kInvalidValue;
  std::memcpy(h, reinterpret_cast<const void*>(d), n);
  return kSuccess;
}

CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  FAKE_GUARD();
  if (!valid(s, d, n)) return kInvalidValue;
  std::memset(reinterpret_cast<void*>(d), v, n);
  return kSuccess;
}

CUresult cuMemGetInfo_v2(size_t* free_b, size_t* total) {
  FAKE_GUARD();
  const size_t cap = s.memory;
  size_t used = size_t(1) << 20;
  for (auto& kv : s.allocs)
    if (s.alloc_device[kv.first] == cur) used += kv.second;
  *total = cap;
  *free_b = cap - std::min(used, cap);
  return kSuccess;
}

// launch_one runs one launch of f on the current device, as the driver
// would run it: counted per device and kernel, with the sticky, hang
// and corruption knobs applied. It returns the device time the launch
// takes (see t_dev_end).
static fclock::duration launch_one(State& s, Func* f, unsigned gx, unsigned bx, void** params) {
  const std::string& name = f->name;
  long nth = ++s.launches[{cur, name}];
  const auto t0 = fclock::now();
  CUdeviceptr out = 0;
  size_t out_bytes = 0;
  t_model_ns = -1;
  if (!run(s, name, gx, bx, params, out, out_bytes) || (name == s.sticky_kernel && nth == s.sticky_at)) {
    // An asynchronous fault: the launch itself succeeds.
    s.sticky[cur] = kIllegalAddress;
    return fclock::now() - t0;
  }
  if (name == s.hang_kernel && (s.hang_device < 0 || s.hang_device == cur)) s.hung.insert(cur);
  if (name == s.corrupt_kernel && (s.corrupt_at < 0 || nth == s.corrupt_at) && (s.corrupt_device < 0 || s.corrupt_device == cur) && out_bytes >= 4)
    reinterpret_cast<unsigned char*>(out)[0] ^= 1;
  const auto host = fclock::now() - t0;
  if (t_model_ns >= 0) return std::chrono::nanoseconds(t_model_ns);  // the emulation is the fake's cost, not the device's
  if (s.kernel_ns > 0 && name.rfind("gpuattest_", 0) != 0)
    return std::max<fclock::duration>(host, std::chrono::nanoseconds(static_cast<long long>(double(s.kernel_ns) / clock_of(s, cur))));
  return host;
}


CUresult cuLaunchKernel(void* f, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned, unsigned, void* stream,
                        void** params, void**) {
  FAKE_GUARD();
  if (!f || !params) return kInvalidHandle;
  if (Stream* st = static_cast<Stream*>(stream); st && st->capturing) {
    // Captured, not run: the node keeps copies of the argument values,
    // as the driver does, so the caller's argument array may go away.
    Node n{static_cast<Func*>(f), gx, bx, {}};
    auto sizes = arg_sizes(n.f->name);
    if (sizes.empty()) {
      st->capture_error = kNotSupported;
      return kNotSupported;
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::array<unsigned char, 8> v{};
      std::memcpy(v.data(), params[i], sizes[i]);
      n.args.push_back(v);
    }
    st->nodes.push_back(n);
    return kSuccess;
  }
  s.plain_launches++;
  const auto at = fclock::now();
  queue_launch(at, launch_one(s, static_cast<Func*>(f), gx, bx, params));
  return kSuccess;
}

CUresult cuStreamCreate(void** stream, unsigned) {
  FAKE_GUARD();
  *stream = new Stream;
  return kSuccess;
}

CUresult cuStreamDestroy_v2(void* stream) {
  FAKE_GUARD();
  delete static_cast<Stream*>(stream);
  return kSuccess;
}

CUresult cuStreamSynchronize(void*) {
  FAKE_GUARD();
  FAKE_HANG();
  device_wait(lock);
  return kSuccess;
}

CUresult cuStreamBeginCapture_v2(void* stream, int mode) {
  FAKE_GUARD();
  Stream* st = static_cast<Stream*>(stream);
  if (!st) return kIllegalCapture;  // the legacy default stream cannot be captured
  if (st->capturing || mode < 0 || mode > 2) return kInvalidValue;
  st->capturing = true;
  st->capture_error = kSuccess;
  st->nodes.clear();
  return kSuccess;
}

CUresult cuStreamEndCapture(void* stream, void** graph) {
  FAKE_GUARD();
  Stream* st = static_cast<Stream*>(stream);
  if (!st || !st->capturing) return kIllegalCapture;
  st->capturing = false;
  if (st->capture_error != kSuccess) {
    *graph = nullptr;
    return kCaptureInvalidated;
  }
  *graph = new Graph{st->nodes};
  st->nodes.clear();
  return kSuccess;
}

CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  FAKE_GUARD();
  if (!graph) return kInvalidValue;
  *exec = new Graph(*static_cast<Graph*>(graph));
  return kSuccess;
}

CUresult cuGraphLaunch(void* exec, void*) {
  FAKE_GUARD();
  if (!exec) return kInvalidValue;
  s.graph_launches++;
  auto& nodes = static_cast<Graph*>(exec)->nodes;
  if (!s.graph_log.empty() && !nodes.empty()) {
    if (FILE* f = std::fopen(s.graph_log.c_str(), "a")) {
      std::fprintf(f, "graph %zu %s\n", nodes.size(), nodes[0].f->name.c_str());
      std::fclose(f);
    }
  }
  const auto at = fclock::now();
  fclock::duration d{};
  for (Node& n : static_cast<Graph*>(exec)->nodes) {
    std::vector<void*> params;
    for (auto& v : n.args) params.push_back(v.data());
    d += launch_one(s, n.f, n.gx, n.bx, params.data());
    if (s.sticky[cur]) break;
  }
  queue_launch(at, d);
  return kSuccess;
}

CUresult cuGraphExecDestroy(void* exec) {
  FAKE_GUARD();
  delete static_cast<Graph*>(exec);
  return kSuccess;
}

CUresult cuGraphDestroy(void* graph) {
  FAKE_GUARD();
  delete static_cast<Graph*>(graph);
  return kSuccess;
}

CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void*) {
  FAKE_GUARD();
  if (!valid(s, d, n)) return kInvalidValue;
  std::memset(reinterpret_cast<void*>(d), v, n);
  return kSuccess;
}

CUresult cuEventCreate(void** e, unsigned flags) {
  FAKE_GUARD();
  Event* ev = new Event;
  ev->flags = flags;
  *e = ev;
  return kSuccess;
}

CUresult cuEventDestroy_v2(void* e) {
  FAKE_GUARD();
  delete static_cast<Event*>(e);
  return kSuccess;
}

CUresult cuEventRecord(void* e, void*) {
  FAKE_GUARD();
  Event* ev = static_cast<Event*>(e);
  ev->t = t_dev_end;
  ev->wall = w_dev_end;
  ev->recorded = true;
  return kSuccess;
}

CUresult cuEventSynchronize(void* e) {
  FAKE_GUARD();
  FAKE_HANG();
  sleep_until_wall(lock, static_cast<Event*>(e)->wall);
  return kSuccess;
}

CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  FAKE_GUARD();
  Event *ea = static_cast<Event*>(a), *eb = static_cast<Event*>(b);
  if (!ea->recorded || !eb->recorded || (ea->flags & 2) || (eb->flags & 2)) return kInvalidHandle;
  *ms = float(std::chrono::duration<double, std::milli>(eb->t - ea->t).count());
  return kSuccess;
}

// kErrors names the codes the fake returns, as the driver does.
const struct {
  CUresult code;
  const char *name, *text;
} kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
};

CUresult cuGetErrorString(CUresult rc, const char** str) {
  for (auto& e : kErrors) {
    if (e.code == rc) {
      *str = e.text;
      return kSuccess;
    }
  }
  return kInvalidValue;
}

CUresult cuGetErrorName(CUresult rc, const char** str) {
  for (auto& e : kErrors) {
    if (e.code == rc) {
      *str = e.name;
      return kSuccess;
    }
  }
  return kInvalidValue;
}

}  // extern "C"
