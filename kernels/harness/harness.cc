// gpuattest-harness: runs the reference kernels (vector_add, reduce_sum,
// sgemm, softmax) and writes gpuattest results JSON.
//
// Backends:
//   cuda  loads the BUILT fatbins (<fatbin-dir>/<kernel>.fatbin) at run time
//         through the CUDA driver API (dlopen("libcuda.so.1"),
//         cuModuleLoadData), so the bytes tested are the bytes released;
//         timed with CUDA events, N back-to-back launches per event pair
//         (N chosen so that a sample is >= 100 us), L2 flushed between
//         samples.
//   cpu   runs fp32 CPU implementations of the same algorithms, timed with
//         std::chrono::steady_clock; the output says backend "cpu".
//   auto  (default) cuda when libcuda loads and a device exists, else cpu.
// Every case is checked against an fp64 CPU reference (max/mean abs error,
// correlation) with a per-kernel tolerance. After a sticky CUDA error (an
// illegal address, ...) the context is lost: the remaining cases are
// reported "not run", never blamed for it.
//
// Sustained mode (--duration S, for burn-in): one context, every case set
// up once, then launched back to back for S seconds; the output of every
// repeat is checked against the first, and the results report the duty
// cycle (busy time / wall time) under "sustained".
//
// Exit status: 0 all cases passed, 1 a case failed or errored (or a
// sustained run was inconsistent), 2 usage, 3 the harness itself could not
// run (backend cuda unavailable, I/O).
#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "burn_mma_cubin.h"
#include "burn_mma_ptx.h"
#include "checksum_cubin.h"
#include "checksum_ptx.h"
#include "cuda_api.h"
#include "sha256.h"

namespace {

const char* kTool = "gpuattest-harness 0.1.0";
const char* kSchema = "https://gpuattest.dev/results/v1";
const char* kKernels[] = {"vector_add", "reduce_sum", "sgemm", "softmax"};

// A CUDA sample (one event pair) spans at least this long: CUDA events
// resolve about 0.5 us, so a microsecond kernel is launched N times back
// to back per sample and the sample is the per-launch mean.
const double kMinSampleNs = 100e3;
// kWarmStable is how close three warm-up batches must be to end the
// warm-up before --warmup-ms: (max - min) / min.
const double kWarmStable = 0.02;
const long kMaxBatch = 1L << 16;

struct Options {
  std::string backend = "auto";
  std::string fatbin_dir = "build";
  std::string out = "results.json";
  std::vector<std::string> kernels = {"vector_add", "reduce_sum", "sgemm", "softmax"};
  std::vector<uint64_t> seeds = {1};
  int warmup = 3;
  int repeats = 20;
  // Adaptive repeats (--repeats auto): sample each case until the 95 %
  // interval of its median is within +-precision (after min_repeats
  // samples), for at most max_time_s, and never more than max_samples.
  bool auto_repeats = false;
  double precision = 0.01;
  double max_time_s = 120;
  int min_repeats = 10;
  long max_samples = 100000;
  long n = 1 << 20;        // vector_add, reduce_sum
  int gemm = 256;          // sgemm M = N = K
  int rows = 512, cols = 1024;  // softmax
  bool n_set = false, gemm_set = false, rows_set = false, cols_set = false;
  int device = 0;
  // devices (--devices all|I,J): run every listed device at once, one
  // context and host thread each, and write the results in the devices
  // shape (a "devices" list, case names ending /gpu=I) even when the list
  // holds one device; empty runs --device alone.
  std::string devices;
  // watchdog_s (--watchdog S): a device with no progress (no case
  // finished, no sample or repeat completed) for this long fails the run
  // naming it; 0 is off.
  double watchdog_s = 0;
  // burn (sustained on cuda): add the FMA-dense burn kernel as a case,
  // each launch about burn_ms long.
  bool burn = true;
  double burn_ms = 20;
  // burn_kernel (--burn-kernel): hmma (the tensor-core burn, sm_80+),
  // ffma, or auto (hmma where the GPU has compute capability 8.0 or more).
  std::string burn_kernel = "auto";
  // memsweep (--memsweep F): after the cases, sweep F of the device's
  // free memory (cpu: a scaled-down host buffer) with address-dependent
  // patterns and moving inversions; 0 is off.
  // In a sustained run the sweep's region is allocated after the cases
  // and a slice of it is checked and rewritten every round (memsweep_slice
  // bytes, 0: an eighth of the region, at most 1 GiB), so that the whole
  // region is swept again and again while the GPU is hot.
  double memsweep = 0;
  long long memsweep_max = 0;  // --memsweep-max BYTES: at most this much (0: no cap)
  long long memsweep_slice = 0;
  // membw (--membw): add the bandwidth case, a device-local copy of
  // membw_bytes (0: a quarter of the free memory, at most 1 GiB) timed like
  // the other cases; its bytes are what the copy reads and writes.
  bool membw = false;
  long long membw_bytes = 0;
  // burn_mem_every (--burn-mem-every N): the tensor-core burn streams 16
  // bytes per lane through its buffer every N blocks of 16 rounds (0: no
  // stream); burn_stream (--burn-stream BYTES) is the buffer's size (0:
  // four times the L2, at most an eighth of the free memory).
  unsigned burn_mem_every = 1;
  long long burn_stream = 0;
  bool flush = true;
  long batch = 0;  // cuda: launches per sample; 0 chooses (>= kMinSampleNs)
  // cuda: warm up for at least warmup_ms of timed batches, or until three
  // batches agree within kWarmStable (--warmup-ms; 0: the count alone).
  double warmup_ms = 200;
  bool graph = true;  // cuda: time the batch as one CUDA graph (--no-graph)
  // Sustained mode (--duration): seconds to run; 0 is off.
  double duration_s = 0;
  int threads = 0;  // cpu sustained: worker threads; 0 = the CPUs this process may use
  std::map<std::string, double> tolerance;
  std::string inject_fault;            // kernel whose output gets one element corrupted
  std::string inject_illegal_address;  // kernel launched with an invalid output pointer
  std::string inject_inconsistency;    // sustained: kernel whose 3rd repeat is corrupted
  int inject_device = -1;              // KERNEL@ORDINAL: the injections apply to that device only
};

// t_progress is the progress counter of the device this thread runs (see
// DeviceRun): every completed sample or checked repeat counts, so the
// watchdog can tell a slow device from a hung one.
thread_local std::atomic<long long>* t_progress = nullptr;

void progressed() {
  if (t_progress) ++*t_progress;
}

// inject_arg parses an injection's KERNEL[@ORDINAL].
std::string inject_arg(Options& o, const std::string& flag, const std::string& v) {
  auto at = v.find('@');
  if (at == std::string::npos) return v;
  char* end = nullptr;
  long d = std::strtol(v.c_str() + at + 1, &end, 10);
  if (at + 1 == v.size() || *end != 0 || d < 0 || d > 1024) {
    std::fprintf(stderr, "gpuattest-harness: %s %s: expected KERNEL@ORDINAL\nhint: gpuattest-harness --help\n", flag.c_str(), v.c_str());
    std::exit(2);
  }
  o.inject_device = int(d);
  return v.substr(0, at);
}

struct CaseSustained {
  long long repeats = 0, mismatches = 0, first_mismatch = 0;
  double busy_s = 0;
};

struct CaseResult {
  std::string name, kernel, status = "passed", message;
  double max_abs = 0, mean_abs = 0, corr = 1, tol = 0;
  std::vector<double> samples;
  double flops = 0, bytes = 0;
  std::map<std::string, std::string> config;
  std::string output_sha;
  long long mem_used = -1;
  std::string stop_reason;  // adaptive repeats: precision, max_time, max_samples
  double stop_elapsed_s = 0;
  bool sustained = false;
  CaseSustained sus;
};

struct MemSample {
  double elapsed_s = 0;
  long long iteration = 0, host_rss = -1, device_used = -1;
};

// Sustained is a sustained run's account ("sustained" in the results).
// BurnWindow is the burn case's work in one window of a sustained loop:
// the launches whose end falls in [from_s, to_s) of the loop (on the
// device's clock, from CUDA events).
struct BurnWindow {
  double from_s = 0, to_s = 0, flops = 0, busy_s = 0;
};

// BurnThroughput is what the burn case achieved over a sustained loop:
// its flops over its own busy time, in total and per window.
struct BurnThroughput {
  std::string kernel;  // hmma, ffma
  double flops = 0, busy_s = 0, window_s = 0;
  long long launches = 0;
  std::vector<BurnWindow> windows;
  void add(double at_s, double flops_, double busy) {
    flops += flops_;
    busy_s += busy;
    ++launches;
    if (window_s <= 0) return;
    const size_t k = size_t(std::max(0.0, at_s) / window_s);
    if (windows.size() <= k) {
      const size_t n = windows.size();
      windows.resize(k + 1);
      for (size_t i = n; i <= k; ++i) windows[i].from_s = double(i) * window_s, windows[i].to_s = double(i + 1) * window_s;
    }
    windows[k].flops += flops_;
    windows[k].busy_s += busy;
  }
};

struct Sustained {
  double duration_s = 0, elapsed_s = 0, busy_s = 0, duty = 0, memory_interval_s = 0;
  double cpu_s = -1;  // cpu backend: CPU time the process used in the loop
  std::string timing, check, error;
  std::string checksum_module;  // cuda: what load_embedded loaded for the checksum (not in the JSON)
  int threads = 0;
  long long iterations = 0, checked = 0, mismatches = 0;
  std::vector<MemSample> memory;
  // loop_from_ns and loop_to_ns are when the loop started and ended
  // (Unix nanoseconds, this host's clock), so that telemetry of the loop
  // can be told from the setup's; 0 when it did not run.
  long long loop_from_ns = 0, loop_to_ns = 0;
  BurnThroughput burn;  // the burn case's, when it ran in the loop
};

// unix_ns is the wall clock in Unix nanoseconds.
long long unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Device is what the results say about the CUDA device.
struct Device {
  std::string name, uuid, pci_bus_id, visible;
  int ordinal = -1;
};

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr, "gpuattest-harness: %s\nhint: gpuattest-harness --help\n", msg.c_str());
  std::exit(2);
}

const char* kHelp =
    "usage: gpuattest-harness [flags]\n"
    "  --backend auto|cuda|cpu   where kernels run (default auto: cuda if a device exists; with\n"
    "                            GPUATTEST_EXPECT_GPU set, as gpuattest sets it on a machine whose\n"
    "                            record lists GPUs, a CUDA failure is an error, never the CPU)\n"
    "  --fatbin-dir DIR          built fatbins, one <kernel>.fatbin each (default build)\n"
    "  --out FILE                results JSON (default results.json; - for stdout)\n"
    "  --kernels a,b             subset of vector_add,reduce_sum,sgemm,softmax\n"
    "  --warmup N                untimed iterations (env GPUATTEST_WARMUP; default 3)\n"
    "  --warmup-ms MS            cuda: then warm up with timed batches for at least MS (default 200)\n"
    "                            or until three batches agree within 2%; 0: the count alone\n"
    "  --no-graph                cuda: launch the timed batch directly, not as a CUDA graph\n"
    "  --repeats N|auto          timed iterations (env GPUATTEST_REPEATS; default 20); auto stops\n"
    "                            each case once the 95% interval of its median is within\n"
    "                            +-precision, or at max-time\n"
    "  --precision F             auto: relative half-width to reach (env GPUATTEST_PRECISION; 0.01)\n"
    "  --max-time S              auto: seconds per case at most (env GPUATTEST_MAX_TIME; 120)\n"
    "  --min-repeats N           auto: samples before the precision may stop (env GPUATTEST_MIN_REPEATS; 10)\n"
    "  --max-samples N           auto: samples per case at most (default 100000)\n"
    "  --batch N|auto            cuda: launches per timed sample (default auto: enough for >= 100 us)\n"
    "  --seed S[,S...]           input seeds (env GPUATTEST_SEED; default 1)\n"
    "  --n N                     elements for vector_add and reduce_sum (default 1048576)\n"
    "  --gemm N                  sgemm M=N=K (default 256)\n"
    "  --rows R --cols C         softmax shape (default 512x1024)\n"
    "  --device I                CUDA device ordinal among the visible ones (default 0;\n"
    "                            the driver applies CUDA_VISIBLE_DEVICES)\n"
    "  --devices all|I,J         run every listed CUDA device at once (env GPUATTEST_DEVICES), one\n"
    "                            context and host thread each; case names end /gpu=I, and the\n"
    "                            outputs of GPUs of one model are compared with each other\n"
    "  --watchdog S              fail the run when a device makes no progress (no case, sample or\n"
    "                            repeat done) for S seconds, naming the device (env GPUATTEST_WATCHDOG)\n"
    "  --no-flush                do not flush caches between samples\n"
    "  --duration S              sustained mode (env GPUATTEST_DURATION): launch every case back\n"
    "                            to back for S seconds, check every repeat's output against the\n"
    "                            first, report the duty cycle; on cuda the sizes default to\n"
    "                            --n 67108864 --gemm 2048 --rows 8192 --cols 4096\n"
    "  --memsweep F              after the cases, sweep F (0 < F <= 0.95, e.g. 0.85) of the device's\n"
    "                            free memory in 1 GiB chunks: an address-dependent pattern and its\n"
    "                            inverse, two patterns, each checked (cpu: a host buffer of\n"
    "                            --memsweep-max or 64 MiB, scaled down); the case reports bytes_covered\n"
    "  --memsweep-max BYTES      sweep at most BYTES; in a sustained run (--duration) the region is\n"
    "                            allocated after the cases and a slice of it is checked against the\n"
    "                            pattern written the round before and rewritten every round, so it\n"
    "                            is swept again and again while the GPU is hot\n"
    "  --memsweep-slice BYTES    sustained: the slice swept per round (default an eighth, <= 1 GiB)\n"
    "  --membw                   add the bandwidth case: a device-local copy, timed like the others\n"
    "                            (bytes read plus written per launch)\n"
    "  --membw-bytes BYTES       the copy's size (default a quarter of the free memory, <= 1 GiB)\n"
    "  --no-burn                 sustained: leave out the burn case (cuda: a tensor-core mma.sync or\n"
    "                            FFMA register loop on every SM; cpu: the FFMA loop on the host), which\n"
    "                            takes most of each round\n"
    "  --burn-ms MS              sustained: the burn case's launch time at least (default 20; longer\n"
    "                            when the other cases of a round take more than a quarter of it)\n"
    "  --burn-kernel K           sustained on cuda: hmma (tensor cores, sm_80+), ffma, or auto (default:\n"
    "                            hmma on compute capability 8.0 and later)\n"
    "  --burn-mem-every N        hmma: stream 16 bytes per lane through HBM every N blocks of 16\n"
    "                            rounds (default 1; 0: no stream)\n"
    "  --burn-stream BYTES       hmma: the stream's buffer (default 4x the L2, <= 1/8 of the free memory)\n"
    "  --threads N               sustained on cpu: worker threads (default: the usable CPUs)\n"
    "  --tolerance KERNEL=X      override a kernel's max-abs-error tolerance\n"
    "  --inject-fault KERNEL     corrupt one output element of KERNEL (proves the check); burn: flip the\n"
    "                            lowest mantissa bit of one A value of the tensor-core burn's last pass\n"
    "                            (what a stuck multiplier bit does); memsweep: corrupt one swept byte\n"
    "  --inject-illegal-address KERNEL\n"
    "                            launch KERNEL with an invalid output pointer: on cuda a real\n"
    "                            illegal-address fault that loses the context, on cpu simulated\n"
    "  --inject-inconsistency KERNEL\n"
    "                            sustained: corrupt KERNEL's output in its 3rd repeat\n"
    "                            (each --inject-* takes KERNEL@I to act on device I of --devices only)\n";

