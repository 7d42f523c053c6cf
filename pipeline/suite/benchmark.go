package suite

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/step"
	"github.com/gpuattest/gpuattest/pipeline/suite/stats"
)

// Benchmark executes benchmark steps: it runs the suite once per seed with
// GPUATTEST_WARMUP, GPUATTEST_REPEATS and GPUATTEST_SEED set, merges the
// raw samples per case, computes the statistics, throughput and roofline,
// gates on the baseline when the step has one, and writes benchmark.json,
// samples.csv and junit.xml into the step directory.
type Benchmark struct{}

var _ step.Executor = Benchmark{}

// BenchmarkDetails is a benchmark step's facts (Outcome.Details). The same
// struct, with samples and a schema, is benchmark.json.
type BenchmarkDetails struct {
	// Schema is BenchmarkSchemaID in benchmark.json, empty in Details.
	Schema string `json:"schema,omitempty"`
	// Backend and Device are what the results files report.
	Backend string `json:"backend"`
	Device  string `json:"device,omitempty"`
	// Hardware is where the samples were taken (from the hardware record).
	Hardware Hardware `json:"hardware"`
	// Warmup, Repeats and Seeds are the knobs passed to the suite.
	Warmup  int   `json:"warmup,omitempty"`
	Repeats int   `json:"repeats,omitempty"`
	Seeds   []int `json:"seeds,omitempty"`
	// Counts tallies case statuses over all seeds.
	Counts Counts `json:"counts"`
	// Cases are the merged cases.
	Cases []BenchmarkCase `json:"cases"`
	// Gate is the baseline comparison, when the step names a baseline.
	Gate *GateResult `json:"gate,omitempty"`
}

// BenchmarkCase is one merged case of a benchmark.
type BenchmarkCase struct {
	// Name is the case key (seed segment removed).
	Name   string `json:"name"`
	Kernel string `json:"kernel,omitempty"`
	// Status is the worst status over seeds.
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	// Stats summarises the samples, in nanoseconds.
	Stats *stats.Summary `json:"stats_ns,omitempty"`
	// GFLOPS and GBPS are the throughput at the median time.
	GFLOPS float64 `json:"gflops,omitempty"`
	GBPS   float64 `json:"gbps,omitempty"`
	// Flops and Bytes are per iteration.
	Flops float64 `json:"flops,omitempty"`
	Bytes float64 `json:"bytes,omitempty"`
	// Roofline places the case against the GPU model's peaks.
	Roofline *Roofline         `json:"roofline,omitempty"`
	Config   map[string]string `json:"config,omitempty"`
	// SamplesNS are the merged raw samples (benchmark.json only).
	SamplesNS []float64 `json:"samples_ns,omitempty"`
}

// GateResult is a benchmark's comparison against its baseline.
type GateResult struct {
	// Baseline is the baseline file as the step names it; SHA256 its digest.
	Baseline string `json:"baseline"`
	SHA256   string `json:"sha256"`
	// Enforced is true when the step has a gate: SLOWER fails the step.
	Enforced bool `json:"enforced"`
	// Refused says why no comparison was made (hardware mismatch).
	Refused string `json:"refused,omitempty"`
	// Report is the comparison; nil when Refused.
	Report *Report `json:"report,omitempty"`
}

