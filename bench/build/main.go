// Command build measures the cuda-build step: a cold build of the four
// reference kernels for sm_80 + sm_90 through gpuattest's executor
// (parallel nvcc per source, bounded by CPUs, plus cuobjdump inspection)
// against the same nvcc command lines run one after another, and a re-run
// of the same pipeline through the engine that the build cache answers.
//
//	go run ./bench/build [-rounds 3] [-jobs 0]
//
// It prints the median wall time of each over the rounds and the ratios
// (goals: parallel <= 0.6x sequential on 2 cores; cached <= 2% of cold).
// Numbers depend on the machine's load: run it on an idle machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

var sources = []string{"vector_add.cu", "reduce_sum.cu", "sgemm.cu", "softmax.cu"}

func main() {
	rounds := flag.Int("rounds", 5, "measurements of each variant (median reported)")
	jobs := flag.Int("jobs", 0, "parallel nvcc processes for the executor (0: one per CPU)")
	kernels := flag.String("kernels", "kernels", "directory holding the reference .cu files")
	flag.Parse()
	if err := run(*rounds, *jobs, *kernels); err != nil {
		fmt.Fprintf(os.Stderr, "bench/build: %v\n", err)
		os.Exit(1)
	}
}

// samples are the measurements of the cold-build rounds.
type samples struct {
	seq, par, compile, inspect []time.Duration
	seqCPU, parCPU             []time.Duration
	concurrency                []float64
}

func run(rounds, jobs int, kernels string) error {
	if _, err := exec.LookPath("nvcc"); err != nil {
		return fmt.Errorf("nvcc not found\nhint: apt-get install nvidia-cuda-toolkit")
	}
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "gpuattest-bench-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fresh := func(name string) (string, error) {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		for _, s := range sources {
			b, err := os.ReadFile(filepath.Join(kernels, s))
			if err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(dir, s), b, 0o644); err != nil {
				return "", err
			}
		}
		return dir, nil
	}
	sm, err := coldRounds(ctx, rounds, jobs, fresh)
	if err != nil {
		return err
	}
	dir, err := fresh("engine")
	if err != nil {
		return err
	}
	cold, cached, err := engineRuns(ctx, tmp, dir, jobs)
	if err != nil {
		return err
	}
	ms, mp := median(sm.seq), median(sm.par)
	fmt.Printf("cold build of %d kernels for sm_80+sm_90 (%d CPUs, %d rounds; median and min wall)\n", len(sources), runtime.NumCPU(), rounds)
	fmt.Printf("  nvcc commands run sequentially  median %7.2fs  min %7.2fs  (child CPU %.2fs)\n", ms.Seconds(), minimum(sm.seq).Seconds(), median(sm.seqCPU).Seconds())
	fmt.Printf("  gpuattest cuda-build executor   median %7.2fs  min %7.2fs  (child CPU %.2fs)\n", mp.Seconds(), minimum(sm.par).Seconds(), median(sm.parCPU).Seconds())
	fmt.Printf("    of which nvcc phase           median %7.2fs, cuobjdump inspection median %.3fs\n", median(sm.compile).Seconds(), median(sm.inspect).Seconds())
	sort.Float64s(sm.concurrency)
	fmt.Printf("    nvcc jobs running at once     median %.2f (sum of job wall times / phase wall)\n", sm.concurrency[len(sm.concurrency)/2])
	fmt.Printf("  executor / sequential           median %.2fx  min/min %.2fx  (goal <= 0.60x)\n", mp.Seconds()/ms.Seconds(), minimum(sm.par).Seconds()/minimum(sm.seq).Seconds())
	fmt.Printf("engine run, cold (cache miss)     %8.2fs\n", cold.Seconds())
	fmt.Printf("engine re-run (cache hit)         %8.3fs  (%.2f%% of cold; goal <= 2%%)\n", cached.Seconds(), 100*cached.Seconds()/cold.Seconds())
	fmt.Printf("samples: sequential %v executor %v\n", round(sm.seq), round(sm.par))
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average at the end: %s", l)
	}
	return nil
}