long parse_long(const std::string& flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != 0 || errno != 0 || x < lo || x > hi) {
    usage(flag + " " + v + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

double parse_double(const std::string& flag, const std::string& v, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != 0 || errno != 0 || !(x > lo) || x > hi) {
    usage(flag + " " + v + ": expected a number above " + std::to_string(lo) + " and at most " + std::to_string(hi));
  }
  return x;
}

void set_repeats(Options& o, const std::string& flag, const std::string& v) {
  if (v == "auto") {
    o.auto_repeats = true;
    return;
  }
  o.auto_repeats = false;
  o.repeats = int(parse_long(flag, v, 1, 1000000));
}

std::vector<uint64_t> parse_seeds(const std::string& flag, const std::string& v) {
  std::vector<uint64_t> out;
  for (auto& s : split(v, ',')) out.push_back(uint64_t(parse_long(flag, s, 0, 1L << 62)));
  if (out.empty()) usage(flag + ": expected at least one seed");
  return out;
}

std::string kernel_arg(const std::string& flag, const std::string& v) {
  if (std::find(std::begin(kKernels), std::end(kKernels), v) == std::end(kKernels))
    usage(flag + ": unknown kernel " + v + " (expected vector_add, reduce_sum, sgemm, softmax)");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  // Environment first (benchmark/burnin steps set these); flags win.
  if (const char* e = std::getenv("GPUATTEST_WARMUP"); e && *e) o.warmup = int(parse_long("GPUATTEST_WARMUP", e, 0, 1000000));
  if (const char* e = std::getenv("GPUATTEST_REPEATS"); e && *e) set_repeats(o, "GPUATTEST_REPEATS", e);
  if (const char* e = std::getenv("GPUATTEST_PRECISION"); e && *e) o.precision = parse_double("GPUATTEST_PRECISION", e, 0, 1);
  if (const char* e = std::getenv("GPUATTEST_MAX_TIME"); e && *e) o.max_time_s = parse_double("GPUATTEST_MAX_TIME", e, 0, 1e7);
  if (const char* e = std::getenv("GPUATTEST_MIN_REPEATS"); e && *e) o.min_repeats = int(parse_long("GPUATTEST_MIN_REPEATS", e, 1, 1000000));
  if (const char* e = std::getenv("GPUATTEST_SEED"); e && *e) o.seeds = parse_seeds("GPUATTEST_SEED", e);
  if (const char* e = std::getenv("GPUATTEST_DURATION"); e && *e) o.duration_s = parse_double("GPUATTEST_DURATION", e, 0, 1e7);
  if (const char* e = std::getenv("GPUATTEST_DEVICES"); e && *e) o.devices = e;
  if (const char* e = std::getenv("GPUATTEST_WATCHDOG"); e && *e) o.watchdog_s = parse_double("GPUATTEST_WATCHDOG", e, 0, 1e6);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string val;
    bool has_eq = false;
    if (a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      if (eq != std::string::npos) {
        val = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_eq = true;
      }
    }
    auto next = [&]() -> std::string {
      if (has_eq) return val;
      if (i + 1 >= argc) usage(a + ": missing value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      std::exit(0);
    } else if (a == "--backend") {
      o.backend = next();
      if (o.backend != "auto" && o.backend != "cuda" && o.backend != "cpu") usage("--backend " + o.backend + ": expected auto, cuda or cpu");
    } else if (a == "--fatbin-dir") {
      o.fatbin_dir = next();
    } else if (a == "--out") {
      o.out = next();
    } else if (a == "--kernels") {
      o.kernels = split(next(), ',');
      for (auto& k : o.kernels) kernel_arg("--kernels", k);
    } else if (a == "--warmup") {
      o.warmup = int(parse_long(a, next(), 0, 1000000));
    } else if (a == "--warmup-ms") {
      const std::string v = next();
      o.warmup_ms = v == "0" ? 0 : parse_double(a, v, 0, 60000);
    } else if (a == "--no-graph") {
      o.graph = false;
    } else if (a == "--repeats") {
      set_repeats(o, a, next());
    } else if (a == "--precision") {
      o.precision = parse_double(a, next(), 0, 1);
    } else if (a == "--max-time") {
      o.max_time_s = parse_double(a, next(), 0, 1e7);
    } else if (a == "--min-repeats") {
      o.min_repeats = int(parse_long(a, next(), 1, 1000000));
    } else if (a == "--max-samples") {
      o.max_samples = parse_long(a, next(), 1, 100000000);
    } else if (a == "--batch") {
      std::string v = next();
      o.batch = v == "auto" ? 0 : parse_long(a, v, 1, kMaxBatch);
    } else if (a == "--seed" || a == "--seeds") {
      o.seeds = parse_seeds(a, next());
    } else if (a == "--n") {
      o.n = parse_long(a, next(), 1, 1L << 30);
      o.n_set = true;
    } else if (a == "--gemm") {
      o.gemm = int(parse_long(a, next(), 1, 16384));
      o.gemm_set = true;
    } else if (a == "--rows") {
      o.rows = int(parse_long(a, next(), 1, 1 << 24));
      o.rows_set = true;
    } else if (a == "--cols") {
      o.cols = int(parse_long(a, next(), 1, 1 << 24));
      o.cols_set = true;
    } else if (a == "--device") {
      o.device = int(parse_long(a, next(), 0, 1024));
    } else if (a == "--devices") {
      o.devices = next();
    } else if (a == "--watchdog") {
      o.watchdog_s = parse_double(a, next(), 0, 1e6);
    } else if (a == "--memsweep") {
      o.memsweep = parse_double(a, next(), 0, 0.95);
    } else if (a == "--memsweep-max") {
      o.memsweep_max = parse_long(a, next(), 4096, 1L << 50);
    } else if (a == "--no-burn") {
      o.burn = false;
    } else if (a == "--burn-ms") {
      o.burn_ms = parse_double(a, next(), 0, 10000);
    } else if (a == "--burn-mem-every") {
      o.burn_mem_every = unsigned(parse_long(a, next(), 0, 1 << 20));
    } else if (a == "--burn-stream") {
      o.burn_stream = parse_long(a, next(), 1 << 20, 1L << 50);
    } else if (a == "--membw") {
      o.membw = true;
    } else if (a == "--membw-bytes") {
      o.membw_bytes = parse_long(a, next(), 1 << 20, 1L << 40);
    } else if (a == "--memsweep-slice") {
      o.memsweep_slice = parse_long(a, next(), 4096, 1L << 40);
    } else if (a == "--burn-kernel") {
      o.burn_kernel = next();
      if (o.burn_kernel != "auto" && o.burn_kernel != "hmma" && o.burn_kernel != "ffma") usage("--burn-kernel " + o.burn_kernel + ": expected auto, hmma or ffma");
    } else if (a == "--no-flush") {
      o.flush = false;
    } else if (a == "--duration") {
      o.duration_s = parse_double(a, next(), 0, 1e7);
    } else if (a == "--threads") {
      o.threads = int(parse_long(a, next(), 1, 4096));
    } else if (a == "--tolerance") {
      std::string v = next();
      auto eq = v.find('=');
      if (eq == std::string::npos) usage("--tolerance " + v + ": expected KERNEL=VALUE");
      char* end = nullptr;
      double t = std::strtod(v.c_str() + eq + 1, &end);
      if (*end != 0 || !(t >= 0)) usage("--tolerance " + v + ": expected a non-negative number");
      o.tolerance[v.substr(0, eq)] = t;
    } else if (a == "--inject-fault") {
      o.inject_fault = inject_arg(o, a, next());
    } else if (a == "--inject-illegal-address") {
      o.inject_illegal_address = kernel_arg(a, inject_arg(o, a, next()));
    } else if (a == "--inject-inconsistency") {
      o.inject_inconsistency = kernel_arg(a, inject_arg(o, a, next()));
    } else {
      usage("unknown flag " + a);
    }
  }
  if (!o.inject_inconsistency.empty() && o.duration_s <= 0) usage("--inject-inconsistency applies to sustained runs: add --duration S");
  return o;
}

// ---- inputs and the fp64 reference -------------------------------------

// splitmix64: a fixed, portable generator so a seed means the same inputs
// everywhere.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() {  // [-1, 1)
    return float(double(next() >> 40) / double(1ull << 24) * 2.0 - 1.0);
  }
};

std::vector<float> random_vec(size_t n, Rng& r) {
  std::vector<float> v(n);
  for (auto& x : v) x = r.uniform();
  return v;
}

// Kernel launch geometry shared by the CUDA backend and the CPU mirror.
const int kReduceBlock = 256;
// kReduceGrid is the CPU backend's reduce grid (the cuda backend sizes
// its grid from the GPU: see CudaCase::resident_grid), kMaxReduceGrid
// the most partial sums the second pass adds.
const int kReduceGrid = 256;
const int kMaxReduceGrid = 8192;

// An sgemm larger than this checks a sample of kRefRows output rows
// against the fp64 reference (a full one costs M*N*K fp64 operations on
// one core: minutes at 4096).
const size_t kFullRefGemm = 512;
const size_t kRefRows = 64;

struct Problem {
  std::string kernel, name;
  std::vector<std::vector<float>> in;
  // ref[j] is the reference of output element ref_at[j], or of element j
  // when ref_at is empty.
  std::vector<double> ref;
  std::vector<size_t> ref_at;
  // ref_bits, when set, is every output word exactly (the burn cases):
  // check_output compares bits, not values; ref_unit names what a word is
  // the result of ("warp", "thread").
  std::vector<uint32_t> ref_bits;
  std::string ref_unit = "word";
  size_t out_n = 0;
  double flops = 0, bytes = 0, tol = 0;
  std::map<std::string, std::string> config;
};

// make_problem builds case k with seed: name, configuration, sizes and,
// when data is true, the inputs and the fp64 reference.
Problem make_problem(const std::string& k, uint64_t seed, const Options& o, bool data = true) {
  Problem p;
  p.kernel = k;
  Rng r(seed);
  if (k == "vector_add") {
    size_t n = size_t(o.n);
    if (data) {
      p.in = {random_vec(n, r), random_vec(n, r)};
      p.ref.resize(n);
      for (size_t i = 0; i < n; ++i) p.ref[i] = double(p.in[0][i]) + double(p.in[1][i]);
    }
    p.out_n = n;
    p.flops = double(n);
    p.bytes = 12.0 * double(n);
    p.tol = 1e-6;
    p.name = "vector_add/n=" + std::to_string(n);
    p.config["n"] = std::to_string(n);
  } else if (k == "reduce_sum") {
    size_t n = size_t(o.n);
    if (data) {
      p.in = {random_vec(n, r)};
      double s = 0;
      for (float x : p.in[0]) s += double(x);
      p.ref = {s};
    }
    p.out_n = 1;
    p.flops = double(n);
    p.bytes = 4.0 * double(n);
    // fp32 accumulation of n values in [-1, 1): error grows ~ eps * sqrt(n) * |values|.
    p.tol = 1e-5 * std::max(1.0, std::sqrt(double(n)));
    p.name = "reduce_sum/n=" + std::to_string(n);
    p.config["n"] = std::to_string(n);
    p.config["block"] = std::to_string(kReduceBlock);
    p.config["grid"] = std::to_string(kReduceGrid);
  } else if (k == "sgemm") {
    size_t m = size_t(o.gemm), nn = size_t(o.gemm), kk = size_t(o.gemm);
    if (data) {
      p.in = {random_vec(m * kk, r), random_vec(kk * nn, r)};
      const auto& A = p.in[0];
      const auto& B = p.in[1];
      std::vector<size_t> rows;
      for (size_t i = 0; i < m; ++i) rows.push_back(i);
      if (m > kFullRefGemm) {
        rows.clear();
        for (size_t t = 0; t < kRefRows; ++t) rows.push_back(t * m / kRefRows);
        for (size_t i : rows)
          for (size_t j = 0; j < nn; ++j) p.ref_at.push_back(i * nn + j);
      }
      p.ref.assign(rows.size() * nn, 0.0);
      for (size_t t = 0; t < rows.size(); ++t) {
        const size_t i = rows[t];
        for (size_t q = 0; q < kk; ++q) {
          double a = A[i * kk + q];
          for (size_t j = 0; j < nn; ++j) p.ref[t * nn + j] += a * double(B[q * nn + j]);
        }
      }
    }
    p.out_n = m * nn;
    p.flops = 2.0 * double(m) * double(nn) * double(kk);
    p.bytes = 4.0 * double(m * kk + kk * nn + m * nn);
    p.tol = 2e-6 * double(kk);
    std::string s = std::to_string(o.gemm);
    p.name = "sgemm/m=" + s + "/n=" + s + "/k=" + s;
    p.config["m"] = p.config["n"] = p.config["k"] = s;
    if (m > kFullRefGemm) p.config["reference_rows"] = std::to_string(kRefRows);
  } else if (k == "softmax") {
    size_t rows = size_t(o.rows), cols = size_t(o.cols);
    if (data) {
      std::vector<float> x = random_vec(rows * cols, r);
      for (auto& v : x) v *= 8.0f;  // a spread that makes the max-shift matter
      p.ref.resize(rows * cols);
      for (size_t i = 0; i < rows; ++i) {
        double m = -INFINITY, s = 0;
        for (size_t j = 0; j < cols; ++j) m = std::max(m, double(x[i * cols + j]));
        for (size_t j = 0; j < cols; ++j) s += std::exp(double(x[i * cols + j]) - m);
        for (size_t j = 0; j < cols; ++j) p.ref[i * cols + j] = std::exp(double(x[i * cols + j]) - m) / s;
      }
      p.in = {std::move(x)};
    }
    p.out_n = rows * cols;
    p.flops = 5.0 * double(rows * cols);
    p.bytes = 8.0 * double(rows * cols);
    p.tol = 1e-6;
    p.name = "softmax/rows=" + std::to_string(rows) + "/cols=" + std::to_string(cols);
    p.config["rows"] = std::to_string(rows);
    p.config["cols"] = std::to_string(cols);
  }
  p.name += "/seed=" + std::to_string(seed);
  p.config["seed"] = std::to_string(seed);
  p.config["warmup"] = std::to_string(o.warmup);
  if (o.duration_s > 0) {
    char b[64];
    std::snprintf(b, sizeof b, "%g", o.duration_s);
    p.config["mode"] = "sustained";
    p.config["duration_s"] = b;
  } else {
    p.config["repeats"] = o.auto_repeats ? std::string("auto") : std::to_string(o.repeats);
    if (o.auto_repeats) {
      char b[64];
      std::snprintf(b, sizeof b, "%g", o.precision);
      p.config["precision"] = b;
    }
    p.config["flush"] = o.flush ? "true" : "false";
  }
  if (auto it = o.tolerance.find(k); it != o.tolerance.end()) p.tol = it->second;
  return p;
}

// ---- adaptive repeats ---------------------------------------------------------

// ln C(n, k) - n ln 2, for the Binomial(n, 1/2) probabilities below.
double ln_binom_half(int n, int k) {
  return std::lgamma(double(n) + 1) - std::lgamma(double(k) + 1) - std::lgamma(double(n - k) + 1) - double(n) * std::log(2.0);
}

// median_precision is the half-width of the distribution-free 95 % interval
// of the median of the sorted samples s, relative to the median: the order
// statistics x(j), x(n+1-j) with the largest j whose coverage
// 1 - 2 P(B <= j-1), B ~ Binomial(n, 1/2), is at least 0.95. It is the
// rule gpuattest re-checks (pipeline/suite/stats.MedianPrecision); a sample
// too small for the level gives infinity.
double median_precision(const std::vector<double>& s) {
  const int n = int(s.size());
  int best = 0;
  double cdf = 0;  // P(B <= j-1)
  for (int j = 1; j <= n / 2; ++j) {
    cdf += std::exp(ln_binom_half(n, j - 1));
    if (1 - 2 * std::min(cdf, 1.0) < 0.95) break;
    best = j;
  }
  if (best == 0) return INFINITY;
  const double h = double(n - 1) * 0.5;
  const size_t lo = size_t(std::floor(h));
  double med = double(s[lo]);
  if (lo + 1 < s.size()) med += (h - double(lo)) * (s[lo + 1] - s[lo]);
  if (!(med > 0)) return INFINITY;
  return (double(s[size_t(n - best)]) - double(s[size_t(best - 1)])) / 2 / med;
}

// Sampler decides when a case has enough samples: after o.repeats with a
// fixed count; with --repeats auto, once the median is known to
// o.precision (checked at every sample up to 200, then whenever the count
// grew by 2 %), at o.max_time_s, or at o.max_samples.
class Sampler {
 public:
  explicit Sampler(const Options& o) : o_(o), start_(std::chrono::steady_clock::now()) {}

  bool done(CaseResult& res) {
    const auto& xs = res.samples;
    const long n = long(xs.size());
    if (!o_.auto_repeats) return n >= o_.repeats;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    auto stop = [&](const char* why) {
      res.stop_reason = why;
      res.stop_elapsed_s = el;
      return true;
    };
    if (n >= o_.min_repeats && (n < 200 || n >= next_check_)) {
      next_check_ = long(double(n) * 1.02) + 1;
      sorted_ = xs;
      std::sort(sorted_.begin(), sorted_.end());
      if (median_precision(sorted_) <= o_.precision) return stop("precision");
    }
    if (n >= 1 && el >= o_.max_time_s) return stop("max_time");
    if (n >= o_.max_samples) return stop("max_samples");
    return false;
  }

 private:
  const Options& o_;
  std::chrono::steady_clock::time_point start_;
  long next_check_ = 0;
  std::vector<double> sorted_;
};

// ---- CPU backend: fp32 implementations of the kernels' algorithms --------

// burn_host is gpuattest_burn (checksum.cu) for thread t on the host: fmaf
// is exactly rounded and the sum is added in the same order, so the bits
// agree with the GPU's.
float burn_host(unsigned t, unsigned iters, float seed) {
  const float m = 0.9999999f, c = 1e-7f;
  float a[8];
  a[0] = seed + float(t & 1023) * 1e-6f;
  for (int j = 1; j < 8; ++j) a[j] = a[0] + 0.125f * float(j);
  for (unsigned i = 0; i < iters; ++i)
    for (int k = 0; k < 16; ++k)
      for (int j = 0; j < 8; ++j) a[j] = std::fma(a[j], m, c);
  float s = a[0];
  for (int j = 1; j < 8; ++j) s = s + a[j];
  return s;
}

// kBurnSeed is the burn case's seed (the same on every device).
const float kBurnSeed = 1.0f;

void cpu_compute(const Problem& p, const Options& o, std::vector<float>& out) {
  const std::string& k = p.kernel;
  if (k == "burn") {
    // The FFMA burn on the host: gpuattest_burn's loop for each of the
    // case's threads (see add_cpu_burn_case).
    const unsigned iters = unsigned(std::stoul(p.config.at("iters")));
    for (size_t t = 0; t < p.out_n; ++t) out[t] = burn_host(unsigned(t), iters, kBurnSeed);
  } else if (k == "vector_add") {
    const float* a = p.in[0].data();
    const float* b = p.in[1].data();
    for (size_t i = 0; i < p.out_n; ++i) out[i] = a[i] + b[i];
  } else if (k == "reduce_sum") {
    // Mirror the kernel: each of grid*block threads sums a grid-stride
    // slice, then threads and blocks are combined pairwise.
    const size_t threads = size_t(kReduceBlock) * kReduceGrid;
    std::vector<float> partial(threads, 0.0f);
    const float* x = p.in[0].data();
    const size_t n = p.in[0].size();
    for (size_t i = 0; i < n; ++i) partial[i % threads] += x[i];
    for (size_t w = threads / 2; w > 0; w /= 2)
      for (size_t i = 0; i < w; ++i) partial[i] += partial[i + w];
    out[0] = partial[0];
  } else if (k == "sgemm") {
    const size_t n = size_t(o.gemm);
    const float* A = p.in[0].data();
    const float* B = p.in[1].data();
    std::fill(out.begin(), out.end(), 0.0f);
    for (size_t i = 0; i < n; ++i)
      for (size_t q = 0; q < n; ++q) {
        const float a = A[i * n + q];
        float* c = &out[i * n];
        const float* b = &B[q * n];
        for (size_t j = 0; j < n; ++j) c[j] += a * b[j];
      }
  } else if (k == "softmax") {
    const size_t rows = size_t(o.rows), cols = size_t(o.cols);
    const float* x = p.in[0].data();
    for (size_t r = 0; r < rows; ++r) {
      float m = -INFINITY, s = 0.0f;
      for (size_t j = 0; j < cols; ++j) m = std::max(m, x[r * cols + j]);
      for (size_t j = 0; j < cols; ++j) s += std::exp(x[r * cols + j] - m);
      const float inv = 1.0f / s;
      for (size_t j = 0; j < cols; ++j) out[r * cols + j] = std::exp(x[r * cols + j] - m) * inv;
    }
  }
}

// A buffer larger than any last-level cache, rewritten between iterations.
std::vector<char>& cpu_flush_buffer() {
  static std::vector<char> buf(size_t(64) << 20);
  return buf;
}

// SampledWindow records in res's config when the timed samples ran
// (sampled_from_unix_ns, sampled_to_unix_ns: from its construction to
// its destruction), so that the benchmark step can read the GPU's
// clocks around them from its telemetry.
struct SampledWindow {
  CaseResult& res;
  static std::string now() {
    return std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
  explicit SampledWindow(CaseResult& r) : res(r) { res.config["sampled_from_unix_ns"] = now(); }
  ~SampledWindow() { res.config["sampled_to_unix_ns"] = now(); }
  SampledWindow(const SampledWindow&) = delete;
  SampledWindow& operator=(const SampledWindow&) = delete;
};

// CpuBackend is the CPU backend's state: only an injected illegal address
// (--inject-illegal-address) ever loses its "context".
struct CpuBackend {
  bool lost = false;
};

void run_cpu(CpuBackend& cpu, const Problem& p, const Options& o, CaseResult& res, std::vector<float>& out) {
  if (o.inject_illegal_address == p.kernel) {
    cpu.lost = true;
    throw std::runtime_error("simulated illegal address in " + p.kernel + " (--inject-illegal-address on the cpu backend)");
  }
  out.assign(p.out_n, 0.0f);
  for (int i = 0; i < o.warmup; ++i) cpu_compute(p, o, out);
  Sampler sampler(o);
  SampledWindow window(res);
  for (int i = 0; !sampler.done(res); ++i) {
    if (o.flush) {
      auto& b = cpu_flush_buffer();
      std::memset(b.data(), i & 0xff, b.size());
    }
    auto t0 = std::chrono::steady_clock::now();
    cpu_compute(p, o, out);
    auto t1 = std::chrono::steady_clock::now();
    // Clamp to 1 ns: a sample is a positive duration. One call per
    // sample: steady_clock resolves nanoseconds and costs ~20 ns a read,
    // far below the CPU kernels' times, so the CPU backend does not batch.
    res.samples.push_back(double(std::max<long long>(1, std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count())));
    progressed();
  }
}

// ---- output checksum (sustained mode) -----------------------------------------

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// checksum64 is checksum.cu's function on the host: the sum over the
// output's 32-bit words x[i] of mix64((i << 32) | x[i]), mod 2^64.
uint64_t checksum64(const std::vector<float>& out) {
  uint64_t sum = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t w;
    std::memcpy(&w, &out[i], 4);
    sum += mix64((uint64_t(i) << 32) | w);
  }
  return sum;
}

// host_rss returns this process's resident set size in bytes, -1 when
// /proc does not say.
long long host_rss() {
  std::ifstream f("/proc/self/statm");
  long long size = 0, resident = 0;
  if (!(f >> size >> resident)) return -1;
  return resident * (long long)sysconf(_SC_PAGESIZE);
}

