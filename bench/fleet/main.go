// Command fleet measures a simulated fleet on a local Slurm (slurmctld,
// slurmd and munged started as internal/slurmtest starts them): -jobs
// one-node classes (64 by default) alternating a100 and h100, each job
// running a GPU step of -step seconds on a simulated GPU. It reports:
//
//  1. the coordinator's CPU while it waits: `gpuattest fleet collect` of
//     the detached dispatch, its own CPU and its squeue children's
//     (wait4's rusage), over its wall time, less the CPU of the verify it
//     ends with (measured alone in 3.); goal at most 1% of a core;
//  2. squeue --json calls: the poll interval (10 s by default), the size
//     of one answer with every job listed and squeue's CPU for it;
//  3. `gpuattest fleet verify` of the collected release (dispatch plus
//     every node bundle), median wall time of -runs runs; goal at most 2 s;
//  4. the size of the dispatch and of a node bundle.
//
// Run from the module root, as root, with Slurm and munge installed
// (.ci/install):
//
//	go run ./bench/fleet [-jobs 64] [-step 30] [-runs 5] [-out bench/fleet/results.txt]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gpuattest/gpuattest/bench/internal/benchbin"
	"github.com/gpuattest/gpuattest/internal/slurmtest"
)

func main() {
	jobs := flag.Int("jobs", 64, "jobs (one-node classes)")
	step := flag.Int("step", 30, "seconds each job's GPU step runs")
	runs := flag.Int("runs", 5, "verify runs")
	out := flag.String("out", "", "also write the table to this file")
	flag.Parse()
	if err := run(*jobs, *step, *runs, *out); err != nil {
		log.Fatal(err)
	}
}

// poll is the coordinator's default poll interval (cmd/gpuattest).
const poll = "10s"

