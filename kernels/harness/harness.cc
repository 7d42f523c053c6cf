// gpuattest-harness: runs the reference kernels (vector_add, reduce_sum,
// sgemm, softmax) and writes gpuattest results JSON.
//
// Backends:
//   cuda  loads the BUILT fatbins (<fatbin-dir>/<kernel>.fatbin) at run time
//         through the CUDA driver API (dlopen("libcuda.so.1"),
//         cuModuleLoadData), so the bytes tested are the bytes released;
//         per-iteration timing with CUDA events, L2 flushed between
//         iterations.
//   cpu   runs fp32 CPU implementations of the same algorithms, timed with
//         std::chrono::steady_clock; the output says backend "cpu".
//   auto  (default) cuda when libcuda loads and a device exists, else cpu.
// Every case is checked against an fp64 CPU reference (max/mean abs error,
// correlation) with a per-kernel tolerance.
//
// Exit status: 0 all cases passed, 1 a case failed or errored, 2 usage,
// 3 the harness itself could not run (backend cuda unavailable, I/O).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "sha256.h"

namespace {

const char* kTool = "gpuattest-harness 0.1.0";
const char* kSchema = "https://gpuattest.dev/results/v1";
const char* kKernels[] = {"vector_add", "reduce_sum", "sgemm", "softmax"};

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
  int device = 0;
  bool flush = true;
  std::map<std::string, double> tolerance;
  std::string inject_fault;  // kernel whose output gets one element corrupted
};

struct CaseResult {
  std::string name, kernel, status = "passed", message;
  double max_abs = 0, mean_abs = 0, corr = 1, tol = 0;
  std::vector<long long> samples;
  double flops = 0, bytes = 0;
  std::map<std::string, std::string> config;
  std::string output_sha;
  long long mem_used = -1;
  std::string stop_reason;  // adaptive repeats: precision, max_time, max_samples
  double stop_elapsed_s = 0;
};

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr, "gpuattest-harness: %s\nhint: gpuattest-harness --help\n", msg.c_str());
  std::exit(2);
}

const char* kHelp =
    "usage: gpuattest-harness [flags]\n"
    "  --backend auto|cuda|cpu   where kernels run (default auto: cuda if a device exists)\n"
    "  --fatbin-dir DIR          built fatbins, one <kernel>.fatbin each (default build)\n"
    "  --out FILE                results JSON (default results.json; - for stdout)\n"
    "  --kernels a,b             subset of vector_add,reduce_sum,sgemm,softmax\n"
    "  --warmup N                untimed iterations (env GPUATTEST_WARMUP; default 3)\n"
    "  --repeats N|auto          timed iterations (env GPUATTEST_REPEATS; default 20); auto stops\n"
    "                            each case once the 95% interval of its median is within\n"
    "                            +-precision, or at max-time\n"
    "  --precision F             auto: relative half-width to reach (env GPUATTEST_PRECISION; 0.01)\n"
    "  --max-time S              auto: seconds per case at most (env GPUATTEST_MAX_TIME; 120)\n"
    "  --min-repeats N           auto: samples before the precision may stop (env GPUATTEST_MIN_REPEATS; 10)\n"
    "  --max-samples N           auto: samples per case at most (default 100000)\n"
    "  --seed S[,S...]           input seeds (env GPUATTEST_SEED; default 1)\n"
    "  --n N                     elements for vector_add and reduce_sum (default 1048576)\n"
    "  --gemm N                  sgemm M=N=K (default 256)\n"
    "  --rows R --cols C         softmax shape (default 512x1024)\n"
    "  --device I                CUDA device ordinal (default 0)\n"
    "  --no-flush                do not flush caches between iterations\n"
    "  --tolerance KERNEL=X      override a kernel's max-abs-error tolerance\n"
    "  --inject-fault KERNEL     corrupt one output element of KERNEL (proves the check)\n";

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