// coldRounds builds the kernels rounds times each way, in fresh
// directories: the planned nvcc commands one after another, and the
// cuda-build executor.
func coldRounds(ctx context.Context, rounds, jobs int, fresh func(string) (string, error)) (*samples, error) {
	p := &pipeline.Pipeline{APIVersion: pipeline.APIVersion, Kind: pipeline.KindPipeline, Name: "bench",
		Targets: []string{"sm_80", "sm_90"},
		Steps:   []pipeline.Step{{ID: "kernels", Kind: pipeline.KindCUDABuild, Sources: sources}}}
	plan, err := cuda.Plan(p, &p.Steps[0])
	if err != nil {
		return nil, err
	}
	host := &runner.Host{}
	env := os.Environ()
	sm := &samples{}
	for r := 0; r < rounds; r++ {
		// Alternate the order so neither variant always runs on a warmer page cache.
		for _, variant := range order(r) {
			dir, err := fresh(fmt.Sprintf("%s-%d", variant, r))
			if err != nil {
				return nil, err
			}
			start, cpu0 := time.Now(), childCPU()
			switch variant {
			case "sequential":
				recs, failed, err := cuda.RunJobs(ctx, host, dir, plan, cuda.RunOptions{Env: env, Parallel: 1})
				if err != nil || failed >= 0 {
					return nil, fmt.Errorf("sequential build failed: %v %v", err, recs)
				}
				sm.seq = append(sm.seq, time.Since(start))
				sm.seqCPU = append(sm.seqCPU, childCPU()-cpu0)
			case "executor":
				sc := &step.Context{Pipeline: p, Step: &p.Steps[0], Runner: host, WorkDir: dir, StepDir: filepath.Join(dir, ".step"),
					Env: env, Stdout: io.Discard, Stderr: io.Discard, Logger: slog.New(slog.DiscardHandler)}
				out, err := (&cuda.Build{Jobs: jobs}).Execute(ctx, sc)
				if err != nil {
					return nil, err
				}
				if out.Status != step.Passed {
					return nil, fmt.Errorf("executor build failed: %s", out.Reason)
				}
				sm.par = append(sm.par, time.Since(start))
				sm.parCPU = append(sm.parCPU, childCPU()-cpu0)
				det := out.Details.(*cuda.BuildDetails)
				sm.compile = append(sm.compile, time.Duration(det.Timings.BuildMS)*time.Millisecond)
				sm.inspect = append(sm.inspect, time.Duration(det.Timings.InspectMS)*time.Millisecond)
				var sum int64
				for _, c := range det.Commands {
					sum += c.DurationMS
				}
				sm.concurrency = append(sm.concurrency, float64(sum)/float64(max(det.Timings.BuildMS, 1)))
			}
		}
	}
	return sm, nil
}

// engineRuns runs the same build through the engine twice in dir: cold
// (a cache miss) and cached (the build cache answers).
func engineRuns(ctx context.Context, tmp, dir string, jobs int) (cold, cached time.Duration, err error) {
	yaml := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: bench\ntargets: [sm_80, sm_90]\nsteps:\n  - id: kernels\n    kind: cuda-build\n    sources: [vector_add.cu, reduce_sum.cu, sgemm.cu, softmax.cu]\n"
	pf := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(pf, []byte(yaml), 0o644); err != nil {
		return 0, 0, err
	}
	ep, err := pipeline.Load(pf)
	if err != nil {
		return 0, 0, err
	}
	for i, d := range []*time.Duration{&cold, &cached} {
		start := time.Now()
		res, err := engine.Run(ctx, ep, engine.WithOutDir(filepath.Join(tmp, fmt.Sprintf("run%d", i))), engine.WithCacheDir(filepath.Join(tmp, "cache")),
			engine.WithExecutor(pipeline.KindCUDABuild, &cuda.Build{Jobs: jobs}))
		if err != nil {
			return 0, 0, err
		}
		*d = time.Since(start)
		if !res.Passed() {
			return 0, 0, fmt.Errorf("engine run %d did not pass: %s", i, res.Record.Reason)
		}
		if want := []string{"miss", "hit"}[i]; res.Record.Steps[0].Cache != want {
			return 0, 0, fmt.Errorf("engine run %d: cache %q, want %q", i, res.Record.Steps[0].Cache, want)
		}
	}
	return cold, cached, nil
}

func order(r int) []string {
	if r%2 == 0 {
		return []string{"sequential", "executor"}
	}
	return []string{"executor", "sequential"}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func minimum(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	m := ds[0]
	for _, d := range ds[1:] {
		m = min(m, d)
	}
	return m
}

// childCPU is the user+system CPU time of this process's waited-for
// children so far.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func round(ds []time.Duration) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Round(10*time.Millisecond).String())
	}
	return out
}