// usable_cpus is the number of CPUs this process may run on.
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// cpu_seconds is the CPU time (user + system) this process has used.
double cpu_seconds() {
  rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// memory_interval is how often a sustained run samples memory: once a
// second, or ten times over a shorter run.
double memory_interval(double duration_s) { return std::min(1.0, duration_s / 10); }

// ---- CUDA backend ---------------------------------------------------------

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// kBadPointer is the output pointer --inject-illegal-address launches
// with: never a device allocation (the first page is unmapped).
const cu::CUdeviceptr kBadPointer = 0x100;

// kDefaultBlocksPerSM is the blocks per SM a grid is sized for when the
// driver has no occupancy calculator.
const int kDefaultBlocksPerSM = 4;

// load_driver loads libcuda.so.1 and resolves the entry points the
// harness uses into api; false, with why, when it cannot.
bool load_driver(cu::Api& api, std::string& why) {
  api.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api.lib) {
    why = std::string("libcuda.so.1 not loadable: ") + dlerror();
    return false;
  }
  bool ok = true;
  auto sym = [&](auto& fn, const char* n, bool required = true) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api.lib, n));
    if (!fn && required) {
      why = std::string("libcuda.so.1 lacks ") + n;
      ok = false;
    }
  };
  sym(api.cuInit, "cuInit");
  sym(api.cuDeviceGetCount, "cuDeviceGetCount");
  sym(api.cuDeviceGet, "cuDeviceGet");
  sym(api.cuDeviceGetName, "cuDeviceGetName");
  sym(api.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  // The GPU's UUID (not a MIG instance's: that is cuDeviceGetUuid_v2),
  // as NVML names it, so telemetry can find the device.
  sym(api.cuDeviceGetUuid, "cuDeviceGetUuid", false);
  sym(api.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", false);
  sym(api.cuCtxCreate, "cuCtxCreate_v2");
  sym(api.cuCtxDestroy, "cuCtxDestroy_v2");
  sym(api.cuCtxSynchronize, "cuCtxSynchronize");
  sym(api.cuModuleLoadData, "cuModuleLoadData");
  sym(api.cuModuleUnload, "cuModuleUnload");
  sym(api.cuModuleGetFunction, "cuModuleGetFunction");
  sym(api.cuMemAlloc, "cuMemAlloc_v2");
  sym(api.cuMemFree, "cuMemFree_v2");
  sym(api.cuMemAllocHost, "cuMemAllocHost_v2");
  sym(api.cuMemFreeHost, "cuMemFreeHost");
  sym(api.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  sym(api.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  sym(api.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  sym(api.cuMemsetD8, "cuMemsetD8_v2");
  sym(api.cuMemGetInfo, "cuMemGetInfo_v2");
  sym(api.cuLaunchKernel, "cuLaunchKernel");
  sym(api.cuEventCreate, "cuEventCreate");
  sym(api.cuEventDestroy, "cuEventDestroy_v2");
  sym(api.cuEventRecord, "cuEventRecord");
  sym(api.cuEventSynchronize, "cuEventSynchronize");
  sym(api.cuEventElapsedTime, "cuEventElapsedTime");
  sym(api.cuGetErrorString, "cuGetErrorString");
  sym(api.cuGetErrorName, "cuGetErrorName", false);
  sym(api.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", false);
  sym(api.cuStreamCreate, "cuStreamCreate", false);
  sym(api.cuStreamDestroy, "cuStreamDestroy_v2", false);
  sym(api.cuStreamSynchronize, "cuStreamSynchronize", false);
  sym(api.cuStreamBeginCapture, "cuStreamBeginCapture_v2", false);
  sym(api.cuStreamEndCapture, "cuStreamEndCapture", false);
  sym(api.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", false);
  sym(api.cuGraphLaunch, "cuGraphLaunch", false);
  sym(api.cuGraphExecDestroy, "cuGraphExecDestroy", false);
  sym(api.cuGraphDestroy, "cuGraphDestroy", false);
  sym(api.cuMemsetD8Async, "cuMemsetD8Async", false);
  return ok;
}

class Cuda {
 public:
  cu::Api api;
  cu::CUcontext ctx = nullptr;
  cu::CUdevice dev = 0;
  Device info;
  cu::CUdeviceptr flush = 0;
  size_t flush_bytes = 0;
  size_t l2 = 0;  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
  int sms = 1;  // multiprocessors (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)

  // open creates a context on the ordinal-th visible device (the driver
  // applies CUDA_VISIBLE_DEVICES) of the driver a (loaded and cuInit'ed);
  // identified is called once the device's name, UUID and PCI id are in
  // info, before the context is created (where a sick GPU hangs), so that
  // a watchdog can name it. On failure it returns false with the reason
  // in why.
  bool open(const cu::Api& a, int ordinal, std::string& why, const std::function<void()>& identified) {
    api = a;
    try {
      check(api.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
      char buf[256] = {0};
      check(api.cuDeviceGetName(buf, sizeof buf - 1, dev), "cuDeviceGetName");
      info.name = buf;
      info.ordinal = ordinal;
      if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) info.visible = v;
      // Identity is recorded when the driver gives it; it never stops a run.
      cu::CUuuid u;
      if (api.cuDeviceGetUuid && api.cuDeviceGetUuid(&u, dev) == 0) {
        const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
        char s[64];
        std::snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                      b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        info.uuid = s;
      }
      char bus[64] = {0};
      if (api.cuDeviceGetPCIBusId && api.cuDeviceGetPCIBusId(bus, sizeof bus - 1, dev) == 0) info.pci_bus_id = bus;
      if (identified) identified();
      check(api.cuCtxCreate(&ctx, 0, dev), "cuCtxCreate");
      check(api.cuDeviceGetAttribute(&sms, cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute(SM count)");
      sms = std::max(1, sms);
      int l2b = 0;
      check(api.cuDeviceGetAttribute(&l2b, cu::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev), "cuDeviceGetAttribute(L2)");
      l2 = size_t(std::max(0, l2b));
      flush_bytes = std::max<size_t>(l2 * 2, size_t(8) << 20);
      check(api.cuMemAlloc(&flush, flush_bytes), "cuMemAlloc(flush)");
    } catch (const CudaError& e) {
      why = e.what();
      return false;
    }
    return true;
  }

  // err names a CUDA error: "an illegal memory access was encountered
  // (CUDA_ERROR_ILLEGAL_ADDRESS, 700)".
  std::string err(cu::CUresult rc) {
    const char* s = nullptr;
    const char* n = nullptr;
    std::string code = std::to_string(rc);
    if (api.cuGetErrorName && api.cuGetErrorName(rc, &n) == 0 && n) code = std::string(n) + ", " + code;
    if (api.cuGetErrorString && api.cuGetErrorString(rc, &s) == 0 && s) return std::string(s) + " (" + code + ")";
    return "CUDA error " + code;
  }
  void check(cu::CUresult rc, const std::string& what) {
    if (rc != 0) throw CudaError(what + ": " + err(rc));
  }
  // healthy reports whether the context still works: after a sticky error
  // (an illegal address, a launch failure, an uncorrectable ECC error)
  // every call, cuCtxSynchronize included, returns it.
  bool healthy(std::string& why) {
    cu::CUresult rc = api.cuCtxSynchronize();
    if (rc == 0) return true;
    why = err(rc);
    return false;
  }
  // blocks_per_sm is how many blocks of fn with block threads and smem
  // bytes of dynamic shared memory one SM holds at once (the driver's
  // occupancy calculator); kDefaultBlocksPerSM where the driver lacks it.
  int blocks_per_sm(cu::CUfunction fn, int block, size_t smem) {
    int n = 0;
    if (api.cuOccupancyMaxActiveBlocksPerMultiprocessor &&
        api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, block, smem) == 0 && n > 0)
      return n;
    return kDefaultBlocksPerSM;
  }
  long long mem_used() {
    size_t free_b = 0, total = 0;
    if (api.cuMemGetInfo(&free_b, &total) != 0) return -1;
    return (long long)(total - free_b);
  }
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Event is a CUDA event, destroyed with its owner.
struct Event {
  Cuda& c;
  cu::CUevent e = nullptr;
  Event(Cuda& c, unsigned flags) : c(c) { c.check(c.api.cuEventCreate(&e, flags), "cuEventCreate"); }
  ~Event() {
    if (e) c.api.cuEventDestroy(e);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

// elapsed_ms returns the time between two completed events.
float elapsed_ms(Cuda& c, const Event& a, const Event& b) {
  float ms = 0;
  c.check(c.api.cuEventElapsedTime(&ms, a.e, b.e), "cuEventElapsedTime");
  return ms;
}

// CudaCase is one case loaded on the device: its module, buffers (inputs
// uploaded) and a launch function. It frees them when destroyed.
struct CudaCase {
  Cuda& c;
  cu::CUmodule mod = nullptr;
  cu::CUfunction fn = nullptr;
  std::vector<cu::CUdeviceptr> bufs, din;
  cu::CUdeviceptr dout = 0, partial = 0;
  // out is the pointer launches write their output to: dout, or
  // kBadPointer to inject an illegal address.
  cu::CUdeviceptr out = 0;
  size_t out_n = 0;
  std::function<void()> launch;
  // stream is where launches go (the legacy default stream, nullptr,
  // unless a stream was created).
  cu::CUstream stream = nullptr;

  explicit CudaCase(Cuda& c) : c(c) {}
  ~CudaCase() {
    for (auto b : bufs) c.api.cuMemFree(b);
    if (mod) c.api.cuModuleUnload(mod);
  }
  CudaCase(const CudaCase&) = delete;
  CudaCase& operator=(const CudaCase&) = delete;

  cu::CUdeviceptr alloc(size_t bytes) {
    cu::CUdeviceptr d = 0;
    c.check(c.api.cuMemAlloc(&d, std::max<size_t>(bytes, 4)), "cuMemAlloc");
    bufs.push_back(d);
    return d;
  }

  void load(const Problem& p, const Options& o, CaseResult& res) {
    const std::string path = o.fatbin_dir + "/" + p.kernel + ".fatbin";
    const std::string image = read_file(path);
    res.config["module"] = path;
    res.config["module_sha256"] = harness::sha256_hex(image.data(), image.size());
    c.check(c.api.cuModuleLoadData(&mod, image.data()), "cuModuleLoadData(" + path + ")");
    c.check(c.api.cuModuleGetFunction(&fn, mod, p.kernel.c_str()), "cuModuleGetFunction(" + p.kernel + ")");
    for (auto& v : p.in) {
      auto d = alloc(v.size() * sizeof(float));
      c.check(c.api.cuMemcpyHtoD(d, v.data(), v.size() * sizeof(float)), "cuMemcpyHtoD");
      din.push_back(d);
    }
    out_n = p.out_n;
    dout = out = alloc(p.out_n * sizeof(float));
    const std::string& k = p.kernel;
    res.config["sm_count"] = std::to_string(c.sms);
    if (k == "vector_add") {
      int n = int(p.out_n);
      unsigned grid = resident_grid(256, 0, (long(n) + 255) / 256, res);
      launch = [this, n, grid]() mutable {
        void* args[] = {&din[0], &din[1], &out, &n};
        c.check(c.api.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, stream, args, nullptr), "cuLaunchKernel(vector_add)");
      };
    } else if (k == "reduce_sum") {
      int n = int(p.in[0].size());
      int g = int(resident_grid(kReduceBlock, 0, std::min<long>((long(n) + kReduceBlock - 1) / kReduceBlock, kMaxReduceGrid), res));
      partial = alloc(size_t(g) * sizeof(float));
      launch = [this, n, g]() mutable {
        int pg = g;
        void* a1[] = {&din[0], &partial, &n};
        c.check(c.api.cuLaunchKernel(fn, unsigned(g), 1, 1, kReduceBlock, 1, 1, 0, stream, a1, nullptr), "cuLaunchKernel(reduce_sum pass 1)");
        void* a2[] = {&partial, &out, &pg};
        c.check(c.api.cuLaunchKernel(fn, 1, 1, 1, kReduceBlock, 1, 1, 0, stream, a2, nullptr), "cuLaunchKernel(reduce_sum pass 2)");
      };
    } else if (k == "sgemm") {
      int n = o.gemm;
      launch = [this, n]() mutable {
        int M = n, N = n, K = n;
        float alpha = 1.0f, beta = 0.0f;
        void* args[] = {&M, &N, &K, &alpha, &din[0], &din[1], &beta, &out};
        unsigned g = unsigned((n + 15) / 16);
        c.check(c.api.cuLaunchKernel(fn, g, g, 1, 16, 16, 1, 0, stream, args, nullptr), "cuLaunchKernel(sgemm)");
      };
      // One thread per output element: the grid is the problem's; the
      // config says how many waves of resident blocks it makes.
      const long tiles = long((n + 15) / 16) * long((n + 15) / 16);
      fixed_grid(tiles, 256, 0, std::to_string((n + 15) / 16) + "x" + std::to_string((n + 15) / 16), "16x16", res);
    } else if (k == "softmax") {
      int rows = o.rows, cols = o.cols;
      launch = [this, rows, cols]() mutable {
        const unsigned block = 256;
        void* args[] = {&din[0], &out, &rows, &cols};
        c.check(c.api.cuLaunchKernel(fn, unsigned(rows), 1, 1, block, 1, 1, block * sizeof(float), stream, args, nullptr), "cuLaunchKernel(softmax)");
      };
      fixed_grid(rows, 256, 256 * sizeof(float), std::to_string(rows), "256", res);
    }
  }

  // resident_grid sizes a grid-stride kernel's grid from the GPU: as many
  // blocks of block threads as its SMs hold at once (SM count times the
  // occupancy calculator's blocks per SM), no more than work blocks, and
  // records sm_count, blocks_per_sm, grid and block in res's config.
  unsigned resident_grid(int block, size_t smem, long work, CaseResult& res) {
    const int per_sm = c.blocks_per_sm(fn, block, smem);
    const long grid = std::max(1L, std::min(long(c.sms) * per_sm, work));
    res.config["blocks_per_sm"] = std::to_string(per_sm);
    res.config["grid"] = std::to_string(grid);
    res.config["block"] = std::to_string(block);
    return unsigned(grid);
  }

  // fixed_grid records a kernel whose grid the problem fixes (one block
  // per tile or row): the grid, the blocks per SM and the waves of
  // resident blocks it takes.
  void fixed_grid(long blocks, int threads, size_t smem, const std::string& grid, const std::string& block, CaseResult& res) {
    const int per_sm = c.blocks_per_sm(fn, threads, smem);
    const long resident = long(c.sms) * per_sm;
    res.config["blocks_per_sm"] = std::to_string(per_sm);
    res.config["grid"] = grid;
    res.config["block"] = block;
    res.config["waves"] = std::to_string((blocks + resident - 1) / resident);
  }

  // inject_illegal_address launches the kernel with an invalid output
  // pointer and synchronises: on a GPU that is a real illegal-address
  // fault, which loses the context.
  void inject_illegal_address() {
    out = kBadPointer;
    launch();
    out = dout;
    c.check(c.api.cuCtxSynchronize(), "cuCtxSynchronize after the launch with an invalid pointer (--inject-illegal-address)");
    throw CudaError("--inject-illegal-address: the launch with an invalid output pointer did not fault");
  }

  std::vector<float> output() {
    std::vector<float> h(out_n, 0.0f);
    c.check(c.api.cuMemcpyDtoH(h.data(), dout, out_n * sizeof(float)), "cuMemcpyDtoH");
    return h;
  }
};

// BatchGraph is a case's timed batch captured as one CUDA graph on a
// stream of its own: a sample of microsecond kernels then times the
// kernels, not cuLaunchKernel's host cost between them.
struct BatchGraph {
  Cuda& c;
  cu::CUstream stream = nullptr;
  cu::CUgraph graph = nullptr;
  cu::CUgraphExec exec = nullptr;
  explicit BatchGraph(Cuda& c) : c(c) {
    const cu::Api& a = c.api;
    if (a.cuStreamCreate && a.cuStreamDestroy && a.cuMemsetD8Async)
      c.check(a.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~BatchGraph() {
    if (exec) c.api.cuGraphExecDestroy(exec);
    if (graph) c.api.cuGraphDestroy(graph);
    if (stream) c.api.cuStreamDestroy(stream);
  }
  BatchGraph(const BatchGraph&) = delete;
  BatchGraph& operator=(const BatchGraph&) = delete;

  // capture records batch launches of cc into an instantiated graph;
  // false, with why, where the driver lacks graphs or refuses.
  bool capture(CudaCase& cc, long batch, std::string& why) {
    const cu::Api& a = c.api;
    if (!stream || !a.cuStreamBeginCapture || !a.cuStreamEndCapture || !a.cuGraphInstantiateWithFlags || !a.cuGraphLaunch ||
        !a.cuGraphExecDestroy || !a.cuGraphDestroy) {
      why = "the driver lacks stream capture or graphs";
      return false;
    }
    cu::CUresult rc = a.cuStreamBeginCapture(stream, cu::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (rc != 0) {
      why = "cuStreamBeginCapture: " + c.err(rc);
      return false;
    }
    try {
      for (long j = 0; j < batch; ++j) cc.launch();
    } catch (const CudaError& e) {
      why = e.what();
    }
    rc = a.cuStreamEndCapture(stream, &graph);
    if (why.empty() && rc != 0) why = "cuStreamEndCapture: " + c.err(rc);
    if (why.empty() && (rc = a.cuGraphInstantiateWithFlags(&exec, graph, 0)) != 0) why = "cuGraphInstantiateWithFlags: " + c.err(rc);
    return why.empty();
  }
};

// warm_up runs timed batches (sample returns one's nanoseconds) until
// o.warmup_ms has passed or three batches in a row agree within
// kWarmStable, and records what it did in res's config.
template <class F>
void warm_up(F&& sample, long batch, const Options& o, CaseResult& res) {
  if (o.warmup_ms <= 0) return;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> last;
  std::string stop = "time";
  long n = 0;
  for (;;) {
    last.push_back(sample(batch));
    ++n;
    if (last.size() > 3) last.erase(last.begin());
    const double el = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (last.size() == 3) {
      const auto [lo, hi] = std::minmax_element(last.begin(), last.end());
      if (*lo > 0 && (*hi - *lo) / *lo <= kWarmStable) {
        stop = "stable";
        break;
      }
    }
    if (el >= o.warmup_ms) break;
  }
  const double el = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", el);
  res.config["warmup_ms"] = ms;
  res.config["warmup_batches"] = std::to_string(n);
  res.config["warmup_stop"] = stop;
}

void run_cuda(Cuda& c, const Problem& p, const Options& o, CaseResult& res, std::vector<float>& out) {
  CudaCase cc(c);
  cc.load(p, o, res);
  if (o.inject_illegal_address == p.kernel) cc.inject_illegal_address();
  BatchGraph bg(c);
  cc.stream = bg.stream;
  Event e0(c, cu::CU_EVENT_DEFAULT), e1(c, cu::CU_EVENT_DEFAULT);
  for (int i = 0; i < o.warmup; ++i) cc.launch();
  c.check(c.api.cuCtxSynchronize(), "cuCtxSynchronize(warmup)");
  int flushes = 0;
  bool graph = false;
  // sample times a batch of back-to-back launches (or the batch's graph)
  // with one event pair, after an L2 flush, and returns the total in
  // nanoseconds.
  auto sample = [&](long batch) {
    const unsigned char v = (unsigned char)(flushes++ & 0xff);
    if (o.flush && bg.stream) c.check(c.api.cuMemsetD8Async(c.flush, v, c.flush_bytes, bg.stream), "cuMemsetD8Async(L2 flush)");
    if (o.flush && !bg.stream) c.check(c.api.cuMemsetD8(c.flush, v, c.flush_bytes), "cuMemsetD8(L2 flush)");
    c.check(c.api.cuEventRecord(e0.e, bg.stream), "cuEventRecord");
    if (graph) {
      c.check(c.api.cuGraphLaunch(bg.exec, bg.stream), "cuGraphLaunch");
    } else {
      for (long j = 0; j < batch; ++j) cc.launch();
    }
    c.check(c.api.cuEventRecord(e1.e, bg.stream), "cuEventRecord");
    c.check(c.api.cuEventSynchronize(e1.e), "cuEventSynchronize");
    return double(elapsed_ms(c, e0, e1)) * 1e6;
  };
  long batch = o.batch;
  if (batch == 0) {
    // Grow the batch until one sample spans kMinSampleNs; these launches
    // are warm-up too.
    batch = 1;
    for (;;) {
      double ns = sample(batch);
      if (ns >= kMinSampleNs || batch >= kMaxBatch) break;
      long want = long(std::ceil(double(batch) * kMinSampleNs * 1.25 / std::max(ns, 1.0)));
      batch = std::min(kMaxBatch, std::max(batch * 2, want));
    }
  }
  res.config["batch"] = std::to_string(batch);
  std::string why = o.graph ? "" : "--no-graph";
  graph = o.graph && bg.capture(cc, batch, why);
  res.config["graph"] = graph ? "true" : "false: " + why;
  warm_up(sample, batch, o, res);
  Sampler sampler(o);
  {
    SampledWindow window(res);
    while (!sampler.done(res)) {
      res.samples.push_back(std::max(1e-3, sample(batch) / double(batch)));
      progressed();
    }
  }
  out = cc.output();
  res.mem_used = c.mem_used();
}

// ---- correctness ------------------------------------------------------------

// check_bits compares every word of out with p.ref_bits: the burn cases,
// whose results are exact by construction. max_abs_error is the number of
// words that differ, mean_abs_error their share.
void check_bits(const Problem& p, const std::vector<float>& out, CaseResult& res) {
  res.tol = 0;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < p.ref_bits.size(); ++i) {
    uint32_t w = 0;
    if (i < out.size()) std::memcpy(&w, &out[i], 4);
    if (i >= out.size() || w != p.ref_bits[i]) {
      if (bad++ == 0) first = i;
    }
  }
  res.max_abs = double(bad);
  res.mean_abs = p.ref_bits.empty() ? 0 : double(bad) / double(p.ref_bits.size());
  res.corr = bad == 0 ? 1 : 0;
  if (bad > 0) {
    char buf[384];
    std::snprintf(buf, sizeof buf,
                  "%zu of %zu %ss differ from the host's exact result (first: %s %zu): the GPU computed a wrong product or sum "
                  "(a stuck or flipped bit in its arithmetic)",
                  bad, p.ref_bits.size(), p.ref_unit.c_str(), p.ref_unit.c_str(), first);
    res.status = "failed";
    res.message = buf;
  }
}

// check_output compares out with the fp64 reference (every element, or
// the sampled ones when p.ref_at names them), or bit for bit with
// p.ref_bits when the problem has it.
void check_output(const Problem& p, const std::vector<float>& out, CaseResult& res) {
  if (!p.ref_bits.empty()) {
    check_bits(p, out, res);
    return;
  }
  const size_t n = p.ref.size();
  double max_abs = 0, sum_abs = 0;
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    double y = double(out[p.ref_at.empty() ? i : p.ref_at[i]]), x = p.ref[i];
    if (!std::isfinite(y)) {
      finite = false;
      continue;
    }
    double e = std::fabs(y - x);
    max_abs = std::max(max_abs, e);
    sum_abs += e;
    sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
  }
  res.tol = p.tol;
  res.mean_abs = n ? sum_abs / double(n) : 0;
  res.max_abs = max_abs;
  if (n >= 2) {
    double dn = double(n);
    double cov = sxy - sx * sy / dn, vx = sxx - sx * sx / dn, vy = syy - sy * sy / dn;
    if (vx > 0 && vy > 0) {
      res.corr = cov / std::sqrt(vx * vy);
    } else {
      res.corr = (max_abs == 0) ? 1.0 : 0.0;
    }
  } else {
    // One value (reduce_sum): correlation is undefined; report 1 when the
    // value is within tolerance and 0 when not.
    res.corr = max_abs <= p.tol ? 1.0 : 0.0;
  }
  char buf[256];
  if (!finite) {
    res.status = "failed";
    res.max_abs = 1.7976931348623157e308;
    res.corr = 0;
    res.message = "output contains NaN or Inf";
  } else if (max_abs > p.tol) {
    res.status = "failed";
    std::snprintf(buf, sizeof buf, "max_abs_error %.6g exceeds tolerance %.6g", max_abs, p.tol);
    res.message = buf;
  } else if (n >= 2 && res.corr < 0.999) {
    res.status = "failed";
    std::snprintf(buf, sizeof buf, "correlation %.6f with the fp64 reference is below 0.999", res.corr);
    res.message = buf;
  }
}

// ---- sustained mode (--duration) ------------------------------------------------

// SustainedCase is a case of a sustained run that passed its first repeat.
struct SustainedCase {
  Problem p;
  size_t result = 0;         // index of its CaseResult
  std::vector<float> first;  // the first repeat's output
  std::unique_ptr<CudaCase> cc;
  long long repeats = 1, mismatches = 0, first_mismatch = 0;
  double busy_s = 0;
  bool burn = false;  // the burn case: its throughput is recorded per window
  unsigned char first_byte = 0;  // the first output's first byte (--inject-inconsistency)
};

MemSample memory_sample(double elapsed_s, long long iteration, Cuda* c) {
  MemSample m;
  m.elapsed_s = elapsed_s;
  m.iteration = iteration;
  m.host_rss = host_rss();
  if (c) m.device_used = c->mem_used();
  return m;
}

// sustained_cpu runs every case back to back on o.threads threads (the
// usable CPUs by default) for o.duration_s, comparing every repeat's
// output bytes with the first repeat's. Busy time is the wall time the
// threads spent in kernels (steady_clock), so the duty cycle is
// busy / (threads x wall); cpu_s says how much CPU they really got (less
// on a machine shared with other work).
void sustained_cpu(const Options& o, std::vector<std::unique_ptr<SustainedCase>>& sc, Sustained& sus) {
  const int threads = o.threads > 0 ? o.threads : usable_cpus();
  sus.timing = "steady_clock";
  sus.check = "bytes";
  sus.threads = threads;
  struct Counters {
    std::atomic<long long> repeats{1}, mismatches{0}, first{0}, busy_ns{0};
  };
  std::vector<Counters> cnt(sc.size());
  std::atomic<bool> stop{false};
  std::atomic<long long> rounds{0};
  std::atomic<long long>* progress = t_progress;  // the workers are other threads
  auto worker = [&]() {
    std::vector<std::vector<float>> outs(sc.size());
    for (size_t c = 0; c < sc.size(); ++c) outs[c].assign(sc[c]->p.out_n, 0.0f);
    while (!stop.load(std::memory_order_relaxed)) {
      size_t c = 0;
      for (; c < sc.size() && !stop.load(std::memory_order_relaxed); ++c) {
        auto t0 = std::chrono::steady_clock::now();
        cpu_compute(sc[c]->p, o, outs[c]);
        auto t1 = std::chrono::steady_clock::now();
        cnt[c].busy_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
        const long long r = ++cnt[c].repeats;
        if (progress) ++*progress;
        if (o.inject_inconsistency == sc[c]->p.kernel && r == 3) {
          uint32_t w;
          std::memcpy(&w, &outs[c][0], 4);
          w ^= 1;
          std::memcpy(&outs[c][0], &w, 4);
        }
        if (std::memcmp(outs[c].data(), sc[c]->first.data(), outs[c].size() * sizeof(float)) != 0) {
          ++cnt[c].mismatches;
          long long seen = cnt[c].first.load();
          while ((seen == 0 || r < seen) && !cnt[c].first.compare_exchange_weak(seen, r)) {
          }
        }
      }
      if (c == sc.size()) ++rounds;
    }
  };
  const double interval = memory_interval(o.duration_s);
  sus.memory_interval_s = interval;
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds();
  sus.memory.push_back(memory_sample(0, 0, nullptr));
  std::vector<std::thread> ws;
  for (int t = 0; t < threads; ++t) ws.emplace_back(worker);
  double next = interval;
  for (;;) {
    double el = seconds_since(t0);
    if (el >= o.duration_s) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(next, o.duration_s) - el));
    el = seconds_since(t0);
    if (el >= next && el < o.duration_s) {
      sus.memory.push_back(memory_sample(el, rounds.load(), nullptr));
      next += interval;
    }
  }
  stop = true;
  for (auto& w : ws) w.join();
  sus.elapsed_s = seconds_since(t0);
  sus.cpu_s = cpu_seconds() - cpu0;
  sus.memory.push_back(memory_sample(sus.elapsed_s, rounds.load(), nullptr));
  sus.iterations = rounds.load();
  double busy = 0;
  for (size_t c = 0; c < sc.size(); ++c) {
    sc[c]->repeats = cnt[c].repeats.load();
    sc[c]->mismatches = cnt[c].mismatches.load();
    sc[c]->first_mismatch = cnt[c].first.load();
    sc[c]->busy_s = double(cnt[c].busy_ns.load()) / 1e9;
    busy += sc[c]->busy_s;
    sus.checked += sc[c]->repeats - 1;
    sus.mismatches += sc[c]->mismatches;
  }
  sus.busy_s = busy;
  sus.duty = sus.elapsed_s > 0 ? std::min(1.0, busy / (double(threads) * sus.elapsed_s)) : 0;
}

// DeviceBuffers frees a device and a pinned host allocation.
struct DeviceBuffers {
  Cuda& c;
  cu::CUdeviceptr dev = 0;
  void* host = nullptr;
  explicit DeviceBuffers(Cuda& c) : c(c) {}
  ~DeviceBuffers() {
    if (dev) c.api.cuMemFree(dev);
    if (host) c.api.cuMemFreeHost(host);
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
};

// Cubin is one embedded cubin and the compute capability it was built
// for (sm_XY).
struct Cubin {
  int major, minor;
  const unsigned char* image;
};

// Embedded is one source's embedded code: its cubins (checksum_cubin.h,
// burn_mma_cubin.h) and its PTX (checksum_ptx.h, burn_mma_ptx.h).
struct Embedded {
  const char* source;
  const char* ptx;
  Cubin cubins[2];
};

const Embedded kChecksumCode{"checksum.cu", harness::kChecksumPTX, {{8, 0, harness::kChecksumCubinSm80}, {9, 0, harness::kChecksumCubinSm90}}};
const Embedded kBurnMmaCode{"burn_mma.cu", harness::kBurnMmaPTX, {{8, 0, harness::kBurnMmaCubinSm80}, {9, 0, harness::kBurnMmaCubinSm90}}};

// pick_cubin is the cubin of e that runs on compute capability
// major.minor without JIT: the same major and the highest minor not above
// the device's (sm_80's runs on 8.6 and 8.9); nullptr when none does.
const Cubin* pick_cubin(const Embedded& e, int major, int minor) {
  const Cubin* best = nullptr;
  for (const Cubin& cb : e.cubins)
    if (cb.major == major && cb.minor <= minor && (!best || cb.minor > best->minor)) best = &cb;
  return best;
}

// load_embedded loads e on c's device into *m: the cubin for its compute
// capability (pick_cubin; no JIT), else the PTX, which the driver's JIT
// compiles (libnvidia-ptxjitcompiler.so.1). It returns what it loaded,
// "cubin sm_90" or "ptx (JIT)", which the results record.
std::string load_embedded(Cuda& c, const Embedded& e, cu::CUmodule* m) {
  int major = 0, minor = 0;
  c.check(c.api.cuDeviceGetAttribute(&major, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c.dev), "cuDeviceGetAttribute(compute capability)");
  c.check(c.api.cuDeviceGetAttribute(&minor, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c.dev), "cuDeviceGetAttribute(compute capability)");
  const std::string sm = "sm_" + std::to_string(major) + std::to_string(minor);
  if (const Cubin* cb = pick_cubin(e, major, minor)) {
    const std::string what = "sm_" + std::to_string(cb->major) + std::to_string(cb->minor);
    c.check(c.api.cuModuleLoadData(m, cb->image), std::string("cuModuleLoadData(") + e.source + " cubin " + what + " on " + sm + ")");
    return "cubin " + what;
  }
  cu::CUresult rc = c.api.cuModuleLoadData(m, e.ptx);
  if (rc != 0) {
    std::string hint = rc == 221 ? "; hint: the driver's PTX JIT (libnvidia-ptxjitcompiler.so.1) is missing, and the harness ships cubins only for sm_80 and sm_90" : "";
    c.check(rc, std::string("cuModuleLoadData(") + e.source + " PTX on " + sm + ", no cubin for it)" + hint);
  }
  return "ptx (JIT)";
}

// sustained_cuda launches every case back to back on the default stream
// for o.duration_s. After each launch the checksum kernel (embedded,
// checksum.cu: load_embedded) sums the output into per-block partials, which an
// asynchronous copy brings to pinned host memory; the host compares their
// sum with the first repeat's, computed on the host. Up to kRing repeats
// are in flight, so the GPU never waits for the host. Busy time is the sum
// of each repeat's event pair (kernel and checksum), wall time an event
// pair around the whole loop. each_round, when set, is called after every
// round's launches (the memory sweep's slice). The burn case's flops and
// busy time (its kernel's own event pair, without the checksum) go to
// sus.burn by the window its launch ended in (on the device's clock,
// from the loop's start event).
void sustained_cuda(Cuda& c, const Options& o, std::vector<std::unique_ptr<SustainedCase>>& sc,
                    const std::vector<CaseResult>& cases, Sustained& sus, const std::function<void()>& each_round) {
  sus.timing = "cuda_events";
  sus.check = "checksum64";
  const unsigned kGrid = 512, kBlock = 256;
  const int kRing = 64;
  const size_t part_bytes = size_t(kGrid) * sizeof(uint64_t);
  struct Module {
    Cuda& c;
    cu::CUmodule m = nullptr;
    ~Module() {
      if (m) c.api.cuModuleUnload(m);
    }
  } ckmod{c};
  sus.checksum_module = load_embedded(c, kChecksumCode, &ckmod.m);
  cu::CUfunction ck = nullptr;
  c.check(c.api.cuModuleGetFunction(&ck, ckmod.m, "gpuattest_checksum"), "cuModuleGetFunction(gpuattest_checksum)");
  auto checksum = [&](cu::CUdeviceptr x, size_t n, cu::CUdeviceptr part) {
    unsigned long long nn = n;
    void* a[] = {&x, &nn, &part};
    c.check(c.api.cuLaunchKernel(ck, kGrid, 1, 1, kBlock, 1, 1, 0, nullptr, a, nullptr), "cuLaunchKernel(gpuattest_checksum)");
  };
  DeviceBuffers parts(c);
  c.check(c.api.cuMemAlloc(&parts.dev, part_bytes * kRing), "cuMemAlloc(checksum partials)");
  c.check(c.api.cuMemAllocHost(&parts.host, part_bytes * kRing), "cuMemAllocHost(checksum partials)");
  uint64_t* hparts = static_cast<uint64_t*>(parts.host);
  auto sum_of = [&](int slot) {
    uint64_t s = 0;
    for (unsigned g = 0; g < kGrid; ++g) s += hparts[size_t(slot) * kGrid + g];
    return s;
  };

  // The device checksum must agree with the host's on the first output,
  // or its verdicts mean nothing.
  std::vector<uint64_t> golden(sc.size());
  for (size_t i = 0; i < sc.size(); ++i) {
    golden[i] = checksum64(sc[i]->first);
    checksum(sc[i]->cc->dout, sc[i]->cc->out_n, parts.dev);
    c.check(c.api.cuMemcpyDtoH(hparts, parts.dev, part_bytes), "cuMemcpyDtoH(checksum partials)");
    if (sum_of(0) != golden[i]) {
      char b[256];
      std::snprintf(b, sizeof b, "the checksum kernel's sum of %s's first output (%016llx) differs from the host's (%016llx): its verdicts cannot be trusted",
                    cases[sc[i]->result].name.c_str(), (unsigned long long)sum_of(0), (unsigned long long)golden[i]);
      throw CudaError(b);
    }
    // The loop compares checksums: the first output's bytes are not
    // needed on the host any more (at sustained sizes, hundreds of MB).
    std::vector<float>().swap(sc[i]->first);
  }

  struct Slot {
    std::unique_ptr<Event> e0, ek, e1, e2;  // ek: after the kernel, before its checksum
    int c = -1;
    long long repeat = 0;
  };
  std::vector<Slot> ring(kRing);
  for (auto& s : ring) {
    s.e0 = std::make_unique<Event>(c, cu::CU_EVENT_DEFAULT);
    s.ek = std::make_unique<Event>(c, cu::CU_EVENT_DEFAULT);
    s.e1 = std::make_unique<Event>(c, cu::CU_EVENT_DEFAULT);
    // The host waits on e2 (after the copy): blocking, not spinning, and
    // without timing.
    s.e2 = std::make_unique<Event>(c, cu::CU_EVENT_BLOCKING_SYNC | cu::CU_EVENT_DISABLE_TIMING);
  }
  struct HookSlot {
    std::unique_ptr<Event> e0, e1;
    bool pending = false;
  };
  const int kHookRing = 16;
  std::vector<HookSlot> hooks(each_round ? kHookRing : 0);
  for (auto& h : hooks) {
    h.e0 = std::make_unique<Event>(c, cu::CU_EVENT_DEFAULT);
    h.e1 = std::make_unique<Event>(c, cu::CU_EVENT_DEFAULT);
  }
  auto harvest_hook = [&](HookSlot& h) {
    c.check(c.api.cuEventSynchronize(h.e1->e), "cuEventSynchronize(the round's sweep slice)");
    sus.busy_s += double(elapsed_ms(c, *h.e0, *h.e1)) / 1e3;
    h.pending = false;
  };
  Event start(c, cu::CU_EVENT_DEFAULT), end(c, cu::CU_EVENT_DEFAULT);
  auto harvest = [&](int slot) {
    Slot& s = ring[size_t(slot)];
    SustainedCase& k = *sc[size_t(s.c)];
    c.check(c.api.cuEventSynchronize(s.e2->e), "cuEventSynchronize(" + cases[k.result].name + " repeat " + std::to_string(s.repeat) + ")");
    const double busy = double(elapsed_ms(c, *s.e0, *s.e1)) / 1e3;
    k.busy_s += busy;
    sus.busy_s += busy;
    if (k.burn) sus.burn.add(double(elapsed_ms(c, start, *s.ek)) / 1e3, cases[k.result].flops, double(elapsed_ms(c, *s.e0, *s.ek)) / 1e3);
    ++sus.checked;
    progressed();
    if (sum_of(slot) != golden[size_t(s.c)]) {
      ++k.mismatches;
      ++sus.mismatches;
      if (k.first_mismatch == 0 || s.repeat < k.first_mismatch) k.first_mismatch = s.repeat;
    }
    s.c = -1;
  };

  const double interval = memory_interval(o.duration_s);
  sus.memory_interval_s = interval;
  sus.burn.window_s = interval;
  sus.memory.push_back(memory_sample(0, 0, &c));
  sus.loop_from_ns = unix_ns();
  const auto t0 = std::chrono::steady_clock::now();
  double next = interval;
  long long issued = 0;
  try {
    c.check(c.api.cuEventRecord(start.e, nullptr), "cuEventRecord");
    while (seconds_since(t0) < o.duration_s) {
      for (size_t i = 0; i < sc.size(); ++i) {
        const int slot = int(issued % kRing);
        Slot& s = ring[size_t(slot)];
        if (s.c >= 0) harvest(slot);
        SustainedCase& k = *sc[i];
        s.c = int(i);
        s.repeat = ++k.repeats;
        c.check(c.api.cuEventRecord(s.e0->e, nullptr), "cuEventRecord");
        k.cc->launch();
        c.check(c.api.cuEventRecord(s.ek->e, nullptr), "cuEventRecord");
        if (o.inject_inconsistency == k.p.kernel && s.repeat == 3) {
          c.check(c.api.cuMemsetD8(k.cc->dout, (unsigned char)(k.first_byte ^ 1), 1), "cuMemsetD8(--inject-inconsistency)");
        }
        checksum(k.cc->dout, k.cc->out_n, parts.dev + cu::CUdeviceptr(slot) * part_bytes);
        c.check(c.api.cuEventRecord(s.e1->e, nullptr), "cuEventRecord");
        c.check(c.api.cuMemcpyDtoHAsync(hparts + size_t(slot) * kGrid, parts.dev + cu::CUdeviceptr(slot) * part_bytes, part_bytes, nullptr),
                "cuMemcpyDtoHAsync(checksum partials)");
        c.check(c.api.cuEventRecord(s.e2->e, nullptr), "cuEventRecord");
        ++issued;
      }
      if (each_round) {
        // The round's own work (the sweep's slice) keeps the device busy
        // too: its event pair counts in the busy time. Pairs are reused
        // in a ring, harvested before reuse.
        HookSlot& h = hooks[size_t(sus.iterations % kHookRing)];
        if (h.pending) harvest_hook(h);
        c.check(c.api.cuEventRecord(h.e0->e, nullptr), "cuEventRecord");
        each_round();
        c.check(c.api.cuEventRecord(h.e1->e, nullptr), "cuEventRecord");
        h.pending = true;
      }
      ++sus.iterations;
      const double el = seconds_since(t0);
      if (el >= next && el < o.duration_s) {
        sus.memory.push_back(memory_sample(el, sus.iterations, &c));
        next += interval;
      }
    }
    c.check(c.api.cuEventRecord(end.e, nullptr), "cuEventRecord");
    for (auto& h : hooks)
      if (h.pending) harvest_hook(h);
    for (long long j = std::max(0LL, issued - kRing); j < issued; ++j) {
      const int slot = int(j % kRing);
      if (ring[size_t(slot)].c >= 0) harvest(slot);
    }
    c.check(c.api.cuEventSynchronize(end.e), "cuEventSynchronize(end of the sustained loop)");
    const double wall = double(elapsed_ms(c, start, end)) / 1e3;
    sus.duty = wall > 0 ? std::min(1.0, sus.busy_s / wall) : 0;
  } catch (const std::exception& e) {
    sus.error = std::string(e.what()) + " (after " + std::to_string(seconds_since(t0)) +
                " s; an asynchronous fault surfaces at the next synchronisation, so it may come from an earlier launch)";
  }
  sus.loop_to_ns = unix_ns();
  sus.elapsed_s = seconds_since(t0);
  sus.memory.push_back(memory_sample(sus.elapsed_s, sus.iterations, sus.error.empty() ? &c : nullptr));
}

// ---- results JSON -------------------------------------------------------------

std::string jstr(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += char(c);
        }
    }
  }
  return o + "\"";
}

std::string jnum(double v) {
  if (!std::isfinite(v)) v = v > 0 ? 1.7976931348623157e308 : (v < 0 ? -1.7976931348623157e308 : 0);
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// render_loop writes a sustained loop's window and burn throughput, each
// as ", \"key\": ..." (nothing for what it lacks).
std::string render_loop(const Sustained& s) {
  std::ostringstream o;
  if (s.loop_from_ns > 0) o << ", \"loop_from_unix_ns\": " << s.loop_from_ns << ", \"loop_to_unix_ns\": " << s.loop_to_ns;
  const BurnThroughput& b = s.burn;
  if (b.busy_s > 0) {
    o << ", \"burn\": {\"kernel\": " << jstr(b.kernel) << ", \"launches\": " << b.launches << ", \"flops\": " << jnum(b.flops)
      << ", \"busy_s\": " << jnum(b.busy_s) << ", \"tflops\": " << jnum(b.flops / b.busy_s / 1e12) << ", \"window_s\": " << jnum(b.window_s)
      << ", \"windows\": [";
    bool first = true;
    for (const BurnWindow& w : b.windows) {
      if (w.busy_s <= 0) continue;
      o << (first ? "" : ", ") << "{\"from_s\": " << jnum(w.from_s) << ", \"to_s\": " << jnum(w.to_s) << ", \"flops\": " << jnum(w.flops)
        << ", \"busy_s\": " << jnum(w.busy_s) << "}";
      first = false;
    }
    o << "]}";
  }
  return o.str();
}

std::string render(const std::string& backend, const Device* dev, const std::vector<CaseResult>& cases, const Sustained* sus,
                   const std::string& extra = "") {
  std::ostringstream o;
  o << "{\n  \"schema\": " << jstr(kSchema) << ",\n  \"tool\": " << jstr(kTool) << ",\n  \"backend\": " << jstr(backend) << ",\n";
  if (dev) {
    o << "  \"device\": " << jstr(dev->name) << ",\n";
    if (!dev->uuid.empty()) o << "  \"device_uuid\": " << jstr(dev->uuid) << ",\n";
    if (!dev->pci_bus_id.empty()) o << "  \"device_pci_bus_id\": " << jstr(dev->pci_bus_id) << ",\n";
    if (dev->ordinal >= 0) o << "  \"device_ordinal\": " << dev->ordinal << ",\n";
    if (!dev->visible.empty()) o << "  \"cuda_visible_devices\": " << jstr(dev->visible) << ",\n";
  }
  if (sus) {
    const auto& s = *sus;
    o << "  \"sustained\": {\"duration_s\": " << jnum(s.duration_s) << ", \"elapsed_s\": " << jnum(s.elapsed_s)
      << ", \"busy_s\": " << jnum(s.busy_s) << ", \"duty_cycle\": " << jnum(s.duty) << ", \"timing\": " << jstr(s.timing);
    if (s.threads > 0) o << ", \"threads\": " << s.threads;
    if (s.cpu_s >= 0) o << ", \"cpu_s\": " << jnum(s.cpu_s);
    o << ", \"iterations\": " << s.iterations << ", \"outputs_checked\": " << s.checked << ", \"mismatches\": " << s.mismatches
      << ", \"consistent\": " << (s.mismatches == 0 && s.error.empty() ? "true" : "false") << ", \"check\": " << jstr(s.check);
    if (s.memory_interval_s > 0) o << ", \"memory_interval_s\": " << jnum(s.memory_interval_s);
    o << render_loop(s);
    if (!s.memory.empty()) {
      o << ",\n    \"memory\": [";
      for (size_t i = 0; i < s.memory.size(); ++i) {
        const auto& m = s.memory[i];
        o << (i ? ", " : "") << "{\"elapsed_s\": " << jnum(m.elapsed_s) << ", \"iteration\": " << m.iteration;
        if (m.host_rss >= 0) o << ", \"host_rss_bytes\": " << m.host_rss;
        if (m.device_used >= 0) o << ", \"device_used_bytes\": " << m.device_used;
        o << "}";
      }
      o << "]";
    }
    if (!s.error.empty()) o << ",\n    \"error\": " << jstr(s.error);
    o << "},\n";
  }
  o << extra;
  o << "  \"cases\": [";
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    o << (i ? ",\n" : "\n") << "    {\n";
    o << "      \"name\": " << jstr(c.name) << ",\n";
    o << "      \"kernel\": " << jstr(c.kernel) << ",\n";
    o << "      \"status\": " << jstr(c.status) << ",\n";
    o << "      \"message\": " << jstr(c.message) << ",\n";
    o << "      \"correctness\": {\"max_abs_error\": " << jnum(c.max_abs) << ", \"mean_abs_error\": " << jnum(c.mean_abs)
      << ", \"correlation\": " << jnum(c.corr) << ", \"tolerance\": " << jnum(c.tol) << "},\n";
    o << "      \"samples_ns\": [";
    for (size_t j = 0; j < c.samples.size(); ++j) o << (j ? ", " : "") << jnum(c.samples[j]);
    o << "],\n";
    o << "      \"flops\": " << jnum(c.flops) << ",\n";
    o << "      \"bytes\": " << jnum(c.bytes) << ",\n";
    o << "      \"config\": {";
    size_t j = 0;
    for (auto& kv : c.config) o << (j++ ? ", " : "") << jstr(kv.first) << ": " << jstr(kv.second);
    o << "}";
    if (!c.output_sha.empty()) o << ",\n      \"output_sha256\": " << jstr(c.output_sha);
    if (c.mem_used >= 0) o << ",\n      \"device_memory_used_bytes\": " << c.mem_used;
    if (!c.stop_reason.empty())
      o << ",\n      \"stop\": {\"reason\": " << jstr(c.stop_reason) << ", \"elapsed_s\": " << jnum(c.stop_elapsed_s) << "}";
    if (c.sustained) {
      o << ",\n      \"sustained\": {\"repeats\": " << c.sus.repeats << ", \"mismatches\": " << c.sus.mismatches;
      if (c.sus.first_mismatch > 0) o << ", \"first_mismatch\": " << c.sus.first_mismatch;
      o << ", \"busy_s\": " << jnum(c.sus.busy_s) << "}";
    }
    o << "\n    }";
  }
  o << (cases.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return o.str();
}

// write_atomic writes data to path through a temporary file in the same
// directory, fsynced and renamed, so a crash never leaves half a file.
bool write_atomic(const std::string& path, const std::string& data, std::string& why) {
  if (path == "-") {
    std::fwrite(data.data(), 1, data.size(), stdout);
    return std::fflush(stdout) == 0;
  }
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    why = "creating " + tmp + ": " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size() && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    why = "writing " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

// ---- the memory sweep (--memsweep) -----------------------------------------------

const int kSweepPasses = 4;  // pattern A, ~A, pattern B, ~B

// mem_pattern is checksum.cu's pattern on the host.
uint32_t mem_pattern(uint64_t addr, unsigned pass) {
  const uint32_t v = uint32_t(mix64(addr ^ (uint64_t(pass >> 1) << 48)));
  return (pass & 1) ? ~v : v;
}

// sweep_case starts the sweep's case result.
CaseResult sweep_case(const Options& o, const std::string& backend) {
  CaseResult res;
  res.kernel = "memsweep";
  char b[64];
  std::snprintf(b, sizeof b, "%g", o.memsweep);
  res.name = std::string("memsweep/fraction=") + b;
  res.config["backend"] = backend;
  res.config["fraction"] = b;
  res.config["passes"] = std::to_string(kSweepPasses);
  res.config["pattern"] = "splitmix64(address, pass), moving inversions";
  return res;
}

// SweepChunk is one allocation of a sweep: its device pointer and bytes.
struct SweepChunk {
  cu::CUdeviceptr ptr = 0;
  size_t bytes = 0;
};

// where names the sweep address addr (a 32-bit word index over the
// chunks in order) as its chunk and byte offset in it.
std::string sweep_where(const std::vector<SweepChunk>& chunks, unsigned long long addr, CaseResult& res) {
  unsigned long long base = 0;
  for (size_t k = 0; k < chunks.size(); ++k) {
    const unsigned long long words = chunks[k].bytes / 4;
    if (addr < base + words) {
      const unsigned long long off = (addr - base) * 4;
      res.config["first_error_chunk"] = std::to_string(k);
      res.config["first_error_offset"] = std::to_string(off);
      char b[160];
      std::snprintf(b, sizeof b, "first at chunk %zu (of %zu), byte offset %llu (0x%llx)", k, chunks.size(), off, off);
      return b;
    }
    base += words;
  }
  return "";
}

// sweep_verdict records what a sweep covered and found; where names the
// first failing word (sweep_where), when one failed.
void sweep_verdict(CaseResult& res, long long bytes, long long errors, long long free_b, const std::string& inject, const std::string& where = "") {
  res.bytes = double(bytes) * 2 * kSweepPasses;
  res.config["bytes_covered"] = std::to_string(bytes);
  if (free_b >= 0) res.config["free_bytes"] = std::to_string(free_b);
  res.config["errors"] = std::to_string(errors);
  char b[512];
  if (errors > 0) {
    res.status = "failed";
    std::snprintf(b, sizeof b, "%lld of %lld words differ from the pattern written%s%s (%s)", errors, bytes / 4, where.empty() ? "" : ", ", where.c_str(),
                  inject.empty() ? "a memory fault: stuck bit, coupling or address decoding" : inject.c_str());
    res.message = b;
  }
}

// SweepModule is checksum.cu loaded for the sweep, with its two kernels.
struct SweepModule {
  Cuda& c;
  cu::CUmodule m = nullptr;
  cu::CUfunction wr = nullptr, ck = nullptr;
  explicit SweepModule(Cuda& c, CaseResult& res) : c(c) {
    res.config["code"] = load_embedded(c, kChecksumCode, &m);
    c.check(c.api.cuModuleGetFunction(&wr, m, "gpuattest_mem_write"), "cuModuleGetFunction(gpuattest_mem_write)");
    c.check(c.api.cuModuleGetFunction(&ck, m, "gpuattest_mem_check"), "cuModuleGetFunction(gpuattest_mem_check)");
  }
  ~SweepModule() {
    if (m) c.api.cuModuleUnload(m);
  }
  SweepModule(const SweepModule&) = delete;
  SweepModule& operator=(const SweepModule&) = delete;
  unsigned grid() const { return unsigned(std::max(1, c.sms) * 8); }
  void write(cu::CUdeviceptr d, unsigned long long words, unsigned long long base, unsigned pass) {
    void* a[] = {&d, &words, &base, &pass};
    c.check(c.api.cuLaunchKernel(wr, grid(), 1, 1, 256, 1, 1, 0, nullptr, a, nullptr), "cuLaunchKernel(gpuattest_mem_write)");
  }
  // check adds the words that differ to errs[0] and lowers errs[1] to the
  // address of the first.
  void check(cu::CUdeviceptr d, unsigned long long words, unsigned long long base, unsigned pass, cu::CUdeviceptr errs) {
    void* a[] = {&d, &words, &base, &pass, &errs};
    c.check(c.api.cuLaunchKernel(ck, grid(), 1, 1, 256, 1, 1, 0, nullptr, a, nullptr), "cuLaunchKernel(gpuattest_mem_check)");
  }
};

// sweep_alloc allocates o.memsweep of c's free memory (capped by
// o.memsweep_max) in chunks of at most 1 GiB, until the share is reached
// or an allocation fails; bufs frees them. It returns the free memory it
// saw, and the device's total in *total.
size_t sweep_alloc(Cuda& c, const Options& o, CudaCase& bufs, std::vector<SweepChunk>& chunks, unsigned long long* got, size_t* total = nullptr) {
  size_t free_b = 0, tot = 0;
  c.check(c.api.cuMemGetInfo(&free_b, &tot), "cuMemGetInfo");
  if (total) *total = tot;
  unsigned long long want = (unsigned long long)(double(free_b) * o.memsweep);
  if (o.memsweep_max > 0) want = std::min<unsigned long long>(want, (unsigned long long)o.memsweep_max);
  const size_t chunk = size_t(1) << 30;
  *got = 0;
  while (*got < want) {
    size_t n = size_t(std::min<unsigned long long>(chunk, want - *got)) & ~size_t(3);
    if (n == 0) break;
    cu::CUdeviceptr d = 0;
    if (c.api.cuMemAlloc(&d, n) != 0) break;  // fragmentation: sweep what was allocated
    bufs.bufs.push_back(d);
    chunks.push_back({d, n});
    *got += n;
  }
  return free_b;
}

// sweep_cuda sweeps o.memsweep of c's free memory (capped by
// o.memsweep_max): 1 GiB chunks allocated until the share is reached or
// an allocation fails, every pass written and checked on the device. A
// failing sweep names the chunk and byte offset of the first word that
// differs.
void sweep_cuda(Cuda& c, const Options& o, CaseResult& res) {
  SweepModule mod(c, res);
  CudaCase bufs(c);  // frees the chunks
  std::vector<SweepChunk> chunks;
  cu::CUdeviceptr errs = bufs.alloc(16);
  unsigned long long got = 0;
  size_t total = 0;
  const size_t free_b = sweep_alloc(c, o, bufs, chunks, &got, &total);
  c.check(c.api.cuMemsetD8(errs, 0, 8), "cuMemsetD8(memsweep errors)");
  c.check(c.api.cuMemsetD8(errs + 8, 0xff, 8), "cuMemsetD8(memsweep errors)");
  for (unsigned pass = 0; pass < unsigned(kSweepPasses); ++pass) {
    unsigned long long base = 0;
    for (auto& ch : chunks) {
      mod.write(ch.ptr, ch.bytes / 4, base, pass);
      base += ch.bytes / 4;
    }
    if (o.inject_fault == "memsweep" && pass == 1 && !chunks.empty()) {
      c.check(c.api.cuMemsetD8(chunks.back().ptr + 4, 0x5a, 1), "cuMemsetD8(--inject-fault memsweep)");
    }
    base = 0;
    for (auto& ch : chunks) {
      mod.check(ch.ptr, ch.bytes / 4, base, pass, errs);
      base += ch.bytes / 4;
    }
    c.check(c.api.cuCtxSynchronize(), "cuCtxSynchronize(memsweep pass " + std::to_string(pass) + ")");
    progressed();
  }
  unsigned long long e[2] = {0, 0};
  c.check(c.api.cuMemcpyDtoH(e, errs, 16), "cuMemcpyDtoH(memsweep errors)");
  res.config["chunks"] = std::to_string(chunks.size());
  res.config["total_bytes"] = std::to_string(total);
  sweep_verdict(res, (long long)got, (long long)e[0], (long long)free_b, o.inject_fault == "memsweep" ? "--inject-fault memsweep" : "",
                e[0] > 0 ? sweep_where(chunks, e[1], res) : "");
}

// run_membw is the bandwidth case (--membw) on c: a device-local copy of
// o.membw_bytes (default a quarter of the free memory, at most 1 GiB)
// with checksum.cu's gpuattest_copy, timed like the other cases (CUDA
// events around a batch of copies lasting at least kMinSampleNs; samples
// are per copy), its bytes the ones each copy reads and writes. The
// source holds the sweep's pattern and the copy is checked against it
// afterwards.
void run_membw(Cuda& c, const Options& o, CaseResult& res) {
  SweepModule mod(c, res);
  cu::CUfunction copy = nullptr;
  c.check(c.api.cuModuleGetFunction(&copy, mod.m, "gpuattest_copy"), "cuModuleGetFunction(gpuattest_copy)");
  size_t free_b = 0, total = 0;
  c.check(c.api.cuMemGetInfo(&free_b, &total), "cuMemGetInfo");
  size_t bytes = o.membw_bytes > 0 ? size_t(o.membw_bytes) : std::min(size_t(1) << 30, free_b / 4);
  bytes &= ~size_t(4095);
  if (bytes == 0) throw CudaError("--membw: no device memory free for the copy");
  res.name = "membw/bytes=" + std::to_string(bytes);
  res.config["copy_bytes"] = std::to_string(bytes);
  res.config["floor_metric"] = "memory_bandwidth";
  res.bytes = 2.0 * double(bytes);
  res.flops = 0;
  CudaCase bufs(c);
  cu::CUdeviceptr src = bufs.alloc(bytes), dst = bufs.alloc(bytes), errs = bufs.alloc(16);
  mod.write(src, bytes / 4, 0, 0);
  unsigned long long n16 = bytes / 16;
  const unsigned block = 256;
  const int per_sm = c.blocks_per_sm(copy, int(block), 0);
  const unsigned grid = unsigned(std::max(1L, std::min<long>(long(c.sms) * per_sm, long((n16 + block - 1) / block))));
  res.config["grid"] = std::to_string(grid);
  res.config["block"] = std::to_string(block);
  res.config["sm_count"] = std::to_string(c.sms);
  auto launch = [&]() {
    void* a[] = {&src, &dst, &n16};
    c.check(c.api.cuLaunchKernel(copy, grid, 1, 1, block, 1, 1, 0, nullptr, a, nullptr), "cuLaunchKernel(gpuattest_copy)");
  };
  for (int i = 0; i < std::max(1, o.warmup); ++i) launch();
  c.check(c.api.cuCtxSynchronize(), "cuCtxSynchronize(membw warm-up)");
  Event e0(c, cu::CU_EVENT_DEFAULT), e1(c, cu::CU_EVENT_DEFAULT);
  auto sample = [&](long batch) {
    c.check(c.api.cuEventRecord(e0.e, nullptr), "cuEventRecord");
    for (long j = 0; j < batch; ++j) launch();
    c.check(c.api.cuEventRecord(e1.e, nullptr), "cuEventRecord");
    c.check(c.api.cuEventSynchronize(e1.e), "cuEventSynchronize(membw)");
    return double(elapsed_ms(c, e0, e1)) * 1e6;
  };
  long batch = 1;
  for (;;) {
    const double ns = sample(batch);
    if (ns >= kMinSampleNs || batch >= kMaxBatch) break;
    batch = std::min(kMaxBatch, std::max(batch * 2, long(std::ceil(double(batch) * kMinSampleNs * 1.25 / std::max(ns, 1.0)))));
  }
  res.config["batch"] = std::to_string(batch);
  Sampler sampler(o);
  {
    SampledWindow window(res);
    while (!sampler.done(res)) {
      res.samples.push_back(std::max(1e-3, sample(batch) / double(batch)));
      progressed();
    }
  }
  c.check(c.api.cuMemsetD8(errs, 0, 8), "cuMemsetD8(membw errors)");
  c.check(c.api.cuMemsetD8(errs + 8, 0xff, 8), "cuMemsetD8(membw errors)");
  mod.check(dst, bytes / 4, 0, 0, errs);
  unsigned long long e[2] = {0, 0};
  c.check(c.api.cuMemcpyDtoH(e, errs, 16), "cuMemcpyDtoH(membw errors)");
  res.mem_used = c.mem_used();
  if (e[0] > 0) {
    res.status = "failed";
    res.message = std::to_string(e[0]) + " of " + std::to_string(bytes / 4) + " words differ after the copy (first at byte " + std::to_string(e[1] * 4) + ")";
  }
}

// SweepRegion is the memory sweep of a sustained run: o.memsweep of the
// free memory left after the cases, in slices of o.memsweep_slice bytes
// (an eighth of the region by default, at most 1 GiB). The first pass is
// written over the whole region before the loop; every round, step takes
// the next slice: it checks the pattern written there the visit before
// (so each word holds it for a whole cycle of the region, hot), then
// writes the next pass's (A, ~A, B, ~B in turn). Errors accumulate on the
// device and finish reads them once.
class SweepRegion {
 public:
  SweepRegion(Cuda& c, const Options& o, CaseResult& res) : c_(c), o_(o), mod_(c, res), bufs_(c) {
    errs_ = bufs_.alloc(16);
    c.check(c.api.cuMemsetD8(errs_, 0, 8), "cuMemsetD8(memsweep errors)");
    c.check(c.api.cuMemsetD8(errs_ + 8, 0xff, 8), "cuMemsetD8(memsweep errors)");
    free_b_ = sweep_alloc(c, o, bufs_, chunks_, &got_);
    const size_t slice = size_t(o.memsweep_slice > 0 ? o.memsweep_slice : std::min<long long>(std::max<long long>((long long)got_ / 8, 4096), 1LL << 30)) & ~size_t(3);
    unsigned long long base = 0;
    for (auto& ch : chunks_) {
      for (size_t off = 0; off < ch.bytes; off += slice) {
        const size_t n = std::min(slice, ch.bytes - off);
        slices_.push_back({ch.ptr + off, n / 4, base + off / 4, 0, off == 0 && &ch == &chunks_.back()});
      }
      base += ch.bytes / 4;
    }
    res.config["chunks"] = std::to_string(chunks_.size());
    res.config["slices"] = std::to_string(slices_.size());
    res.config["slice_bytes"] = std::to_string(slice);
    res.config["mode"] = "sustained";
    // The first pass is written before the loop, so that every visit in
    // the loop checks what the cycle before wrote (and the region is in
    // place before the loop's memory is watched for leaks).
    for (size_t k = 0; k < slices_.size(); ++k) write_next(slices_[k]);
    c.check(c.api.cuCtxSynchronize(), "cuCtxSynchronize(memsweep region written)");
  }

  // step sweeps the next slice: check what the visit before wrote, then
  // write the next pass.
  void step() {
    if (slices_.empty()) return;
    Slice& s = slices_[next_];
    next_ = (next_ + 1) % slices_.size();
    mod_.check(s.ptr, s.words, s.base, (s.visits - 1) % kSweepPasses, errs_);
    checked_ += s.words * 4;
    write_next(s);
  }

  // finish reads the errors and gives res its verdict: bytes_covered are
  // the bytes checked at least once, sweeps the full cycles of checks.
  void finish(CaseResult& res) {
    unsigned long long e[2] = {0, 0};
    c_.check(c_.api.cuMemcpyDtoH(e, errs_, 16), "cuMemcpyDtoH(memsweep errors)");
    unsigned long long covered = 0, cycles = ~0ull;
    for (auto& s : slices_) {
      if (s.visits > 1) covered += s.words * 4;
      cycles = std::min<unsigned long long>(cycles, s.visits > 0 ? s.visits - 1 : 0);
    }
    if (slices_.empty()) cycles = 0;
    res.config["sweeps"] = std::to_string(cycles);
    res.config["bytes_checked"] = std::to_string(checked_);
    res.config["region_bytes"] = std::to_string(got_);
    sweep_verdict(res, (long long)covered, (long long)e[0], (long long)free_b_, o_.inject_fault == "memsweep" ? "--inject-fault memsweep" : "",
                  e[0] > 0 ? sweep_where(chunks_, e[1], res) : "");
    res.bytes = double(checked_) * 2;
    if (res.status == "passed" && covered == 0) {
      res.status = "error";
      res.message = "the sustained run ended before any slice of the sweep was checked (" + std::to_string(slices_.size()) + " slices)";
    }
  }

 private:
  struct Slice {
    cu::CUdeviceptr ptr;
    unsigned long long words, base;
    unsigned visits;  // writes so far
    bool inject_here;
  };

  // write_next writes s's next pass (--inject-fault memsweep: one byte of
  // the last chunk corrupted after its first write).
  void write_next(Slice& s) {
    mod_.write(s.ptr, s.words, s.base, s.visits % kSweepPasses);
    if (s.visits == 0 && s.inject_here && o_.inject_fault == "memsweep")
      c_.check(c_.api.cuMemsetD8(s.ptr + 4, 0x5a, 1), "cuMemsetD8(--inject-fault memsweep)");
    ++s.visits;
  }
  Cuda& c_;
  const Options& o_;
  SweepModule mod_;
  CudaCase bufs_;  // frees the chunks
  std::vector<SweepChunk> chunks_;
  std::vector<Slice> slices_;
  cu::CUdeviceptr errs_ = 0;
  unsigned long long got_ = 0, checked_ = 0;
  size_t free_b_ = 0, next_ = 0;
};

// sweep_cpu is the sweep on a host buffer of --memsweep-max (64 MiB by
// default): the same patterns and passes, scaled down; it tests the
// harness, not a GPU.
void sweep_cpu(const Options& o, CaseResult& res) {
  const size_t bytes = size_t(o.memsweep_max > 0 ? o.memsweep_max : (64LL << 20)) & ~size_t(3);
  std::vector<uint32_t> buf(bytes / 4);
  long long errors = 0;
  unsigned long long first = ~0ull;
  for (unsigned pass = 0; pass < unsigned(kSweepPasses); ++pass) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = mem_pattern(i, pass);
    if (o.inject_fault == "memsweep" && pass == 1) buf[1] ^= 0x5a;
    for (size_t i = 0; i < buf.size(); ++i) {
      if (buf[i] != mem_pattern(i, pass)) {
        ++errors;
        first = std::min<unsigned long long>(first, i);
      }
    }
    progressed();
  }
  res.config["scaled_down"] = "true";
  const std::vector<SweepChunk> one = {{0, bytes}};
  sweep_verdict(res, (long long)bytes, errors, -1, o.inject_fault == "memsweep" ? "--inject-fault memsweep" : "",
                errors > 0 ? sweep_where(one, first, res) : "");
}

// DeviceRun is one device's part of a run: its cases and sustained loop.
struct DeviceRun {
  Cuda* cuda = nullptr;  // nullptr on the cpu backend
  std::string tag;       // stderr prefix: "[gpu 5] " when several devices run
  std::vector<CaseResult> cases;
  Sustained sus;
  int ordinal = 0;
  std::atomic<const Device*> info{nullptr};  // set once the device is open
  std::string open_error;  // the device could not be opened: every case is "not run"
  // progress counts finished cases, samples and checked repeats; the
  // watchdog reads it.
  std::atomic<long long> progress{0};
  std::atomic<bool> done{false};
  std::mutex mu;         // guards current and, while the device runs, cases
  std::string current;   // the case in progress

  void set_current(const std::string& name) {
    std::lock_guard<std::mutex> l(mu);
    current = name;
    ++progress;
  }
  void add_case(CaseResult&& r) {
    std::lock_guard<std::mutex> l(mu);
    cases.push_back(std::move(r));
    ++progress;
  }
};

// ---- the burn case (sustained mode) --------------------------------------------

// kBurnMmaPeriod is burn_mma.cu's BURN_PERIOD: after a multiple of it
// rounds every fragment is back where it started, so a launch's result
// does not depend on its length.
const unsigned kBurnMmaPeriod = 128;

// burn_hash32 is burn_mma.cu's burn_hash (murmur3's finaliser).
uint32_t burn_hash32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// burn_int is burn_mma.cu's burn_int: the integer behind element e of
// lane's fragment of tile j (A 0-3, B 4-5) in warp w for seed s, wide
// (11 significant bits) at reduction index k < 3, narrow elsewhere.
int burn_int(unsigned w, unsigned lane, unsigned j, unsigned e, unsigned s) {
  const uint32_t h = burn_hash32(burn_hash32(w * 0x9E3779B9u + s) ^ (lane << 8) ^ (j << 4) ^ e);
  const unsigned k = 2 * (lane % 4) + (e & 1) + ((j < 4 ? e >= 4 : e >= 2) ? 8 : 0);
  const int mag = k < 3 ? int(1024u + (h & 1023u)) : int((h >> 10) % 256u);
  return (h >> 31) ? -mag : mag;
}

// burn_scale is burn_mma.cu's burn_scale: tile j's power-of-two scale.
float burn_scale(unsigned j) {
  static const float sc[6] = {1.0f, 0.125f, 4.0f, 0.03125f, 0.25f, 8.0f};
  return sc[j];
}

// burn_mix is burn_mma.cu's burn_mix: an accumulator element's bits
// (-0 taken as +0) hashed with its position.
uint32_t burn_mix(float v, unsigned lane, unsigned j, unsigned r) {
  v = v + 0.0f;
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return burn_hash32(bits ^ (lane * 0x01000193u) ^ (j << 28) ^ (r << 24));
}

// burn_mma_host is gpuattest_burn_mma's output for warp w with no memory
// error: every round cancels exactly and the fragments are back where
// they started (the iterations are a multiple of kBurnMmaPeriod), so each
// accumulator j holds A_j times B tile 4 (j = 0, 1) or 5 (j = 2, 3).
// mma.sync m16n8k16 lays the fragments out over the lanes
// (PTX ISA; group g = lane / 4, t = lane % 4) as
//   A: element i is row g (i in 0, 1, 4, 5) or g+8, column 2t + (i & 1),
//      plus 8 for i >= 4;
//   B: element i is row 2t + (i & 1), plus 8 for i >= 2, column g;
//   C: element i is row g (i < 2) or g+8, column 2t + (i & 1).
// Every product and partial sum fits in 24 bits (burn_mma.cu), so float
// arithmetic here gives a tensor core's bits in any order.
uint32_t burn_mma_host(unsigned w, unsigned seed) {
  float A[4][16][16], B[2][16][8];
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned g = lane / 4, t = lane % 4;
    for (unsigned j = 0; j < 4; ++j)
      for (unsigned i = 0; i < 8; ++i)
        A[j][(i == 2 || i == 3 || i >= 6) ? g + 8 : g][2 * t + (i & 1) + (i >= 4 ? 8 : 0)] = float(burn_int(w, lane, j, i, seed)) * burn_scale(j);
    for (unsigned j = 4; j < 6; ++j)
      for (unsigned i = 0; i < 4; ++i) B[j - 4][2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = float(burn_int(w, lane, j, i, seed)) * burn_scale(j);
  }
  uint32_t h = 0;
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned g = lane / 4, t = lane % 4;
    for (unsigned j = 0; j < 4; ++j)
      for (unsigned r = 0; r < 4; ++r) {
        const unsigned row = r < 2 ? g : g + 8, col = 2 * t + (r & 1);
        double acc = 0;
        for (unsigned k = 0; k < 16; ++k) acc += double(A[j][row][k]) * double(B[j < 2 ? 0 : 1][k][col]);
        h += burn_mix(float(acc), lane, j, r);
      }
  }
  return h;
}

// BurnKernel is the burn case's kernel: its code, entry point and name,
// and what one launch computes.
struct BurnKernel {
  const Embedded* code;
  const char* entry;
  std::string name;  // hmma or ffma
  bool mma;
};

// pick_burn chooses the burn kernel for o.burn_kernel on c: the tensor-core
// one on compute capability 8.0 and later unless ffma is asked for.
BurnKernel pick_burn(Cuda& c, const Options& o) {
  int major = 0;
  c.check(c.api.cuDeviceGetAttribute(&major, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c.dev), "cuDeviceGetAttribute(compute capability)");
  const bool mma = o.burn_kernel == "hmma" || (o.burn_kernel == "auto" && major >= 8);
  if (mma && major < 8) throw CudaError("--burn-kernel hmma needs compute capability 8.0 or later (mma.sync m16n8k16), this GPU has " + std::to_string(major) + ".x");
  if (mma) return {&kBurnMmaCode, "gpuattest_burn_mma", "hmma", true};
  return {&kChecksumCode, "gpuattest_burn", "ffma", false};
}

// round_ms times one launch of every case already in sc: the rest of a
// sustained round, which the burn must outweigh.
double round_ms(Cuda& c, std::vector<std::unique_ptr<SustainedCase>>& sc) {
  Event e0(c, cu::CU_EVENT_DEFAULT), e1(c, cu::CU_EVENT_DEFAULT);
  c.check(c.api.cuEventRecord(e0.e, nullptr), "cuEventRecord");
  for (auto& s : sc) s->cc->launch();
  c.check(c.api.cuEventRecord(e1.e, nullptr), "cuEventRecord");
  c.check(c.api.cuEventSynchronize(e1.e), "cuEventSynchronize(round)");
  return double(elapsed_ms(c, e0, e1));
}

// kBurnShare is the share of a sustained round the burn launch is sized
// to take at least: its time is at least (kBurnShare / (1 - kBurnShare))
// times the other cases' (--burn-ms is a floor).
const double kBurnShare = 0.8;

// ffma_reference fills p.ref_bits with gpuattest_burn's output for every
// one of threads threads: it depends on the thread only through t & 1023
// (its chains start at seed + (t & 1023) * 1e-6), so 1024 host chains
// give every thread's exact bits.
void ffma_reference(Problem& p, size_t threads, unsigned iters, float seed) {
  std::vector<uint32_t> distinct(std::min<size_t>(threads, 1024));
  for (size_t t = 0; t < distinct.size(); ++t) {
    const float v = burn_host(unsigned(t), iters, seed);
    std::memcpy(&distinct[t], &v, 4);
  }
  p.ref_bits.resize(threads);
  for (size_t t = 0; t < threads; ++t) p.ref_bits[t] = distinct[t & 1023];
  p.ref_unit = "thread";
}

// burn_problem describes the burn case's launch: name, sizes, flops, the
// bytes its stream moves, and the exact expected output of every warp
// (hmma) or thread (ffma) in p.ref_bits. The tensor-core burn's name
// leaves out its iterations: its result does not depend on them, so the
// outputs of GPUs of one model are compared whatever each one's
// calibration; the FFMA burn's result does, so its name keeps them.
void burn_problem(Problem& p, const BurnKernel& bk, unsigned grid, unsigned block, unsigned iters, float seed, unsigned mem_every, bool stream) {
  const unsigned threads = grid * block, warps = threads / 32;
  p.kernel = "burn";
  p.tol = 0;
  if (bk.mma) {
    p.out_n = warps;
    // Per round 8 mma and 4 more at the end, each 2 x 16 x 8 x 16 flops.
    p.flops = double(warps) * (double(iters) * 8 + 4) * 4096;
    unsigned s;
    std::memcpy(&s, &seed, 4);
    p.ref_bits.resize(warps);
    for (unsigned w = 0; w < warps; ++w) p.ref_bits[w] = burn_mma_host(w, s);
    p.ref_unit = "warp";
    const double memops = stream && mem_every > 0 ? double(iters / 16 / mem_every) : 0;
    p.bytes = double(warps) * memops * 32 * 32 + double(p.out_n) * 4;  // 16 B read + 16 B written per lane
    p.name = "burn/hmma/grid=" + std::to_string(grid) + "x" + std::to_string(block);
  } else {
    p.out_n = threads;
    p.flops = double(threads) * double(iters) * 256;
    ffma_reference(p, threads, iters, seed);
    p.bytes = double(p.out_n) * 4;
    p.name = "burn/ffma/grid=" + std::to_string(grid) + "x" + std::to_string(block) + "/iters=" + std::to_string(iters);
  }
}

// burn_calibrate sets *iters so that one launch takes about target_ms,
// from the fastest of three timed launches of unit iterations (after one
// untimed: the first pays the module's loading and the clocks' ramp); the
// count is a multiple of unit.
void burn_calibrate(Cuda& c, CudaCase& cc, unsigned* iters, unsigned unit, double target_ms) {
  *iters = unit;
  Event e0(c, cu::CU_EVENT_DEFAULT), e1(c, cu::CU_EVENT_DEFAULT);
  cc.launch();
  double ms = 1e30;
  for (int i = 0; i < 3; ++i) {
    c.check(c.api.cuEventRecord(e0.e, nullptr), "cuEventRecord");
    cc.launch();
    c.check(c.api.cuEventRecord(e1.e, nullptr), "cuEventRecord");
    c.check(c.api.cuEventSynchronize(e1.e), "cuEventSynchronize(burn calibration)");
    ms = std::min(ms, std::max(1e-3, double(elapsed_ms(c, e0, e1))));
  }
  const double units = std::clamp(target_ms / ms, 1.0, double((1u << 24) / unit));
  *iters = unsigned(units) * unit;
}

// burn_stream_bytes is the tensor-core burn's stream buffer on c: --burn-stream,
// else four times the L2 (a sweep through it misses the L2, so it streams
// from HBM), at least 1 MiB, at most an eighth of the free memory; a
// multiple of 512 bytes.
size_t burn_stream_bytes(Cuda& c, const Options& o) {
  size_t free_b = 0, total = 0;
  c.check(c.api.cuMemGetInfo(&free_b, &total), "cuMemGetInfo");
  size_t want = o.burn_stream > 0 ? size_t(o.burn_stream) : std::max(size_t(4) * c.l2, size_t(1) << 20);
  if (o.burn_stream <= 0) want = std::min(want, free_b / 8);
  return want & ~size_t(511);
}

// add_burn_case sets up the burn case on c: the embedded tensor-core
// gpuattest_burn_mma (or the FFMA gpuattest_burn: pick_burn) on a grid of
// as many 256-thread blocks as the SMs hold at once, its iteration count
// calibrated so that a launch takes most of each round (at least
// o.burn_ms, and kBurnShare of the round with the other cases in sc); the
// tensor-core burn streams through a buffer of its own (burn_stream_bytes)
// every o.burn_mem_every blocks of rounds. It runs the first repeat,
// checks every warp (or thread) against the host exactly and appends the
// case to cases and sc.
void add_burn_case(Cuda& c, const Options& o, std::vector<CaseResult>& cases, std::vector<std::unique_ptr<SustainedCase>>& sc, DeviceRun& dr) {
  auto s = std::make_unique<SustainedCase>();
  CaseResult res;
  res.kernel = "burn";
  res.config["backend"] = "cuda";
  res.config["mode"] = "sustained";
  char b[64];
  std::snprintf(b, sizeof b, "%g", o.duration_s);
  res.config["duration_s"] = b;
  try {
    const BurnKernel bk = pick_burn(c, o);
    res.name = "burn/" + bk.name;
    const double others = round_ms(c, sc);
    const double target = std::min(2000.0, std::max(o.burn_ms, others * kBurnShare / (1 - kBurnShare)));
    s->cc = std::make_unique<CudaCase>(c);
    CudaCase& cc = *s->cc;
    res.config["code"] = load_embedded(c, *bk.code, &cc.mod);
    c.check(c.api.cuModuleGetFunction(&cc.fn, cc.mod, bk.entry), std::string("cuModuleGetFunction(") + bk.entry + ")");
    const unsigned block = 256, per_sm = unsigned(c.blocks_per_sm(cc.fn, int(block), 0)), grid = unsigned(c.sms) * per_sm;
    const size_t out_n = bk.mma ? grid * block / 32 : size_t(grid) * block;
    cc.out_n = out_n;
    cc.dout = cc.out = cc.alloc(out_n * sizeof(float));
    auto iters = std::make_shared<unsigned>(bk.mma ? kBurnMmaPeriod : 64);
    const float seed = kBurnSeed;
    const std::string what = std::string("cuLaunchKernel(") + bk.entry + ")";
    const bool inject = o.inject_fault == "burn";
    unsigned mem_every = 0;
    if (bk.mma) {
      cu::CUdeviceptr stream = 0;
      unsigned long long n16 = 0;
      if (o.burn_mem_every > 0) {
        const size_t bytes = burn_stream_bytes(c, o);
        if (bytes >= 512) {
          stream = cc.alloc(bytes);
          n16 = bytes / 16;
          mem_every = o.burn_mem_every;
          cu::CUfunction init = nullptr;
          c.check(c.api.cuModuleGetFunction(&init, cc.mod, "gpuattest_burn_stream_init"), "cuModuleGetFunction(gpuattest_burn_stream_init)");
          void* a[] = {&stream, &n16};
          c.check(c.api.cuLaunchKernel(init, unsigned(c.sms) * 8, 1, 1, 256, 1, 1, 0, nullptr, a, nullptr), "cuLaunchKernel(gpuattest_burn_stream_init)");
          res.config["stream_bytes"] = std::to_string(bytes);
        }
      }
      res.config["mem_every"] = std::to_string(mem_every);
      unsigned sd;
      std::memcpy(&sd, &seed, 4);
      cc.launch = [&cc, grid, block, iters, sd, what, stream, n16, mem_every, inject]() {
        unsigned it = *iters, s2 = sd, me = mem_every, inj = inject ? 1u : 0u;
        cu::CUdeviceptr st = stream;
        unsigned long long n = n16;
        void* args[] = {&cc.out, &it, &s2, &st, &n, &me, &inj};
        cc.c.check(cc.c.api.cuLaunchKernel(cc.fn, grid, 1, 1, block, 1, 1, 0, nullptr, args, nullptr), what);
      };
    } else {
      cc.launch = [&cc, grid, block, iters, seed, what]() {
        unsigned it = *iters;
        float sd = seed;
        void* args[] = {&cc.out, &it, &sd};
        cc.c.check(cc.c.api.cuLaunchKernel(cc.fn, grid, 1, 1, block, 1, 1, 0, nullptr, args, nullptr), what);
      };
    }
    burn_calibrate(c, cc, iters.get(), bk.mma ? kBurnMmaPeriod : 64, target);
    Problem& p = s->p;
    burn_problem(p, bk, grid, block, *iters, seed, mem_every, mem_every > 0);
    res.name = p.name;
    res.flops = p.flops;
    res.bytes = p.bytes;
    res.config["sm_count"] = std::to_string(c.sms);
    res.config["blocks_per_sm"] = std::to_string(per_sm);
    res.config["grid"] = std::to_string(grid);
    res.config["block"] = std::to_string(block);
    res.config["iters"] = std::to_string(*iters);
    res.config["burn_kernel"] = bk.name;
    res.config["check"] = bk.mma ? "every warp, exact (per-warp hash of the accumulators)" : "every thread, exact";
    if (inject) res.config["inject"] = "--inject-fault burn";
    std::snprintf(b, sizeof b, "%.3f", others);
    res.config["round_others_ms"] = b;
    std::snprintf(b, sizeof b, "%.3f", target);
    res.config["burn_target_ms"] = b;
    dr.set_current(p.name);
    cc.launch();
    std::vector<float> out = cc.output();
    res.output_sha = harness::sha256_hex(out.data(), out.size() * sizeof(float));
    check_output(p, out, res);
    if (res.status == "passed") res.message = "";
    s->first = std::move(out);
    s->first_byte = s->first.empty() ? 0 : (unsigned char)(*reinterpret_cast<const unsigned char*>(s->first.data()));
    s->burn = true;
    std::vector<uint32_t>().swap(p.ref_bits);
  } catch (const std::exception& e) {
    res.status = "error";
    res.message = e.what();
    if (res.name.empty()) res.name = "burn";
  }
  std::fprintf(stderr, "%s%-44s %-7s %s\n", dr.tag.c_str(), res.name.c_str(), res.status.c_str(), res.message.c_str());
  if (res.status == "passed") {
    s->result = cases.size();
    sc.push_back(std::move(s));
  }
  dr.add_case(std::move(res));
}

// kCpuBurnThreads is how many of gpuattest_burn's threads the CPU burn
// case computes per repeat.
const unsigned kCpuBurnThreads = 256;

// add_cpu_burn_case sets up the CPU backend's burn case, the equivalent
// of the cuda one: gpuattest_burn's FFMA loop on the host for
// kCpuBurnThreads threads, its iterations calibrated so that one repeat
// takes at least o.burn_ms and kBurnShare of a round with the cases in
// sc, checked against burn_host and appended to cases and sc.
void add_cpu_burn_case(const Options& o, std::vector<CaseResult>& cases, std::vector<std::unique_ptr<SustainedCase>>& sc, DeviceRun& dr) {
  auto s = std::make_unique<SustainedCase>();
  Problem& p = s->p;
  p.kernel = "burn";
  p.out_n = kCpuBurnThreads;
  std::vector<float> out(p.out_n);
  auto ms_of = [&](auto&& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  double others = 0;
  for (auto& c : sc) {
    std::vector<float> o2(c->p.out_n);
    others += ms_of([&] { cpu_compute(c->p, o, o2); });
  }
  const double target = std::min(2000.0, std::max(o.burn_ms, others * kBurnShare / (1 - kBurnShare)));
  p.config["iters"] = "16";
  const double ms = std::max(1e-3, ms_of([&] { cpu_compute(p, o, out); }));
  const unsigned iters = unsigned(std::clamp(16.0 * target / ms, 1.0, double(1 << 24)));
  p.config["iters"] = std::to_string(iters);
  p.flops = double(p.out_n) * double(iters) * 256;
  p.bytes = double(p.out_n) * 4;
  p.tol = 0;
  ffma_reference(p, p.out_n, iters, kBurnSeed);
  p.name = "burn/ffma-host/threads=" + std::to_string(p.out_n) + "/iters=" + std::to_string(iters);
  CaseResult res;
  res.kernel = "burn";
  res.name = p.name;
  res.flops = p.flops;
  res.bytes = p.bytes;
  res.config = {{"backend", "cpu"}, {"mode", "sustained"}, {"iters", p.config["iters"]}, {"burn_kernel", "ffma-host"}};
  char b[64];
  std::snprintf(b, sizeof b, "%.3f", others);
  res.config["round_others_ms"] = b;
  std::snprintf(b, sizeof b, "%.3f", target);
  res.config["burn_target_ms"] = b;
  dr.set_current(p.name);
  cpu_compute(p, o, out);
  res.output_sha = harness::sha256_hex(out.data(), out.size() * sizeof(float));
  check_output(p, out, res);
  if (res.status == "passed") res.message = "";
  s->first = std::move(out);
  std::fprintf(stderr, "%s%-44s %-7s %s\n", dr.tag.c_str(), res.name.c_str(), res.status.c_str(), res.message.c_str());
  if (res.status == "passed") {
    s->result = cases.size();
    sc.push_back(std::move(s));
  }
  dr.add_case(std::move(res));
}

// run_device runs every case (and, in sustained mode, the loop) on one
// device: cuda when dr.cuda is set (its context current on this thread),
// else the CPU backend.
void run_device(DeviceRun& dr, const std::string& backend, const Options& all) {
  // An injection with @ORDINAL applies to that device only.
  Options o = all;
  if (all.inject_device >= 0 && all.inject_device != dr.ordinal) {
    o.inject_fault.clear();
    o.inject_illegal_address.clear();
    o.inject_inconsistency.clear();
  }
  t_progress = &dr.progress;
  Cuda* cuda = dr.cuda;
  CpuBackend cpu;
  const bool gpu = cuda != nullptr;
  const bool sustained = o.duration_s > 0;
  std::vector<CaseResult>& cases = dr.cases;
  std::vector<std::unique_ptr<SustainedCase>> sc;
  bool lost = !dr.open_error.empty();
  std::string lost_after;
  for (const auto& k : o.kernels) {
    for (uint64_t seed : o.seeds) {
      Problem p = make_problem(k, seed, o, !lost);
      dr.set_current(p.name);
      CaseResult res;
      res.name = p.name;
      res.kernel = k;
      res.flops = p.flops;
      res.bytes = p.bytes;
      res.config = p.config;
      res.config["backend"] = backend;
      res.tol = p.tol;
      if (lost) {
        // After a sticky error every call fails: running this case would
        // only blame it for another's fault.
        res.status = "error";
        res.message = dr.open_error.empty() ? "not run: context lost after " + lost_after : "not run: " + dr.open_error;
      } else {
        std::vector<float> out;
        auto s = std::make_unique<SustainedCase>();
        try {
          if (sustained) {
            // The first repeat: warm-up, one launch, the output checked
            // against the reference; the loop compares every later repeat
            // with it.
            if (gpu) {
              s->cc = std::make_unique<CudaCase>(*cuda);
              s->cc->load(p, o, res);
              if (o.inject_illegal_address == k) s->cc->inject_illegal_address();
              for (int i = 0; i <= o.warmup; ++i) s->cc->launch();
              out = s->cc->output();
            } else {
              if (o.inject_illegal_address == k) {
                cpu.lost = true;
                throw std::runtime_error("simulated illegal address in " + k + " (--inject-illegal-address on the cpu backend)");
              }
              out.assign(p.out_n, 0.0f);
              for (int i = 0; i <= o.warmup; ++i) cpu_compute(p, o, out);
            }
            s->first = out;
            std::memcpy(&s->first_byte, out.data(), out.empty() ? 0 : 1);
          } else if (gpu) {
            run_cuda(*cuda, p, o, res, out);
          } else {
            run_cpu(cpu, p, o, res, out);
          }
          if (o.inject_fault == k && !out.empty()) out[out.size() / 2] += 1.0f;
          res.output_sha = harness::sha256_hex(out.data(), out.size() * sizeof(float));
          check_output(p, out, res);
        } catch (const std::exception& e) {
          res.status = "error";
          res.message = e.what();
        }
        std::string why;
        if (gpu ? !cuda->healthy(why) : cpu.lost) {
          lost = true;
          lost_after = res.name;
          if (res.status != "error") {
            res.status = "error";
            res.message = "the context was lost during this case: " + why;
          }
          res.message += "; the context is lost, later cases are not run";
        }
        if (sustained && res.status == "passed") {
          if (gpu) {
            // The loop compares checksums on the device: the inputs and
            // the reference are not needed on the host any more.
            std::vector<std::vector<float>>().swap(p.in);
            std::vector<double>().swap(p.ref);
            std::vector<size_t>().swap(p.ref_at);
          }
          s->p = std::move(p);
          s->result = cases.size();
          sc.push_back(std::move(s));
        }
      }
      std::fprintf(stderr, "%s%-44s %-7s %s\n", dr.tag.c_str(), res.name.c_str(), res.status.c_str(), res.message.c_str());
      dr.add_case(std::move(res));
    }
  }

  if (o.membw && !sustained && !lost && gpu) {
    CaseResult res;
    res.kernel = "membw";
    res.name = "membw";
    res.config["backend"] = backend;
    dr.set_current(res.name);
    try {
      run_membw(*cuda, o, res);
    } catch (const std::exception& e) {
      res.status = "error";
      res.message = e.what();
    }
    std::string why;
    if (!cuda->healthy(why)) {
      lost = true;
      lost_after = res.name;
      res.status = "error";
      res.message += (res.message.empty() ? "" : "; ") + std::string("the context was lost during the copy: ") + why;
    }
    std::fprintf(stderr, "%s%-44s %-7s %s\n", dr.tag.c_str(), res.name.c_str(), res.status.c_str(), res.message.c_str());
    dr.add_case(std::move(res));
  } else if (o.membw && !gpu) {
    std::fprintf(stderr, "%sgpuattest-harness: --membw: the cpu backend has no device memory; no bandwidth case\n", dr.tag.c_str());
  }

  if (o.memsweep > 0 && !sustained && !lost) {
    CaseResult res = sweep_case(o, backend);
    dr.set_current(res.name);
    try {
      if (gpu) {
        sweep_cuda(*cuda, o, res);
      } else {
        sweep_cpu(o, res);
      }
    } catch (const std::exception& e) {
      res.status = "error";
      res.message = e.what();
    }
    std::string why;
    if (gpu && !cuda->healthy(why)) {
      lost = true;
      res.status = "error";
      res.message += (res.message.empty() ? "" : "; ") + std::string("the context was lost during the sweep: ") + why;
    }
    std::fprintf(stderr, "%s%-44s %-7s %s (%s bytes swept)\n", dr.tag.c_str(), res.name.c_str(), res.status.c_str(), res.message.c_str(),
                 res.config["bytes_covered"].c_str());
    dr.add_case(std::move(res));
  }
  if (sustained && !gpu && o.burn && !lost) add_cpu_burn_case(o, cases, sc, dr);
  if (sustained && gpu && o.burn && !lost) {
    add_burn_case(*cuda, o, cases, sc, dr);
    std::string why;
    if (!cuda->healthy(why)) {
      lost = true;
      lost_after = "the burn case";
    }
  }
  // In a sustained run on a GPU the sweep's region is allocated after the
  // cases and swept a slice per round (SweepRegion).
  std::unique_ptr<SweepRegion> region;
  CaseResult sweep_res;
  if (sustained && gpu && o.memsweep > 0 && !lost && !sc.empty()) {
    sweep_res = sweep_case(o, backend);
    sweep_res.name += "/sustained";
    dr.set_current(sweep_res.name);
    try {
      region = std::make_unique<SweepRegion>(*cuda, o, sweep_res);
    } catch (const std::exception& e) {
      sweep_res.status = "error";
      sweep_res.message = e.what();
    }
  }
  Sustained& sus = dr.sus;
  bool looped = false;
#ifdef __GLIBC__
  // What the cases' setup freed goes back to the system before the loop
  // (glibc keeps freed heap otherwise).
  if (sustained && gpu) malloc_trim(0);
#endif
  for (auto& s : sc)
    if (s->burn) sus.burn.kernel = cases[s->result].config["burn_kernel"];
  if (sustained) {
    sus.duration_s = o.duration_s;
    sus.timing = gpu ? "cuda_events" : "steady_clock";
    sus.check = gpu ? "checksum64" : "bytes";
    dr.set_current("the sustained loop");
    if (lost) {
      sus.error = dr.open_error.empty() ? "context lost after " + lost_after : dr.open_error;
    } else if (sc.empty()) {
      sus.error = "no case passed its first repeat: nothing to sustain";
    } else {
      looped = true;
      try {
        if (gpu) {
          std::function<void()> hook;
          if (region) hook = [&region]() { region->step(); };
          sustained_cuda(*cuda, o, sc, cases, sus, hook);
        } else {
          sustained_cpu(o, sc, sus);
        }
      } catch (const std::exception& e) {
        sus.error = e.what();
      }
    }
    for (auto& s : sc) {
      CaseResult& res = cases[s->result];
      if (!sus.checksum_module.empty()) res.config["checksum_code"] = sus.checksum_module;
      res.sustained = true;
      res.sus.repeats = s->repeats;
      res.sus.mismatches = s->mismatches;
      res.sus.first_mismatch = s->first_mismatch;
      res.sus.busy_s = s->busy_s;
      if (s->mismatches > 0) {
        res.status = "failed";
        res.message = "the output of repeat " + std::to_string(s->first_mismatch) + " differs from repeat 1 (" + std::to_string(s->mismatches) +
                      " of " + std::to_string(s->repeats - 1) + " repeats differ)";
      } else if (!sus.error.empty()) {
        res.status = "error";
        res.message = (looped ? "sustained run stopped: " : "sustained loop not run: ") + sus.error;
      }
    }
    std::fprintf(stderr, "%sgpuattest-harness: sustained %.1f s: duty cycle %.1f %% (%s), %lld iterations, %lld outputs checked, %lld differ%s%s\n",
                 dr.tag.c_str(), sus.elapsed_s, 100 * sus.duty, sus.timing.c_str(), sus.iterations, sus.checked, sus.mismatches,
                 sus.error.empty() ? "" : "; ", sus.error.c_str());
    if (sus.burn.busy_s > 0)
      std::fprintf(stderr, "%sgpuattest-harness: burn (%s): %.4g TFLOP/s over %.1f s in %lld launches\n", dr.tag.c_str(), sus.burn.kernel.c_str(),
                   sus.burn.flops / sus.burn.busy_s / 1e12, sus.burn.busy_s, sus.burn.launches);
    if (!sweep_res.name.empty()) {
      if (region && looped) {
        try {
          region->finish(sweep_res);
        } catch (const std::exception& e) {
          sweep_res.status = "error";
          sweep_res.message = e.what();
        }
      } else if (sweep_res.status == "passed") {
        sweep_res.status = "error";
        sweep_res.message = "sustained loop not run: " + sus.error;
      }
      std::fprintf(stderr, "%s%-44s %-7s %s (%s bytes swept, %s sweeps)\n", dr.tag.c_str(), sweep_res.name.c_str(), sweep_res.status.c_str(),
                   sweep_res.message.c_str(), sweep_res.config["bytes_covered"].c_str(), sweep_res.config["sweeps"].c_str());
      region.reset();
      dr.add_case(std::move(sweep_res));
    }
  }
  // CUDA objects go before the context.
  sc.clear();
  dr.done = true;
}

// ---- several devices (--devices) ---------------------------------------------

// device_label names a device for messages: "gpu 5 (GPU-...)".
std::string device_label(const DeviceRun& r) {
  const Device* d = r.info.load();
  std::string s = "gpu " + std::to_string(r.ordinal);
  if (d && !d->uuid.empty()) s += " (" + d->uuid + ")";
  return s;
}

// CrossDevice is the comparison of outputs between GPUs of one model.
struct CrossDevice {
  int devices = 0;
  long long compared = 0;  // cases compared across at least two GPUs
  std::vector<std::string> disagreements;
};

// compare_devices compares each case's output digest between the GPUs of
// one model: the same seed and deterministic kernels give the same bits on
// every healthy GPU, so a GPU whose output differs from the others' (a
// strict majority) fails that case by name; with no majority every GPU of
// the disagreement fails it. The first repeat of a sustained run is the
// one compared (its checksum is the loop's golden value).
CrossDevice compare_devices(std::vector<std::unique_ptr<DeviceRun>>& runs) {
  CrossDevice x;
  x.devices = int(runs.size());
  std::map<std::string, std::vector<DeviceRun*>> models;
  for (auto& r : runs) {
    const Device* d = r->info.load();
    if (d) models[d->name].push_back(r.get());
  }
  for (auto& [model, group] : models) {
    if (group.size() < 2) continue;
    size_t ncases = group[0]->cases.size();
    for (auto* r : group) ncases = std::min(ncases, r->cases.size());
    for (size_t j = 0; j < ncases; ++j) {
      std::map<std::string, int> votes;
      std::vector<DeviceRun*> have;
      for (auto* r : group) {
        const CaseResult& c = r->cases[j];
        if (c.output_sha.empty() || c.name != group[0]->cases[j].name) continue;
        ++votes[c.output_sha];
        have.push_back(r);
      }
      if (have.size() < 2) continue;
      ++x.compared;
      if (votes.size() == 1) continue;
      std::string major;
      int most = 0;
      for (auto& [sha, n] : votes) {
        if (n > most) most = n, major = sha;
      }
      const bool majority = 2 * most > int(have.size());
      for (auto* r : have) {
        CaseResult& c = r->cases[j];
        if (majority && c.output_sha == major) continue;
        std::string why;
        if (majority) {
          why = "output differs from the other " + model + " GPUs': sha256 " + c.output_sha.substr(0, 12) + " on " + device_label(*r) + ", " +
                major.substr(0, 12) + " on " + std::to_string(most) + " of " + std::to_string(have.size()) +
                " (same inputs, deterministic kernel: this GPU computes differently)";
        } else {
          why = "the " + std::to_string(have.size()) + " " + model + " GPUs disagree on this output with no majority (sha256 " +
                c.output_sha.substr(0, 12) + " on " + device_label(*r) + ")";
        }
        x.disagreements.push_back(c.name + " on " + device_label(*r) + ": " + why);
        if (c.status == "passed") {
          c.status = "failed";
          c.message = why;
        } else {
          c.message += "; " + why;
        }
        std::fprintf(stderr, "%s%-44s %-7s %s\n", r->tag.c_str(), c.name.c_str(), c.status.c_str(), why.c_str());
      }
    }
  }
  return x;
}

// render_run writes the results of the run: for --device alone, one
// device's cases; with --devices (any number of them, one included: the
// same shape whatever the count), every device's cases (names ending
// /gpu=I, config device_uuid, failures naming the device), a "devices"
// list, the cross-device comparison and a sustained block that sums the
// devices' loops (duty cycle: the lowest; loop window: their span).
std::string render_run(const std::string& backend, bool sustained, std::vector<std::unique_ptr<DeviceRun>>& runs, const CrossDevice* x,
                       bool devices_shape) {
  if (runs.size() == 1 && !devices_shape) {
    return render(backend, runs[0]->info.load(), runs[0]->cases, sustained ? &runs[0]->sus : nullptr);
  }
  std::vector<CaseResult> cases;
  Sustained sus;
  std::ostringstream e;
  e << "  \"devices\": [";
  std::string model;
  bool first = true;
  for (size_t i = 0; i < runs.size(); ++i) {
    DeviceRun& r = *runs[i];
    const Device* d = r.info.load();
    long long passed = 0;
    for (auto c : r.cases) {
      passed += c.status == "passed";
      c.name += "/gpu=" + std::to_string(r.ordinal);
      c.config["device_ordinal"] = std::to_string(r.ordinal);
      if (d && !d->uuid.empty()) c.config["device_uuid"] = d->uuid;
      if (c.status != "passed" && c.message.find(device_label(r)) == std::string::npos) c.message += " [" + device_label(r) + "]";
      cases.push_back(std::move(c));
    }
    e << (i ? ",\n    " : "\n    ") << "{\"ordinal\": " << r.ordinal;
    if (d) {
      e << ", \"name\": " << jstr(d->name);
      if (!d->uuid.empty()) e << ", \"uuid\": " << jstr(d->uuid);
      if (!d->pci_bus_id.empty()) e << ", \"pci_bus_id\": " << jstr(d->pci_bus_id);
      if (first) model = d->name;
      if (model != d->name) model = "several models";
      first = false;
    }
    e << ", \"cases\": " << r.cases.size() << ", \"passed\": " << passed;
    if (!r.open_error.empty()) e << ", \"error\": " << jstr(r.open_error);
    if (sustained) {
      const Sustained& s = r.sus;
      e << ", \"sustained\": {\"elapsed_s\": " << jnum(s.elapsed_s) << ", \"busy_s\": " << jnum(s.busy_s) << ", \"duty_cycle\": " << jnum(s.duty)
        << ", \"iterations\": " << s.iterations << ", \"outputs_checked\": " << s.checked << ", \"mismatches\": " << s.mismatches << render_loop(s);
      if (!s.error.empty()) e << ", \"error\": " << jstr(s.error);
      e << "}";
      if (i == 0) {
        sus = s;
        sus.burn = BurnThroughput{};  // per device only
        sus.error = s.error.empty() ? "" : device_label(r) + ": " + s.error;
      } else {
        if (s.loop_from_ns > 0 && (sus.loop_from_ns == 0 || s.loop_from_ns < sus.loop_from_ns)) sus.loop_from_ns = s.loop_from_ns;
        sus.loop_to_ns = std::max(sus.loop_to_ns, s.loop_to_ns);
        sus.elapsed_s = std::max(sus.elapsed_s, s.elapsed_s);
        sus.busy_s += s.busy_s;
        sus.duty = std::min(sus.duty, s.duty);
        sus.iterations += s.iterations;
        sus.checked += s.checked;
        sus.mismatches += s.mismatches;
        if (!s.error.empty()) sus.error += (sus.error.empty() ? "" : "; ") + device_label(r) + ": " + s.error;
      }
    }
    e << "}";
  }
  e << "\n  ],\n";
  if (x) {
    e << "  \"cross_device\": {\"devices\": " << x->devices << ", \"cases_compared\": " << x->compared << ", \"disagreements\": [";
    for (size_t i = 0; i < x->disagreements.size(); ++i) e << (i ? ", " : "") << jstr(x->disagreements[i]);
    e << "]},\n";
  }
  Device top;
  top.name = model;
  return render(backend, model.empty() ? nullptr : &top, cases, sustained ? &sus : nullptr, e.str());
}

// Watchdog fails the run when a device makes no progress for
// o.watchdog_s: it names the device and the case it hung in, writes the
// results (the finished cases, the hung one as an error) and exits 1, so a
// hung GPU cannot hang the run. The process exits without waiting for the
// hung thread: its context cannot be recovered anyway.
class Watchdog {
 public:
  Watchdog(const Options& o, const std::string& backend, std::vector<std::unique_ptr<DeviceRun>>& runs)
      : o_(o), backend_(backend), runs_(runs), th_([this]() { loop(); }) {}
  ~Watchdog() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (th_.joinable()) th_.join();
  }

 private:
  void loop() {
    const auto tick = std::chrono::duration<double>(std::min(1.0, o_.watchdog_s / 10));
    std::vector<long long> seen(runs_.size(), -1);
    std::vector<std::chrono::steady_clock::time_point> since(runs_.size(), std::chrono::steady_clock::now());
    std::unique_lock<std::mutex> l(mu_);
    while (!cv_.wait_for(l, tick, [this]() { return stop_; })) {
      for (size_t i = 0; i < runs_.size(); ++i) {
        DeviceRun& r = *runs_[i];
        const long long p = r.progress.load();
        if (r.done || p != seen[i]) {
          seen[i] = p;
          since[i] = std::chrono::steady_clock::now();
        } else if (seconds_since(since[i]) >= o_.watchdog_s) {
          fire(r);
        }
      }
    }
  }

  [[noreturn]] void fire(DeviceRun& hung) {
    std::string current;
    {
      std::lock_guard<std::mutex> l(hung.mu);
      current = hung.current;
    }
    char b[512];
    std::snprintf(b, sizeof b, "no progress for %g s on %s in %s: the watchdog (--watchdog) stopped the run", o_.watchdog_s,
                  device_label(hung).c_str(), current.c_str());
    std::fprintf(stderr, "gpuattest-harness: watchdog: %s\nhint: a hung kernel or a GPU that stopped answering; nvidia-smi -q and dmesg (Xid) say which\n", b);
    // A snapshot of every device's finished cases; the hung device's case
    // in progress is an error naming it.
    std::vector<std::unique_ptr<DeviceRun>> snap;
    const bool sustained = o_.duration_s > 0;
    for (auto& r : runs_) {
      auto s = std::make_unique<DeviceRun>();
      s->ordinal = r->ordinal;
      s->info = r->info.load();
      s->tag = r->tag;
      {
        std::lock_guard<std::mutex> l(r->mu);
        s->cases = r->cases;
      }
      if (r.get() == &hung) {
        CaseResult c;
        c.name = current.empty() ? "watchdog" : current;
        c.kernel = c.name.substr(0, c.name.find('/'));
        c.status = "error";
        c.message = b;
        if (sustained) {
          s->sus.error = b;
        }
        s->cases.push_back(c);
      } else if (sustained && !r->done) {
        s->sus.error = "stopped: the watchdog found " + device_label(hung) + " hung";
      }
      snap.push_back(std::move(s));
    }
    std::string why;
    if (!write_atomic(o_.out, render_run(backend_, sustained, snap, nullptr, !o_.devices.empty()), why)) std::fprintf(stderr, "gpuattest-harness: %s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }

  const Options& o_;
  std::string backend_;
  std::vector<std::unique_ptr<DeviceRun>>& runs_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread th_;
};

// InitResult is what cuInit and cuDeviceGetCount answered.
struct InitResult {
  cu::CUresult init = 0, count_rc = 0;
  int count = 0;
};

// init_driver runs cuInit and cuDeviceGetCount on a thread of their own
// and waits for them at most watchdog_s seconds (forever when 0): a sick
// GPU hangs the driver's initialisation, and the watchdog must bound it
// too. It returns false when they did not return in time (the thread is
// left behind: the process exits without waiting for it).
bool init_driver(const cu::Api& api, double watchdog_s, InitResult* out) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    InitResult r;
  };
  auto sh = std::make_shared<Shared>();
  std::thread([sh, api]() {
    InitResult r;
    r.init = api.cuInit(0);
    if (r.init == 0) r.count_rc = api.cuDeviceGetCount(&r.count);
    std::lock_guard<std::mutex> l(sh->mu);
    sh->r = r;
    sh->done = true;
    sh->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> l(sh->mu);
  if (watchdog_s > 0) {
    if (!sh->cv.wait_for(l, std::chrono::duration<double>(watchdog_s), [&]() { return sh->done; })) return false;
  } else {
    sh->cv.wait(l, [&]() { return sh->done; });
  }
  *out = sh->r;
  return true;
}

// cuda_error names rc with the driver's own words when it can.
std::string cuda_error(const cu::Api& api, cu::CUresult rc) {
  Cuda c;
  c.api = api;
  return c.err(rc);
}

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  cu::Api api;
  std::string backend = o.backend;
  int count = 0;
  if (backend != "cpu") {
    std::string why;
    bool ok = load_driver(api, why);
    if (ok) {
      InitResult ir;
      if (!init_driver(api, o.watchdog_s, &ir)) {
        // A hung cuInit is a GPU machine whose driver or GPU stopped
        // answering: a failure, named, never a CPU run.
        char b[256];
        std::snprintf(b, sizeof b, "cuInit did not return within %g s: the watchdog (--watchdog) stopped the run", o.watchdog_s);
        std::fprintf(stderr, "gpuattest-harness: watchdog: %s\nhint: a GPU or the driver stopped answering; nvidia-smi -q and dmesg (Xid) say which\n", b);
        CaseResult c;
        c.name = c.kernel = "init";
        c.status = "error";
        c.message = b;
        std::string werr;
        if (!write_atomic(o.out, render("cuda", nullptr, {c}, nullptr), werr)) std::fprintf(stderr, "gpuattest-harness: %s\n", werr.c_str());
        std::fflush(stderr);
        std::_Exit(1);
      }
      if (ir.init != 0) {
        why = "cuInit failed: " + cuda_error(api, ir.init);
        ok = false;
      } else if (ir.count_rc != 0 || ir.count == 0) {
        why = ir.count_rc != 0 ? "cuDeviceGetCount failed: " + cuda_error(api, ir.count_rc) : std::string("no CUDA device");
        ok = false;
      }
      count = ir.count;
    }
    if (ok) {
      backend = "cuda";
    } else if (backend == "cuda") {
      std::fprintf(stderr, "gpuattest-harness: backend cuda unavailable: %s\nhint: use --backend cpu (or auto) on a machine without a GPU\n", why.c_str());
      return 3;
    } else if (const char* e = std::getenv("GPUATTEST_EXPECT_GPU"); e && *e && std::string(e) != "0") {
      // The hardware record lists GPUs: a silent CPU run would pass for
      // a GPU validation of a machine whose GPU is broken.
      std::fprintf(stderr,
                   "gpuattest-harness: backend auto: the hardware record lists %s GPU(s) (GPUATTEST_EXPECT_GPU) but CUDA "
                   "cannot use one: %s; refusing to fall back to the CPU backend\nhint: fix the driver or the device "
                   "(CUDA_ERROR_SYSTEM_NOT_READY: start nvidia-fabricmanager), or pass --backend cpu to run on the CPU "
                   "on purpose\n",
                   e, why.c_str());
      return 3;
    } else {
      std::fprintf(stderr, "gpuattest-harness: backend auto: %s; running the CPU backend\n", why.c_str());
      backend = "cpu";
    }
  }
  const bool gpu = backend == "cuda";
  const bool sustained = o.duration_s > 0;
  if (sustained && gpu) {
    // Sizes that keep a GPU busy for milliseconds per launch.
    if (!o.n_set) o.n = 1L << 26;
    if (!o.gemm_set) o.gemm = 2048;
    if (!o.rows_set) o.rows = 8192;
    if (!o.cols_set) o.cols = 4096;
  }

  // The devices to run: --device alone, or every one --devices lists.
  std::vector<int> ordinals = {o.device};
  if (!o.devices.empty() && !gpu) {
    std::fprintf(stderr, "gpuattest-harness: --devices %s: the cpu backend is one device\n", o.devices.c_str());
    o.devices.clear();
  } else if (!o.devices.empty()) {
    ordinals.clear();
    if (o.devices == "all") {
      for (int i = 0; i < count; ++i) ordinals.push_back(i);
    } else {
      for (auto& d : split(o.devices, ',')) ordinals.push_back(int(parse_long("--devices", d, 0, 1024)));
    }
    for (int d : ordinals) {
      if (d >= count) {
        std::fprintf(stderr, "gpuattest-harness: --devices %s: device %d requested but only %d visible\n", o.devices.c_str(), d, count);
        return 3;
      }
    }
    if (ordinals.empty() || ordinals[0] != o.device) {
      std::fprintf(stderr, "gpuattest-harness: --devices %s must start with device %d (--device)\nhint: --devices all, or a list starting with --device\n",
                   o.devices.c_str(), o.device);
      return 2;
    }
  } else if (gpu && o.device >= count) {
    std::fprintf(stderr, "gpuattest-harness: backend cuda unavailable: device %d requested but only %d visible\nhint: --device I among the visible devices (CUDA_VISIBLE_DEVICES)\n",
                 o.device, count);
    return 3;
  }
  std::fprintf(stderr, "gpuattest-harness: backend %s%s\n", backend.c_str(),
               gpu ? (", " + std::to_string(ordinals.size()) + " of " + std::to_string(count) + " visible device(s)").c_str() : "");
  const bool devices_shape = !o.devices.empty();
  const bool multi = ordinals.size() > 1;
  std::vector<std::unique_ptr<DeviceRun>> runs;
  std::vector<std::unique_ptr<Cuda>> opened(ordinals.size());
  for (size_t i = 0; i < ordinals.size(); ++i) {
    runs.push_back(std::make_unique<DeviceRun>());
    runs[i]->ordinal = ordinals[i];
    if (multi) runs[i]->tag = "[gpu " + std::to_string(ordinals[i]) + "] ";
  }
  // The watchdog starts before any device is opened: creating a context
  // is where a sick GPU hangs.
  std::unique_ptr<Watchdog> dog;
  if (o.watchdog_s > 0) dog = std::make_unique<Watchdog>(o, backend, runs);
  if (gpu) {
    // Every device is opened and run on a thread of its own, device 0
    // too: one that cannot be opened marks that GPU, not the node.
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ordinals.size(); ++i) {
      threads.emplace_back([&, i]() {
        DeviceRun& dr = *runs[i];
        dr.set_current("opening the device");
        opened[i] = std::make_unique<Cuda>();
        Cuda& c = *opened[i];
        std::string why;
        const bool ok = c.open(api, ordinals[i], why, [&]() {
          dr.info = &c.info;
          std::fprintf(stderr, "%sgpuattest-harness: device %d: %s%s%s\n", dr.tag.c_str(), ordinals[i], c.info.name.c_str(), c.info.uuid.empty() ? "" : " ",
                       c.info.uuid.c_str());
        });
        if (ok) {
          dr.cuda = &c;
        } else {
          dr.open_error = "opening device " + std::to_string(ordinals[i]) + ": " + why;
          std::fprintf(stderr, "%sgpuattest-harness: %s\n", dr.tag.c_str(), dr.open_error.c_str());
        }
        run_device(dr, backend, o);
      });
    }
    for (auto& t : threads) t.join();
  } else {
    run_device(*runs[0], backend, o);
  }
  if (dog) dog->stop();

  CrossDevice cross;
  if (devices_shape) cross = compare_devices(runs);
  bool all_passed = true;
  for (auto& r : runs) {
    all_passed = all_passed && (!sustained || (r->sus.error.empty() && r->sus.mismatches == 0)) && r->open_error.empty();
    for (auto& c : r->cases) all_passed = all_passed && c.status == "passed";
  }
  std::string why;
  if (!write_atomic(o.out, render_run(backend, sustained, runs, devices_shape ? &cross : nullptr, devices_shape), why)) {
    std::fprintf(stderr, "gpuattest-harness: %s\n", why.c_str());
    return 3;
  }
  return all_passed ? 0 : 1;
}