Options parse(int argc, char** argv) {
  Options o;
  // Environment first (benchmark/burnin steps set these); flags win.
  if (const char* e = std::getenv("GPUATTEST_WARMUP"); e && *e) o.warmup = int(parse_long("GPUATTEST_WARMUP", e, 0, 1000000));
  if (const char* e = std::getenv("GPUATTEST_REPEATS"); e && *e) set_repeats(o, "GPUATTEST_REPEATS", e);
  if (const char* e = std::getenv("GPUATTEST_PRECISION"); e && *e) o.precision = parse_double("GPUATTEST_PRECISION", e, 0, 1);
  if (const char* e = std::getenv("GPUATTEST_MAX_TIME"); e && *e) o.max_time_s = parse_double("GPUATTEST_MAX_TIME", e, 0, 1e7);
  if (const char* e = std::getenv("GPUATTEST_MIN_REPEATS"); e && *e) o.min_repeats = int(parse_long("GPUATTEST_MIN_REPEATS", e, 1, 1000000));
  if (const char* e = std::getenv("GPUATTEST_SEED"); e && *e) o.seeds = parse_seeds("GPUATTEST_SEED", e);
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
      for (auto& k : o.kernels) {
        if (std::find(std::begin(kKernels), std::end(kKernels), k) == std::end(kKernels))
          usage("--kernels: unknown kernel " + k + " (expected vector_add, reduce_sum, sgemm, softmax)");
      }
    } else if (a == "--warmup") {
      o.warmup = int(parse_long(a, next(), 0, 1000000));
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
    } else if (a == "--seed" || a == "--seeds") {
      o.seeds = parse_seeds(a, next());
    } else if (a == "--n") {
      o.n = parse_long(a, next(), 1, 1L << 30);
    } else if (a == "--gemm") {
      o.gemm = int(parse_long(a, next(), 1, 16384));
    } else if (a == "--rows") {
      o.rows = int(parse_long(a, next(), 1, 1 << 24));
    } else if (a == "--cols") {
      o.cols = int(parse_long(a, next(), 1, 1 << 24));
    } else if (a == "--device") {
      o.device = int(parse_long(a, next(), 0, 1024));
    } else if (a == "--no-flush") {
      o.flush = false;
    } else if (a == "--tolerance") {
      std::string v = next();
      auto eq = v.find('=');
      if (eq == std::string::npos) usage("--tolerance " + v + ": expected KERNEL=VALUE");
      char* end = nullptr;
      double t = std::strtod(v.c_str() + eq + 1, &end);
      if (*end != 0 || !(t >= 0)) usage("--tolerance " + v + ": expected a non-negative number");
      o.tolerance[v.substr(0, eq)] = t;
    } else if (a == "--inject-fault") {
      o.inject_fault = next();
    } else {
      usage("unknown flag " + a);
    }
  }
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
const int kReduceGrid = 256;

struct Problem {
  std::string kernel, name;
  std::vector<std::vector<float>> in;
  std::vector<double> ref;
  size_t out_n = 0;
  double flops = 0, bytes = 0, tol = 0;
  std::map<std::string, std::string> config;
};