// Execute runs the benchmark step s.Step.
func (Benchmark) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	resFile, err := resultsFile(s)
	if err != nil {
		return nil, err
	}
	hw, err := HardwareFromRecord(s.Hardware)
	if err != nil {
		return nil, err
	}
	seeds := s.Step.Seeds
	d := &BenchmarkDetails{Hardware: hw, Warmup: s.Step.Warmup, Repeats: s.Step.Repeats, Seeds: seeds}
	out := &step.Outcome{Status: step.Passed}
	type run struct {
		seed    int
		results *Results
	}
	var runs []run
	rounds := seeds
	if len(rounds) == 0 {
		rounds = []int{-1} // one run, no GPUATTEST_SEED
	}
	var failures []string
	for _, seed := range rounds {
		env := []string{"GPUATTEST_WARMUP=" + strconv.Itoa(s.Step.Warmup)}
		if s.Step.Repeats > 0 {
			env = append(env, "GPUATTEST_REPEATS="+strconv.Itoa(s.Step.Repeats))
		}
		if seed >= 0 {
			env = append(env, "GPUATTEST_SEED="+strconv.Itoa(seed))
		}
		if err := resFile.remove(); err != nil {
			return nil, err
		}
		res, err := runStep(ctx, s, env...)
		if err != nil {
			return nil, err
		}
		out.ExitCode = exitPtr(res)
		r, b, err := readResults(resFile, s.Step.Format)
		if err != nil {
			if res.ExitCode != 0 {
				return nil, fmt.Errorf("command exited %d and left no usable results: %w", res.ExitCode, err)
			}
			return nil, err
		}
		name := "results" + filepath.Ext(resFile.rel)
		if seed >= 0 {
			name = fmt.Sprintf("results-seed%d%s", seed, filepath.Ext(resFile.rel))
		}
		f, err := writeBytesToStep(s, name, resultsKind(r), b)
		if err != nil {
			return nil, err
		}
		out.Results = append(out.Results, f)
		if res.ExitCode != 0 {
			failures = append(failures, fmt.Sprintf("exit code %d%s", res.ExitCode, seedSuffix(seed)))
		}
		runs = append(runs, run{seed, r})
	}
	// Merge.
	for _, rn := range runs {
		r := rn.results
		if d.Backend == "" {
			d.Backend, d.Device = r.Backend, r.Device
		} else if r.Backend != d.Backend || r.Device != d.Device {
			failures = append(failures, fmt.Sprintf("seed %d ran on %s/%s, earlier seeds on %s/%s", rn.seed, r.Backend, r.Device, d.Backend, d.Device))
		}
		c := r.Count()
		d.Counts.Total += c.Total
		d.Counts.Passed += c.Passed
		d.Counts.Failed += c.Failed
		d.Counts.Errored += c.Errored
		d.Counts.Skipped += c.Skipped
		for _, k := range r.Cases {
			mergeCase(d, k)
		}
	}
	d.Hardware.Backend = d.Backend
	if hw.GPUModel == "" && d.Device != "" {
		d.Hardware.GPUModel = d.Device
	}
	if d.Counts.Total == 0 {
		return nil, fmt.Errorf("results %s hold no case\nhint: a benchmark needs at least one case with samples_ns", s.Step.Results)
	}
	model := d.Device
	if model == "" {
		model = hw.GPUModel
	}
	var measured int
	for i := range d.Cases {
		c := &d.Cases[i]
		switch c.Status {
		case StatusFailed, StatusError:
			failures = append(failures, fmt.Sprintf("case %s %s: %s", c.Name, c.Status, c.Message))
		case StatusPassed:
			if len(c.SamplesNS) == 0 {
				failures = append(failures, fmt.Sprintf("case %s passed but reports no samples_ns", c.Name))
			}
		}
		if len(c.SamplesNS) == 0 {
			continue
		}
		measured++
		sum, err := stats.Summarize(c.SamplesNS)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", c.Name, err)
		}
		c.Stats = &sum
		if sum.Median > 0 {
			c.GFLOPS = c.Flops / sum.Median // flop/ns = GFLOP/s
			c.GBPS = c.Bytes / sum.Median
		}
		c.Roofline = roofline(d.Backend, model, hw.Simulated, c.Flops, c.Bytes, sum.Median, c.Config)
	}
	if measured == 0 {
		failures = append(failures, "no case has samples: nothing was measured")
	}
	// Gate.
	if s.Step.Baseline != "" {
		g, err := gate(s, d, hw)
		if err != nil {
			return nil, err
		}
		d.Gate = g
		if g.Refused != "" && g.Enforced {
			failures = append(failures, "baseline gate: "+g.Refused)
		} else if g.Enforced && g.Report.Failed {
			var bad []string
			for _, c := range g.Report.Cases {
				if c.Verdict == stats.Slower || c.Verdict == Missing {
					bad = append(bad, fmt.Sprintf("%s %s (%s)", c.Name, c.Verdict, c.Reason))
				}
			}
			failures = append(failures, "baseline gate: "+strings.Join(bad, "; "))
		}
	} else if s.Step.Gate != nil {
		return nil, fmt.Errorf("step %s has a gate but no baseline\nhint: add baseline: path/to/baseline.json", s.Step.ID)
	}
	// Reports.
	files, err := writeBenchmarkReports(s, d)
	if err != nil {
		return nil, err
	}
	out.Results = append(out.Results, files...)
	details := *d
	details.Cases = slices.Clone(d.Cases)
	for i := range details.Cases {
		details.Cases[i].SamplesNS = nil
	}
	out.Details = &details
	if d.Counts.Skipped > 0 {
		s.Logger.Info("benchmark cases skipped", "skipped", d.Counts.Skipped)
	}
	if len(failures) > 0 {
		out.Status = step.Failed
		out.Reason = strings.Join(failures, "; ")
	}
	return out, nil
}

