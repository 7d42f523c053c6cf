package cuda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// RunOptions says how [RunJobs] runs nvcc jobs. The zero value runs them
// in no image, with an empty environment (see [runner.Command]), one per
// CPU at a time, and discards their output.
type RunOptions struct {
	// Env is the environment of every nvcc process.
	Env []string
	// Image is the pinned image container runners run nvcc in.
	Image image.Pinned
	// Parallel caps how many jobs run at once; zero means one per CPU.
	Parallel int
	// Stdout and Stderr receive each job's command line and output once
	// the job ends, so the logs of parallel jobs do not interleave; nil
	// discards them.
	Stdout, Stderr io.Writer
}

// RunJobs runs jobs in dir through r, creating their output directories
// first. It returns one record per job and the index of the first failed
// job (-1 when all succeeded); the error is for a job that could not run
// at all.
func RunJobs(ctx context.Context, r runner.Runner, dir string, jobs []Job, o RunOptions) ([]CommandRecord, int, error) {
	// Output directories are made through a root of dir: a directory
	// symlink in the work dir cannot make gpuattest create one elsewhere.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, -1, fmt.Errorf("opening the work dir: %w", err)
	}
	defer root.Close()
	for _, j := range jobs {
		for _, out := range j.Outputs {
			if err := root.MkdirAll(filepath.Dir(filepath.FromSlash(out)), 0o755); err != nil {
				return nil, -1, fmt.Errorf("creating output directory: %w", err)
			}
		}
	}
	recs := make([]CommandRecord, len(jobs))
	errs := make([]error, len(jobs))
	var mu sync.Mutex
	forEach(o.Parallel, len(jobs), func(i int) {
		if ctx.Err() != nil {
			errs[i] = fmt.Errorf("building %s: %w", jobs[i].Source, context.Cause(ctx))
			return
		}
		var so, se bytes.Buffer
		recs[i], errs[i] = runJob(ctx, r, dir, jobs[i], o, &so, &se)
		mu.Lock()
		defer mu.Unlock()
		if o.Stdout != nil {
			fmt.Fprintf(o.Stdout, "$ %s\n", recs[i].Line)
			o.Stdout.Write(so.Bytes())
		}
		if o.Stderr != nil && se.Len() > 0 {
			fmt.Fprintf(o.Stderr, "# %s\n", jobs[i].Source)
			o.Stderr.Write(se.Bytes())
		}
	})
	if err := errors.Join(errs...); err != nil {
		return recs, -1, err
	}
	if ctx.Err() != nil {
		return recs, -1, fmt.Errorf("building: %w", context.Cause(ctx))
	}
	for i, rec := range recs {
		if rec.ExitCode != 0 {
			return recs, i, nil
		}
	}
	return recs, -1, nil
}

// runJob runs one nvcc job, its output into so and se.
func runJob(ctx context.Context, r runner.Runner, dir string, j Job, o RunOptions, so, se io.Writer) (CommandRecord, error) {
	start := time.Now()
	res, err := r.Run(ctx, &runner.Command{Args: j.Args, Dir: dir, Env: o.Env, Stdout: so, Stderr: se, Image: o.Image})
	rec := CommandRecord{Source: j.Source, Argv: j.Args, Line: shellQuote(j.Args), DurationMS: time.Since(start).Milliseconds()}
	if err != nil {
		rec.ExitCode = -1
		return rec, fmt.Errorf("running nvcc for %s: %w", j.Source, err)
	}
	rec.ExitCode = res.ExitCode
	return rec, nil
}

// forEach calls f(0..n-1) on at most workers goroutines (one per CPU when
// zero) and returns when all calls have.
func forEach(workers, n int, f func(i int)) {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	workers = min(workers, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