Problem make_problem(const std::string& k, uint64_t seed, const Options& o) {
  Problem p;
  p.kernel = k;
  Rng r(seed);
  if (k == "vector_add") {
    size_t n = size_t(o.n);
    p.in = {random_vec(n, r), random_vec(n, r)};
    p.ref.resize(n);
    for (size_t i = 0; i < n; ++i) p.ref[i] = double(p.in[0][i]) + double(p.in[1][i]);
    p.out_n = n;
    p.flops = double(n);
    p.bytes = 12.0 * double(n);
    p.tol = 1e-6;
    p.name = "vector_add/n=" + std::to_string(n);
    p.config["n"] = std::to_string(n);
  } else if (k == "reduce_sum") {
    size_t n = size_t(o.n);
    p.in = {random_vec(n, r)};
    double s = 0;
    for (float x : p.in[0]) s += double(x);
    p.ref = {s};
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
    p.in = {random_vec(m * kk, r), random_vec(kk * nn, r)};
    p.ref.assign(m * nn, 0.0);
    const auto& A = p.in[0];
    const auto& B = p.in[1];
    for (size_t i = 0; i < m; ++i)
      for (size_t q = 0; q < kk; ++q) {
        double a = A[i * kk + q];
        for (size_t j = 0; j < nn; ++j) p.ref[i * nn + j] += a * double(B[q * nn + j]);
      }
    p.out_n = m * nn;
    p.flops = 2.0 * double(m) * double(nn) * double(kk);
    p.bytes = 4.0 * double(m * kk + kk * nn + m * nn);
    p.tol = 2e-6 * double(kk);
    std::string s = std::to_string(o.gemm);
    p.name = "sgemm/m=" + s + "/n=" + s + "/k=" + s;
    p.config["m"] = p.config["n"] = p.config["k"] = s;
  } else if (k == "softmax") {
    size_t rows = size_t(o.rows), cols = size_t(o.cols);
    std::vector<float> x = random_vec(rows * cols, r);
    for (auto& v : x) v *= 8.0f;  // a spread that makes the max-shift matter
    p.in = {x};
    p.ref.resize(rows * cols);
    for (size_t i = 0; i < rows; ++i) {
      double m = -INFINITY, s = 0;
      for (size_t j = 0; j < cols; ++j) m = std::max(m, double(x[i * cols + j]));
      for (size_t j = 0; j < cols; ++j) s += std::exp(double(x[i * cols + j]) - m);
      for (size_t j = 0; j < cols; ++j) p.ref[i * cols + j] = std::exp(double(x[i * cols + j]) - m) / s;
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
  p.config["repeats"] = o.auto_repeats ? std::string("auto") : std::to_string(o.repeats);
  if (o.auto_repeats) {
    char b[64];
    std::snprintf(b, sizeof b, "%g", o.precision);
    p.config["precision"] = b;
  }
  p.config["flush"] = o.flush ? "true" : "false";
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
double median_precision(const std::vector<long long>& s) {
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
  if (lo + 1 < s.size()) med += (h - double(lo)) * double(s[lo + 1] - s[lo]);
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
  std::vector<long long> sorted_;
};

// ---- CPU backend: fp32 implementations of the kernels' algorithms --------

void cpu_compute(const Problem& p, const Options& o, std::vector<float>& out) {
  const std::string& k = p.kernel;
  if (k == "vector_add") {
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

void run_cpu(const Problem& p, const Options& o, CaseResult& res, std::vector<float>& out) {
  out.assign(p.out_n, 0.0f);
  for (int i = 0; i < o.warmup; ++i) cpu_compute(p, o, out);
  Sampler sampler(o);
  for (int i = 0; !sampler.done(res); ++i) {
    if (o.flush) {
      auto& b = cpu_flush_buffer();
      std::memset(b.data(), i & 0xff, b.size());
    }
    auto t0 = std::chrono::steady_clock::now();
    cpu_compute(p, o, out);
    auto t1 = std::chrono::steady_clock::now();
    // Clamp to 1 ns: a sample is a positive duration.
    res.samples.push_back(std::max<long long>(1, std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  }
}

// ---- CUDA backend ---------------------------------------------------------

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Cuda {
 public:
  cu::Api api;
  cu::CUcontext ctx = nullptr;
  cu::CUdevice dev = 0;
  std::string name;
  cu::CUdeviceptr flush = 0;
  size_t flush_bytes = 0;

  // open loads the driver and creates a context; on failure it returns
  // false with the reason in why.
  bool open(int ordinal, std::string& why) {
    api.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!api.lib) {
      why = std::string("libcuda.so.1 not loadable: ") + dlerror();
      return false;
    }
    bool ok = true;
    auto sym = [&](auto& fn, const char* n) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api.lib, n));
      if (!fn) {
        why = std::string("libcuda.so.1 lacks ") + n;
        ok = false;
      }
    };
    sym(api.cuInit, "cuInit");
    sym(api.cuDeviceGetCount, "cuDeviceGetCount");
    sym(api.cuDeviceGet, "cuDeviceGet");
    sym(api.cuDeviceGetName, "cuDeviceGetName");
    sym(api.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    sym(api.cuCtxCreate, "cuCtxCreate_v2");
    sym(api.cuCtxDestroy, "cuCtxDestroy_v2");
    sym(api.cuCtxSynchronize, "cuCtxSynchronize");
    sym(api.cuModuleLoadData, "cuModuleLoadData");
    sym(api.cuModuleUnload, "cuModuleUnload");
    sym(api.cuModuleGetFunction, "cuModuleGetFunction");
    sym(api.cuMemAlloc, "cuMemAlloc_v2");
    sym(api.cuMemFree, "cuMemFree_v2");
    sym(api.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    sym(api.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    sym(api.cuMemsetD8, "cuMemsetD8_v2");
    sym(api.cuMemGetInfo, "cuMemGetInfo_v2");
    sym(api.cuLaunchKernel, "cuLaunchKernel");
    sym(api.cuEventCreate, "cuEventCreate");
    sym(api.cuEventDestroy, "cuEventDestroy_v2");
    sym(api.cuEventRecord, "cuEventRecord");
    sym(api.cuEventSynchronize, "cuEventSynchronize");
    sym(api.cuEventElapsedTime, "cuEventElapsedTime");
    sym(api.cuGetErrorString, "cuGetErrorString");
    if (!ok) return false;
    cu::CUresult rc = api.cuInit(0);
    if (rc != 0) {
      why = "cuInit failed: " + err(rc);
      return false;
    }
    int count = 0;
    if ((rc = api.cuDeviceGetCount(&count)) != 0 || count == 0) {
      why = rc != 0 ? "cuDeviceGetCount failed: " + err(rc) : std::string("no CUDA device");
      return false;
    }
    if (ordinal >= count) {
      why = "device " + std::to_string(ordinal) + " requested but only " + std::to_string(count) + " present";
      return false;
    }
    try {
      check(api.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
      char buf[256] = {0};
      check(api.cuDeviceGetName(buf, sizeof buf - 1, dev), "cuDeviceGetName");
      name = buf;
      check(api.cuCtxCreate(&ctx, 0, dev), "cuCtxCreate");
      int l2 = 0;
      check(api.cuDeviceGetAttribute(&l2, cu::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev), "cuDeviceGetAttribute(L2)");
      flush_bytes = std::max<size_t>(size_t(l2) * 2, size_t(8) << 20);
      check(api.cuMemAlloc(&flush, flush_bytes), "cuMemAlloc(flush)");
    } catch (const CudaError& e) {
      why = e.what();
      return false;
    }
    return true;
  }

  std::string err(cu::CUresult rc) {
    const char* s = nullptr;
    if (api.cuGetErrorString && api.cuGetErrorString(rc, &s) == 0 && s) return std::string(s) + " (" + std::to_string(rc) + ")";
    return "CUDA error " + std::to_string(rc);
  }
  void check(cu::CUresult rc, const char* what) {
    if (rc != 0) throw CudaError(std::string(what) + ": " + err(rc));
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

void run_cuda(Cuda& c, const Problem& p, const Options& o, CaseResult& res, std::vector<float>& out) {
  const std::string path = o.fatbin_dir + "/" + p.kernel + ".fatbin";
  const std::string image = read_file(path);
  res.config["module"] = path;
  res.config["module_sha256"] = harness::sha256_hex(image.data(), image.size());
  cu::CUmodule mod = nullptr;
  c.check(c.api.cuModuleLoadData(&mod, image.data()), ("cuModuleLoadData(" + path + ")").c_str());
  std::vector<cu::CUdeviceptr> bufs;
  cu::CUevent e0 = nullptr, e1 = nullptr;
  auto cleanup = [&]() {
    for (auto b : bufs) c.api.cuMemFree(b);
    if (e0) c.api.cuEventDestroy(e0);
    if (e1) c.api.cuEventDestroy(e1);
    c.api.cuModuleUnload(mod);
  };
  try {
    cu::CUfunction fn = nullptr;
    c.check(c.api.cuModuleGetFunction(&fn, mod, p.kernel.c_str()), ("cuModuleGetFunction(" + p.kernel + ")").c_str());
    auto alloc = [&](size_t bytes) {
      cu::CUdeviceptr d = 0;
      c.check(c.api.cuMemAlloc(&d, std::max<size_t>(bytes, 4)), "cuMemAlloc");
      bufs.push_back(d);
      return d;
    };
    std::vector<cu::CUdeviceptr> din;
    for (auto& v : p.in) {
      auto d = alloc(v.size() * sizeof(float));
      c.check(c.api.cuMemcpyHtoD(d, v.data(), v.size() * sizeof(float)), "cuMemcpyHtoD");
      din.push_back(d);
    }
    cu::CUdeviceptr dout = alloc(p.out_n * sizeof(float));
    std::function<void()> launch;
    const std::string& k = p.kernel;
    if (k == "vector_add") {
      int n = int(p.out_n);
      unsigned grid = unsigned(std::min<long>((n + 255) / 256, 65535L * 8));
      launch = [&, n, grid]() mutable {
        void* args[] = {&din[0], &din[1], &dout, &n};
        c.check(c.api.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel(vector_add)");
      };
    } else if (k == "reduce_sum") {
      cu::CUdeviceptr partial = alloc(size_t(kReduceGrid) * sizeof(float));
      int n = int(p.in[0].size());
      launch = [&, n, partial]() mutable {
        int g = kReduceGrid;
        void* a1[] = {&din[0], &partial, &n};
        c.check(c.api.cuLaunchKernel(fn, kReduceGrid, 1, 1, kReduceBlock, 1, 1, 0, nullptr, a1, nullptr), "cuLaunchKernel(reduce_sum pass 1)");
        void* a2[] = {&partial, &dout, &g};
        c.check(c.api.cuLaunchKernel(fn, 1, 1, 1, kReduceBlock, 1, 1, 0, nullptr, a2, nullptr), "cuLaunchKernel(reduce_sum pass 2)");
      };
    } else if (k == "sgemm") {
      int n = o.gemm;
      launch = [&, n]() mutable {
        int M = n, N = n, K = n;
        float alpha = 1.0f, beta = 0.0f;
        void* args[] = {&M, &N, &K, &alpha, &din[0], &din[1], &beta, &dout};
        unsigned g = unsigned((n + 15) / 16);
        c.check(c.api.cuLaunchKernel(fn, g, g, 1, 16, 16, 1, 0, nullptr, args, nullptr), "cuLaunchKernel(sgemm)");
      };
    } else if (k == "softmax") {
      launch = [&]() mutable {
        int rows = o.rows, cols = o.cols;
        const unsigned block = 256;
        void* args[] = {&din[0], &dout, &rows, &cols};
        c.check(c.api.cuLaunchKernel(fn, unsigned(rows), 1, 1, block, 1, 1, block * sizeof(float), nullptr, args, nullptr), "cuLaunchKernel(softmax)");
      };
    }
    c.check(c.api.cuEventCreate(&e0, 0), "cuEventCreate");
    c.check(c.api.cuEventCreate(&e1, 0), "cuEventCreate");
    for (int i = 0; i < o.warmup; ++i) launch();
    c.check(c.api.cuCtxSynchronize(), "cuCtxSynchronize(warmup)");
    Sampler sampler(o);
    for (int i = 0; !sampler.done(res); ++i) {
      if (o.flush) c.check(c.api.cuMemsetD8(c.flush, (unsigned char)(i & 0xff), c.flush_bytes), "cuMemsetD8(L2 flush)");
      c.check(c.api.cuEventRecord(e0, nullptr), "cuEventRecord");
      launch();
      c.check(c.api.cuEventRecord(e1, nullptr), "cuEventRecord");
      c.check(c.api.cuEventSynchronize(e1), "cuEventSynchronize");
      float ms = 0;
      c.check(c.api.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
      res.samples.push_back(std::max<long long>(1, std::llround(double(ms) * 1e6)));
    }
    out.assign(p.out_n, 0.0f);
    c.check(c.api.cuMemcpyDtoH(out.data(), dout, p.out_n * sizeof(float)), "cuMemcpyDtoH");
    res.mem_used = c.mem_used();
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
}

// ---- correctness ------------------------------------------------------------

void check_output(const Problem& p, const std::vector<float>& out, CaseResult& res) {
  const size_t n = p.out_n;
  double max_abs = 0, sum_abs = 0;
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    double y = double(out[i]), x = p.ref[i];
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

std::string render(const std::string& backend, const std::string& device, const std::vector<CaseResult>& cases) {
  std::ostringstream o;
  o << "{\n  \"schema\": " << jstr(kSchema) << ",\n  \"tool\": " << jstr(kTool) << ",\n  \"backend\": " << jstr(backend) << ",\n";
  if (!device.empty()) o << "  \"device\": " << jstr(device) << ",\n";
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
    for (size_t j = 0; j < c.samples.size(); ++j) o << (j ? ", " : "") << c.samples[j];
    o << "],\n";
    o << "      \"flops\": " << jnum(c.flops) << ",\n";
    o << "      \"bytes\": " << jnum(c.bytes) << ",\n";
    o << "      \"config\": {";
    size_t j = 0;
    for (auto& kv : c.config) o << (j++ ? ", " : "") << jstr(kv.first) << ": " << jstr(kv.second);
    o << "},\n";
    o << "      \"output_sha256\": " << jstr(c.output_sha);
    if (c.mem_used >= 0) o << ",\n      \"device_memory_used_bytes\": " << c.mem_used;
    if (!c.stop_reason.empty())
      o << ",\n      \"stop\": {\"reason\": " << jstr(c.stop_reason) << ", \"elapsed_s\": " << jnum(c.stop_elapsed_s) << "}";
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

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  Cuda cuda;
  std::string backend = o.backend;
  if (backend != "cpu") {
    std::string why;
    if (cuda.open(o.device, why)) {
      backend = "cuda";
    } else if (backend == "cuda") {
      std::fprintf(stderr, "gpuattest-harness: backend cuda unavailable: %s\nhint: use --backend cpu (or auto) on a machine without a GPU\n", why.c_str());
      return 3;
    } else {
      std::fprintf(stderr, "gpuattest-harness: backend auto: %s; running the CPU backend\n", why.c_str());
      backend = "cpu";
    }
  }
  std::fprintf(stderr, "gpuattest-harness: backend %s%s%s\n", backend.c_str(), backend == "cuda" ? ", device " : "",
               backend == "cuda" ? cuda.name.c_str() : "");

  std::vector<CaseResult> cases;
  bool all_passed = true;
  for (const auto& k : o.kernels) {
    for (uint64_t seed : o.seeds) {
      Problem p = make_problem(k, seed, o);
      CaseResult res;
      res.name = p.name;
      res.kernel = k;
      res.flops = p.flops;
      res.bytes = p.bytes;
      res.config = p.config;
      res.config["backend"] = backend;
      res.tol = p.tol;
      std::vector<float> out;
      try {
        if (backend == "cuda") {
          run_cuda(cuda, p, o, res, out);
        } else {
          run_cpu(p, o, res, out);
        }
        if (o.inject_fault == k && !out.empty()) out[out.size() / 2] += 1.0f;
        res.output_sha = harness::sha256_hex(out.data(), out.size() * sizeof(float));
        check_output(p, out, res);
      } catch (const std::exception& e) {
        res.status = "error";
        res.message = e.what();
      }
      if (res.status != "passed") all_passed = false;
      std::fprintf(stderr, "%-44s %-7s %s\n", res.name.c_str(), res.status.c_str(), res.message.c_str());
      cases.push_back(std::move(res));
    }
  }
  std::string why;
  if (!write_atomic(o.out, render(backend, backend == "cuda" ? cuda.name : "", cases), why)) {
    std::fprintf(stderr, "gpuattest-harness: %s\n", why.c_str());
    return 3;
  }
  return all_passed ? 0 : 1;
}