func seedSuffix(seed int) string {
	if seed < 0 {
		return ""
	}
	return fmt.Sprintf(" (seed %d)", seed)
}

var statusRank = map[string]int{StatusPassed: 0, StatusSkipped: 1, StatusFailed: 2, StatusError: 3}

func mergeCase(d *BenchmarkDetails, k Case) {
	key := CaseKey(k.Name)
	for i := range d.Cases {
		c := &d.Cases[i]
		if c.Name != key {
			continue
		}
		c.SamplesNS = append(c.SamplesNS, k.SamplesNS...)
		if statusRank[k.Status] > statusRank[c.Status] {
			c.Status, c.Message = k.Status, k.Message
		}
		return
	}
	cfg := map[string]string{}
	for kk, v := range k.Config {
		if kk != "seed" {
			cfg[kk] = v
		}
	}
	if len(cfg) == 0 {
		cfg = nil
	}
	d.Cases = append(d.Cases, BenchmarkCase{
		Name: key, Kernel: k.Kernel, Status: k.Status, Message: k.Message,
		Flops: k.Flops, Bytes: k.Bytes, Config: cfg, SamplesNS: slices.Clone(k.SamplesNS),
	})
}

// baselineFile is a step's baseline: relative to the pipeline file's
// directory, like the pipeline's workdir, and inside the root.
func baselineFile(s *step.Context) (*rootedFile, error) {
	rel, err := s.FileRel("baseline", s.Step.Baseline)
	if err != nil {
		return nil, err
	}
	return newRootedFile(s, rel, s.Step.Baseline), nil
}

