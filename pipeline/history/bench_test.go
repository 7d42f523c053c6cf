package history_test

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/pipeline/history"
)

// BenchmarkHistory100x20 draws the history of 100 releases with 20
// bundle referrers each (a validation statement and 19 test-result
// statements) from a registry on 127.0.0.1 at the default concurrency:
// Debian's docker-registry, which has no referrers API (each release's
// referrers are one tag-schema index), and go-containerregistry's
// in-process registry (referrers API, no disk), whose requests it counts
// per release. The goal is 10 s wall for the whole history; each
// log line gives the wall time and the CPU time spent in this process
// (signature checks, JSON, hashing) and in docker-registry, which
// together, on a machine of few cores, are what bound it. On
// docker-registry it also draws the history at 4 and 16 jobs, and with a
// bundle cache, empty then full. Setup (signing and pushing 2,000
// bundles) is not timed.
//
//	go test -run '^$' -bench History100x20 -benchtime 1x ./pipeline/history
func BenchmarkHistory100x20(b *testing.B) {
	b.Run("docker-registry", func(b *testing.B) { benchHistory(b, registrytest.StartDocker(b).Host, true, nil) })
	b.Run("in-process", func(b *testing.B) {
		c := &requestCounter{}
		benchHistory(b, registrytest.StartInProcess(b, c.wrap), false, c)
	})
}

// requestCounter counts the GET requests the in-process registry serves,
// by kind (manifests, blobs, referrers, tags list, the /v2/ ping).
type requestCounter struct {
	on     atomic.Bool
	counts sync.Map // kind -> *atomic.Int64
}

func (c *requestCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.on.Load() && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			kind := "ping"
			for _, k := range []string{"/manifests/", "/blobs/", "/referrers/", "/tags/list"} {
				if strings.Contains(r.URL.Path, k) {
					kind = strings.Trim(k, "/")
				}
			}
			n, _ := c.counts.LoadOrStore(r.Method+" "+kind, &atomic.Int64{})
			n.(*atomic.Int64).Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

// perRelease says how many requests of each kind one release took.
func (c *requestCounter) perRelease(releases int) string {
	var parts []string
	var total int64
	c.counts.Range(func(k, v any) bool {
		n := v.(*atomic.Int64).Load()
		total += n
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(n)/float64(releases)))
		return true
	})
	sort.Strings(parts)
	return fmt.Sprintf("%.2f requests per release (%s)", float64(total)/float64(releases), strings.Join(parts, ", "))
}

func benchHistory(b *testing.B, host string, docker bool, count *requestCounter) {
	releases, referrers := 100, 20
	if n, err := strconv.Atoi(os.Getenv("GPUATTEST_HISTORY_RELEASES")); err == nil && n > 0 {
		releases = n // a shorter run, to look at what bounds it
	}
	k := newKeys(b)
	setup := time.Now()
	for i := range releases {
		publish(b.Context(), b, k, host, "kernels", i, release{tag: fmt.Sprintf("v1.%d", i), gpu: h100, factor: 1, extra: referrers - 2})
	}
	b.Logf("setup: %d releases x %d referrers pushed in %s", releases, referrers, time.Since(setup).Round(time.Millisecond))
	v := k.verifier(b)
	cache, err := oci.OpenBundleCache(b.TempDir(), oci.DefaultBundleCacheSize)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		// The figure: no cache, the default concurrency.
		wall := measure(b, host, v, releases, docker, count, "no bundle cache", history.DefaultJobs)
		b.ReportMetric(wall.Seconds(), "s/history")
		if !docker {
			continue
		}
		b.StopTimer()
		for _, jobs := range []int{4, 16} {
			measure(b, host, v, releases, docker, nil, "no bundle cache", jobs)
		}
		measure(b, host, v, releases, docker, nil, "filling an empty bundle cache", history.DefaultJobs, oci.WithBundleCache(cache))
		measure(b, host, v, releases, docker, nil, "every bundle in the cache", history.DefaultJobs, oci.WithBundleCache(cache))
		b.StartTimer()
	}
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average after: %s", strings.TrimSpace(string(l)))
	}
}

// measure draws the history once, with jobs releases at once and the
// registry options given, checks every release verified, and logs the
// wall time, the CPU time of this process and of docker-registry, and
// with count the requests per release.
func measure(b *testing.B, host string, v *verify.Verifier, releases int, docker bool, count *requestCounter, what string, jobs int, ro ...oci.Option) time.Duration {
	b.Helper()
	if count != nil {
		count.on.Store(true)
	}
	cpu0, reg0 := cpuTime(), registryCPU(b)
	start := time.Now()
	h, err := history.Collect(b.Context(), host+"/kernels", v, history.WithJobs(jobs), history.WithRegistryOptions(ro...))
	wall := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if len(h.Releases) != releases || len(h.Excluded) != 0 {
		b.Fatalf("%d releases drawn, %d left out (%+v), want %d and none", len(h.Releases), len(h.Excluded), h.Excluded, releases)
	}
	cpu, reg := cpuTime()-cpu0, registryCPU(b)-reg0
	where := "the in-process registry's CPU is counted in this process's"
	if docker {
		where = fmt.Sprintf("%.2f s CPU in docker-registry", reg.Seconds())
	}
	b.Logf("history of %d releases x 20 referrers, %s: %.2f s wall (goal <= 10 s), %.2f s CPU in this process, %s; %d jobs, GOMAXPROCS %d, %d CPUs",
		releases, what, wall.Seconds(), cpu.Seconds(), where, jobs, runtime.GOMAXPROCS(0), runtime.NumCPU())
	if count != nil {
		count.on.Store(false)
		b.Logf("requests: %s; docker-registry, without the referrers API, takes one more per release (the API's 404, then the sha256-<hex> tag's index)", count.perRelease(releases))
		count.counts.Clear()
	}
	return wall
}

// registryCPU is the CPU time of the docker-registry processes this
// process started (its children), read from /proc.
func registryCPU(b *testing.B) time.Duration {
	var total time.Duration
	ents, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "(docker-registry") {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) < 13 || f[1] != self {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * (time.Second / 100)
	}
	return total
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
