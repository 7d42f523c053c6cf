// Command engine measures gpuattest's per-step overhead: a 20-step chain of
// trivial host commands run by `gpuattest run` against the same commands run
// by a plain shell script, and the wall time of a fully cached re-run of a
// 20-step build pipeline. It builds the CLI itself and prints a table.
//
//	go run ./bench/engine [-reps 15] [-steps 20]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/bench/internal/benchbin"
)

func main() {
	reps := flag.Int("reps", 15, "repetitions of each measurement")
	steps := flag.Int("steps", 20, "steps per pipeline")
	flag.Parse()
	if err := run(*reps, *steps); err != nil {
		fmt.Fprintln(os.Stderr, "bench/engine:", err)
		os.Exit(1)
	}
}

func run(reps, steps int) error {
	dir, err := os.MkdirTemp("", "gpuattest-bench-engine-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := benchbin.Gpuattest(dir)
	if err != nil {
		return err
	}

	shell, gpa, perStep, err := trivialSteps(dir, bin, reps, steps)
	if err != nil {
		return err
	}
	cold, cached, err := cachedBuild(dir, bin, reps, steps)
	if err != nil {
		return err
	}

	fmt.Printf("gpuattest engine overhead (%d steps, %d repetitions, %s)\n\n", steps, reps, hostLine())
	fmt.Printf("%-44s %10s %10s %10s\n", "measurement", "min", "median", "max")
	row := func(name string, ds []time.Duration) {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		fmt.Printf("%-44s %10s %10s %10s\n", name, ms(s[0]), ms(s[len(s)/2]), ms(s[len(s)-1]))
	}
	row("shell script, 20 x /bin/sh -ec true", shell)
	row("gpuattest run, 20-step chain (whole CLI)", gpa)
	row("overhead per step (gpuattest - shell) / 20", perStep)
	row("20-step build pipeline, cold", []time.Duration{cold})
	row("20-step build pipeline, fully cached re-run", cached)
	fmt.Println()
	fmt.Printf("goal: median overhead per step <= 5ms: %s\n", verdict(median(perStep) <= 5*time.Millisecond))
	fmt.Printf("goal: cached re-run <= 100ms wall:      %s\n", verdict(median(cached) <= 100*time.Millisecond))
	return nil
}

// trivialSteps times a chain of trivial steps: gpuattest against a shell
// script running the same commands, and the overhead per step.
func trivialSteps(dir, bin string, reps, steps int) (shell, gpa, perStep []time.Duration, err error) {
	var pipe, script strings.Builder
	pipe.WriteString("apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: overhead\nsteps:\n")
	script.WriteString("set -e\n")
	for i := 0; i < steps; i++ {
		fmt.Fprintf(&pipe, "  - id: s%02d\n    run: \"true\"\n", i)
		if i > 0 {
			fmt.Fprintf(&pipe, "    needs: [s%02d]\n", i-1)
		}
		// The engine runs a shell string as /bin/sh -ec '...'; so does the script.
		script.WriteString("/bin/sh -ec true\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "trivial.yaml"), []byte(pipe.String()), 0o644); err != nil {
		return nil, nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "trivial.sh"), []byte(script.String()), 0o755); err != nil {
		return nil, nil, nil, err
	}
	for r := 0; r < reps+1; r++ {
		s, err := timed(dir, "/bin/sh", "trivial.sh")
		if err != nil {
			return nil, nil, nil, err
		}
		g, err := timed(dir, bin, "run", "trivial.yaml", "-q", "--no-cache", "--jobs", "1", "--out", fmt.Sprintf("runs/t%d", r))
		if err != nil {
			return nil, nil, nil, err
		}
		if r == 0 {
			continue // warm-up
		}
		shell, gpa = append(shell, s), append(gpa, g)
	}
	perStep = make([]time.Duration, len(gpa))
	for i := range gpa {
		perStep[i] = (gpa[i] - shell[i]) / time.Duration(steps)
	}
	return shell, gpa, perStep, nil
}

// cachedBuild times a 20-step build pipeline (inputs -> outputs) cold and
// fully cached.
func cachedBuild(dir, bin string, reps, steps int) (cold time.Duration, cached []time.Duration, err error) {
	var bp strings.Builder
	bp.WriteString("apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: build\nsteps:\n")
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		return 0, nil, err
	}
	for i := 0; i < steps; i++ {
		src := filepath.Join(dir, "src", fmt.Sprintf("k%02d.cu", i))
		if err := os.WriteFile(src, []byte(strings.Repeat(fmt.Sprintf("// kernel %d\n", i), 2000)), 0o644); err != nil {
			return 0, nil, err
		}
		fmt.Fprintf(&bp, "  - id: b%02d\n    run: mkdir -p out && cp src/k%02d.cu out/k%02d.bin\n    inputs: [src/k%02d.cu]\n    outputs: [out/k%02d.bin]\n", i, i, i, i, i)
		if i > 0 {
			fmt.Fprintf(&bp, "    needs: [b%02d]\n", i-1)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "build.yaml"), []byte(bp.String()), 0o644); err != nil {
		return 0, nil, err
	}
	cacheDir := filepath.Join(dir, "cache")
	cold, err = timed(dir, bin, "run", "build.yaml", "-q", "--cache-dir", cacheDir, "--out", "runs/cold")
	if err != nil {
		return 0, nil, err
	}
	for r := 0; r < reps; r++ {
		d, err := timed(dir, bin, "run", "build.yaml", "-q", "--cache-dir", cacheDir, "--out", fmt.Sprintf("runs/c%d", r))
		if err != nil {
			return 0, nil, err
		}
		cached = append(cached, d)
	}
	out, err := os.ReadFile(filepath.Join(dir, "runs", "c0", "run.json"))
	if err != nil || strings.Count(string(out), `"cache": "hit"`) != steps {
		return 0, nil, fmt.Errorf("the cached re-run did not hit the cache for every step")
	}

	return cold, cached, nil
}

func timed(dir, name string, args ...string) (time.Duration, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return d, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func hostLine() string {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return "unknown host"
	}
	return strings.TrimSpace(string(out)) + " CPUs"
}