func gate(s *step.Context, d *BenchmarkDetails, hw Hardware) (*GateResult, error) {
	f, err := baselineFile(s)
	if err != nil {
		return nil, err
	}
	b, err := f.read()
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", s.Step.ID, readSampleSetError(f.abs, "baseline", err))
	}
	base, err := parseSampleSet(f.abs, b)
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", s.Step.ID, err)
	}
	g := &GateResult{Baseline: s.Step.Baseline, SHA256: f.file(b, "").SHA256, Enforced: s.Step.Gate != nil}
	cand := &SampleSet{Kind: "benchmark", Hardware: d.Hardware}
	for _, c := range d.Cases {
		if len(c.SamplesNS) > 0 {
			cand.Cases = append(cand.Cases, SampleCase{Name: c.Name, SamplesNS: c.SamplesNS, Flops: c.Flops, Bytes: c.Bytes})
		}
	}
	var opts []CompareOption
	if gt := s.Step.Gate; gt != nil {
		if gt.Threshold != "" {
			t, err := pipeline.ParsePercent(gt.Threshold)
			if err != nil {
				return nil, fmt.Errorf("step %s: gate.threshold: %w", s.Step.ID, err)
			}
			opts = append(opts, WithThreshold(t))
		}
		if gt.Alpha != 0 {
			opts = append(opts, WithAlpha(gt.Alpha))
		}
		if gt.AllowHardwareMismatch {
			opts = append(opts, AllowHardwareMismatch())
		}
	}
	rep, err := Compare(base, cand, opts...)
	if errors.Is(err, ErrHardwareMismatch) {
		s.Logger.Warn("baseline gate refused", "err", err)
		g.Refused = strings.ReplaceAll(err.Error(), "\n", " ")
		return g, nil
	}
	if err != nil {
		return nil, fmt.Errorf("step %s: comparing with the baseline: %w", s.Step.ID, err)
	}
	if len(rep.HardwareMismatch) > 0 {
		s.Logger.Warn("COMPARING ACROSS DIFFERENT HARDWARE (allowHardwareMismatch)", "differences", strings.Join(rep.HardwareMismatch, "; "))
	}
	g.Report = rep
	return g, nil
}

func writeBenchmarkReports(s *step.Context, d *BenchmarkDetails) ([]step.File, error) {
	var files []step.File
	full := *d
	full.Schema = BenchmarkSchemaID
	f, err := writeStepFile(s, "benchmark.json", "benchmark", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(&full)
	})
	if err != nil {
		return nil, err
	}
	files = append(files, f)
	f, err = writeStepFile(s, "samples.csv", "samples", func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write([]string{"case", "iteration", "ns"}); err != nil {
			return err
		}
		for _, c := range d.Cases {
			for i, v := range c.SamplesNS {
				if err := cw.Write([]string{c.Name, strconv.Itoa(i), strconv.FormatFloat(v, 'f', -1, 64)}); err != nil {
					return err
				}
			}
		}
		cw.Flush()
		return cw.Error()
	})
	if err != nil {
		return nil, err
	}
	files = append(files, f)
	verdicts := map[string]CaseComparison{}
	if d.Gate != nil && d.Gate.Report != nil {
		for _, c := range d.Gate.Report.Cases {
			verdicts[c.Name] = c
		}
	}
	var jc []JUnitCase
	for _, c := range d.Cases {
		j := JUnitCase{Name: c.Name, Classname: "benchmark." + s.Step.ID, Status: c.Status, Message: c.Message}
		if c.Stats != nil {
			j.Seconds = c.Stats.Median * float64(c.Stats.N) / 1e9
			j.Output = fmt.Sprintf("n=%d median=%.0fns cv=%.2f%%", c.Stats.N, c.Stats.Median, 100*c.Stats.CV)
		}
		if c.Status == StatusPassed && len(c.SamplesNS) == 0 {
			j.Status, j.Message = StatusFailed, "no samples"
		}
		if v, ok := verdicts[c.Name]; ok {
			j.Output += "\nbaseline: " + string(v.Verdict) + ": " + v.Reason
			if d.Gate.Enforced && (v.Verdict == stats.Slower || v.Verdict == Missing) && j.Status == StatusPassed {
				j.Status, j.Message = StatusFailed, string(v.Verdict)+": "+v.Reason
			}
		}
		jc = append(jc, j)
	}
	if d.Gate != nil && d.Gate.Report != nil {
		for _, v := range d.Gate.Report.Cases {
			if v.Verdict == Missing {
				st := StatusPassed
				if d.Gate.Enforced {
					st = StatusFailed
				}
				jc = append(jc, JUnitCase{Name: v.Name, Classname: "benchmark." + s.Step.ID, Status: st, Message: "MISSING: " + v.Reason})
			}
		}
	}
	f, err = writeStepFile(s, "junit.xml", "junit", func(w io.Writer) error { return WriteJUnit(w, "gpuattest."+s.Step.ID, jc) })
	if err != nil {
		return nil, err
	}
	return append(files, f), nil
}