func run(jobs, step, runs int, outFile string) error {
	half := (jobs + 1) / 2
	cluster, stop, err := slurmtest.Serve(&slurmtest.Config{GPUs: []slurmtest.GPU{{Type: "a100", Count: half}, {Type: "h100", Count: half}}, CPUs: 2 * jobs})
	if err != nil {
		return err
	}
	defer stop()
	dir, err := os.MkdirTemp("", "fleetbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := benchbin.Gpuattest(dir)
	if err != nil {
		return err
	}
	if err := setup(dir, jobs, step); err != nil {
		return err
	}
	env := append(os.Environ(), cluster.Env()...)
	env = append(env, "GPUATTEST_PASSWORD=")
	gpuattest := func(args ...string) (*os.ProcessState, time.Duration, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		start := time.Now()
		err := cmd.Run()
		return cmd.ProcessState, time.Since(start), b.String(), err
	}
	if _, _, o, err := gpuattest("key", "generate", "--output-key-prefix", "rel", "--no-password"); err != nil {
		return fmt.Errorf("key generate: %v\n%s", err, o)
	}
	if _, _, o, err := gpuattest("run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "-q", "--detach"); err != nil {
		return fmt.Errorf("run --fleet --detach: %v\n%s", err, o)
	}
	ps, wall, o, err := gpuattest("fleet", "collect", "run", "--timeout", "30m")
	if err != nil {
		return fmt.Errorf("fleet collect: %v\n%s", err, o)
	}
	collectCPU := cpu(ps)
	// One poll's cost: squeue --json with every job still listed
	// (MinJobAge keeps ended jobs for 300 s), median of 5 calls.
	var sq []byte
	var sqCPU []time.Duration
	for range 5 {
		sqCmd := exec.Command("squeue", "--json")
		sqCmd.Env = env
		if sq, err = sqCmd.Output(); err != nil {
			return fmt.Errorf("squeue --json: %w", err)
		}
		sqCPU = append(sqCPU, cpu(sqCmd.ProcessState))
	}
	sort.Slice(sqCPU, func(i, j int) bool { return sqCPU[i] < sqCPU[j] })
	var walls []time.Duration
	var verifyCPU time.Duration
	for range runs {
		ps, w, o, err := gpuattest("fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated")
		if err != nil {
			return fmt.Errorf("fleet verify: %v\n%s", err, o)
		}
		walls = append(walls, w)
		verifyCPU = cpu(ps)
	}
	sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
	waitCPU := max(collectCPU-verifyCPU, 0)
	dispatchSize := fileSize(filepath.Join(dir, "run", "dispatch.intoto.jsonl"))
	nodes, _ := filepath.Glob(filepath.Join(dir, "run", "nodes", "*.intoto.jsonl"))
	var nodeSize int64
	for _, n := range nodes {
		nodeSize += fileSize(n)
	}
	var t strings.Builder
	fmt.Fprintf(&t, "fleet on a local Slurm %s: %d jobs (one per class, a100/h100 simulated), GPU step %d s, %d CPU(s)\n", version(), jobs, step, numCPU())
	fmt.Fprintf(&t, "coordinator while waiting: %.3f%% of a core (%v CPU in %v of fleet collect, less %v for its verify); goal <= 1%%\n",
		100*waitCPU.Seconds()/wall.Seconds(), collectCPU.Round(time.Millisecond), wall.Round(time.Millisecond), verifyCPU.Round(time.Millisecond))
	fmt.Fprintf(&t, "squeue --json: one call per %s poll; with %d jobs listed: %d bytes (%d bytes per job), %v CPU in squeue (median of 5)\n",
		poll, jobs, len(sq), len(sq)/max(jobs, 1), sqCPU[2].Round(time.Millisecond))
	fmt.Fprintf(&t, "fleet verify (dispatch + %d node bundles): median %v of %d runs (min %v, max %v); goal <= 2s\n",
		len(nodes), walls[len(walls)/2].Round(time.Millisecond), runs, walls[0].Round(time.Millisecond), walls[len(walls)-1].Round(time.Millisecond))
	fmt.Fprintf(&t, "sizes: dispatch %d bytes (%d bytes per job); node bundles %d bytes each on average\n", dispatchSize, dispatchSize/int64(max(jobs, 1)), nodeSize/int64(max(len(nodes), 1)))
	fmt.Print(t.String())
	if outFile != "" {
		return os.WriteFile(outFile, []byte(t.String()), 0o644)
	}
	return nil
}

// setup writes the pipeline and a fleet of jobs one-node classes.
func setup(dir string, jobs, step int) error {
	if err := os.MkdirAll(filepath.Join(dir, "proj"), 0o755); err != nil {
		return err
	}
	p := fmt.Sprintf(`apiVersion: gpuattest.dev/v1
kind: Pipeline
name: fleet-bench
targets: [sm_80, sm_90]
steps:
  - id: build
    run: mkdir -p out && echo kernel > out/kernels.fatbin
    outputs: [out/kernels.fatbin]
  - id: check
    gpu: true
    needs: [build]
    run: sleep %d && test "$(cat out/kernels.fatbin)" = kernel
`, step)
	var f strings.Builder
	fmt.Fprintf(&f, "apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: slurm\nsharedDir: %s\nclasses:\n", filepath.Join(dir, "shared"))
	for i := range jobs {
		typ, cc := "a100", "80"
		if i%2 == 1 {
			typ, cc = "h100", "90"
		}
		fmt.Fprintf(&f, "  - name: %s-%d\n    gres: gpu:%s:1\n    constraint: sm_%s\n    targets: [sm_%s]\n    timeLimit: 30m\n", typ, i, typ, cc, cc)
	}
	if err := os.WriteFile(filepath.Join(dir, "proj", "p.yaml"), []byte(p), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(f.String()), 0o644)
}

func cpu(ps *os.ProcessState) time.Duration {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return ps.UserTime() + ps.SystemTime()
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func version() string {
	b, err := exec.Command("slurmctld", "-V").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

func numCPU() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\nprocessor")) + 1
}
