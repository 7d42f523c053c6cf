package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/jsonstrict"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// Schemas of the JSON files this package writes besides results.
const (
	BenchmarkSchemaID = "https://gpuattest.dev/benchmark/v1"
	BaselineSchemaID  = "https://gpuattest.dev/baseline/v1"
)

// SampleSet is a set of timing samples per case, with the hardware they
// were taken on: what the gate compares. LoadSampleSet reads one from a
// results file, a benchmark.json summary or a baseline file.
type SampleSet struct {
	// Path is the file it was read from.
	Path string `json:"path,omitempty"`
	// Kind is "results", "benchmark" or "baseline".
	Kind string `json:"kind"`
	// Hardware is where the samples were taken.
	Hardware Hardware `json:"hardware"`
	// Cases are the cases by key, in file order.
	Cases []SampleCase `json:"cases"`
}

// SampleCase is one case's samples.
type SampleCase struct {
	// Name is the case key: the case name without its seed=N segment, so
	// that runs with several seeds merge.
	Name string `json:"name"`
	// SamplesNS are the per-iteration times in nanoseconds.
	SamplesNS []float64 `json:"samples_ns"`
	// Flops and Bytes are per iteration, when known.
	Flops float64 `json:"flops,omitempty"`
	Bytes float64 `json:"bytes,omitempty"`
}

// CaseKey returns the key under which a case's samples merge across seeds:
// its name with any "seed=N" path segment removed.
func CaseKey(name string) string {
	parts := strings.Split(name, "/")
	out := parts[:0]
	for _, p := range parts {
		if !strings.HasPrefix(p, "seed=") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return name
	}
	return strings.Join(out, "/")
}

// mergeInto appends c's samples to the case with the same key in set.
func mergeInto(set *[]SampleCase, c Case) {
	k := CaseKey(c.Name)
	for i := range *set {
		if (*set)[i].Name == k {
			(*set)[i].SamplesNS = append((*set)[i].SamplesNS, c.SamplesNS...)
			return
		}
	}
	*set = append(*set, SampleCase{Name: k, SamplesNS: slices.Clone(c.SamplesNS), Flops: c.Flops, Bytes: c.Bytes})
}

// SamplesFromResults turns results into a sample set, merging seeds.
// Cases without samples are left out.
func SamplesFromResults(r *Results) *SampleSet {
	s := &SampleSet{Kind: "results", Hardware: Hardware{Backend: r.Backend, GPUModel: r.Device}}
	for _, c := range r.Cases {
		if len(c.SamplesNS) > 0 {
			mergeInto(&s.Cases, c)
		}
	}
	return s
}

// ErrNoBaseline is returned when a baseline file does not exist: the gate
// must fail, never skip.
var ErrNoBaseline = errors.New("baseline not found")

// LoadSampleSet reads a results file (gpuattest JSON), a benchmark.json
// written by a benchmark step, or a baseline file. A missing file is an
// error wrapping ErrNoBaseline when what is "baseline".
func LoadSampleSet(path, what string) (*SampleSet, error) {
	b, err := limits.ReadFile(path, limits.ResultsBytes, what+" file")
	if err != nil {
		return nil, readSampleSetError(path, what, err)
	}
	return parseSampleSet(path, b)
}

func readSampleSetError(path, what string, err error) error {
	if errors.Is(err, os.ErrNotExist) && what == "baseline" {
		return fmt.Errorf("%w: %s does not exist\nhint: create one with gpuattest baseline save RUNDIR --out %s", ErrNoBaseline, path, path)
	}
	return fmt.Errorf("reading %s %s: %w", what, path, err)
}

// parseSampleSet parses b, read from path, as LoadSampleSet does.
func parseSampleSet(path string, b []byte) (*SampleSet, error) {
	top, err := jsonstrict.CheckObject(b, maxResultsDepth)
	if err != nil {
		var je *jsonstrict.Error
		if errors.As(err, &je) {
			return nil, problem.List{je.Problem(path)}
		}
		return nil, err
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if raw, ok := top["schema"]; ok {
		if err := json.Unmarshal(raw, &head.Schema); err != nil {
			return nil, problem.List{{File: path, Path: "schema", Message: "expected a string"}}
		}
	}
	switch head.Schema {
	case ResultsSchemaID:
		r, err := parseResultsJSON(path, b)
		if err != nil {
			return nil, err
		}
		s := SamplesFromResults(r)
		s.Path = path
		return s, nil
	case BenchmarkSchemaID, BaselineSchemaID:
		var f struct {
			Hardware Hardware     `json:"hardware"`
			Cases    []SampleCase `json:"cases"`
		}
		// Benchmark and baseline files carry more than the samples
		// (their hardware, stats): only these fields are read.
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, problem.List{{File: path, Message: err.Error(), Hint: "expected a " + head.Schema + " file"}}
		}
		kind := "benchmark"
		if head.Schema == BaselineSchemaID {
			kind = "baseline"
		}
		s := &SampleSet{Path: path, Kind: kind, Hardware: f.Hardware}
		first := map[string]int{}
		for i, c := range f.Cases {
			if c.Name == "" {
				return nil, problem.List{{File: path, Path: fmt.Sprintf("cases[%d].name", i), Message: "empty: expected the case's name"}}
			}
			if j, dup := first[c.Name]; dup {
				return nil, problem.List{{File: path, Path: fmt.Sprintf("cases[%d].name", i), Message: fmt.Sprintf("duplicate case name %q (first at cases[%d])", c.Name, j),
					Hint: "one case, one name: a second copy would replace the first's samples"}}
			}
			first[c.Name] = i
			for k, v := range c.SamplesNS {
				if !(v > 0) {
					return nil, problem.List{{File: path, Path: fmt.Sprintf("cases[%d].samples_ns[%d]", i, k), Message: fmt.Sprintf("%v is not a positive duration", v)}}
				}
			}
			if len(c.SamplesNS) > 0 {
				s.Cases = append(s.Cases, c)
			}
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s: /schema: %q is not a format gpuattest compares\nhint: expected a results file (%s), a benchmark.json (%s) or a baseline (%s)", path, head.Schema, ResultsSchemaID, BenchmarkSchemaID, BaselineSchemaID)
}

// uniqueCases refuses a sample set with two cases of one name: the
// comparison would judge only one of them.
func uniqueCases(s *SampleSet) error {
	seen := map[string]bool{}
	for i, c := range s.Cases {
		if seen[c.Name] {
			return fmt.Errorf("%s: cases[%d]: duplicate case name %q", orUnknown(s.Path), i, c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// RefusalMessage says why a report was refused for differing hardware,
// with a hint; empty when it was not.
func (r *Report) RefusalMessage() string {
	if !r.HardwareRefused {
		return ""
	}
	return fmt.Sprintf("refusing to compare samples from different hardware (%s)\nhint: re-record the baseline on this hardware, compare against a same-run reference, or pass --allow-hardware-mismatch (gate.allowHardwareMismatch) to compare anyway", strings.Join(r.HardwareMismatch, "; "))
}

// refuseHardware fills rep with an AMBIGUOUS case for every case of
// either side: samples from different hardware cannot tell a regression.
func refuseHardware(rep *Report, baseline, candidate *SampleSet) *Report {
	reason := "different hardware (" + strings.Join(rep.HardwareMismatch, "; ") + "): not compared"
	seen := map[string]bool{}
	add := func(name string, b, c []float64) {
		if seen[name] {
			return
		}
		seen[name] = true
		cmp := stats.Comparison{BaselineN: len(b), CandidateN: len(c), Verdict: stats.Ambiguous, Reason: reason}
		if len(b) > 0 {
			cmp.BaselineMedian = stats.Median(b)
		}
		if len(c) > 0 {
			cmp.CandidateMedian = stats.Median(c)
		}
		rep.Cases = append(rep.Cases, CaseComparison{Name: name, Comparison: cmp})
	}
	cand := map[string][]float64{}
	for _, c := range candidate.Cases {
		cand[c.Name] = c.SamplesNS
	}
	for _, b := range baseline.Cases {
		add(b.Name, b.SamplesNS, cand[b.Name])
	}
	for _, c := range candidate.Cases {
		add(c.Name, nil, c.SamplesNS)
	}
	rep.Counts[stats.Ambiguous] = len(rep.Cases)
	rep.HardwareRefused, rep.Failed = true, true
	return rep
}

// CaseComparison is one case of a comparison report.
type CaseComparison struct {
	// Name is the case key.
	Name string `json:"name"`
	stats.Comparison
}

// Report is the outcome of comparing a candidate with a baseline.
type Report struct {
	// Baseline and Candidate say what was compared.
	Baseline  Endpoint `json:"baseline"`
	Candidate Endpoint `json:"candidate"`
	// Gate holds the threshold and alpha used.
	Gate stats.Gate `json:"gate"`
	// HardwareMismatch lists the differences between the two sides'
	// hardware.
	HardwareMismatch []string `json:"hardware_mismatch,omitempty"`
	// HardwareRefused is true when the hardware differs and the
	// comparison was not allowed: every case is then AMBIGUOUS (samples
	// from different hardware say nothing about a regression) and the
	// report fails.
	HardwareRefused bool `json:"hardware_refused,omitempty"`
	// Cases are the per-case comparisons, baseline order then new cases.
	Cases []CaseComparison `json:"cases"`
	// Counts tallies verdicts.
	Counts map[stats.Verdict]int `json:"counts"`
	// Failed is true when any case is SLOWER or MISSING, or AMBIGUOUS
	// with OnAmbiguous fail, or the hardware was refused.
	Failed bool `json:"failed"`
	// OnAmbiguous is what an AMBIGUOUS case does to an enforced
	// benchmark gate: "fail" or "warn" (gate.onAmbiguous); empty in a
	// report that no step enforced (gpuattest compare decides itself).
	OnAmbiguous string `json:"on_ambiguous,omitempty"`
}

// fails reports whether verdict v fails the report's gate: SLOWER and
// MISSING always, AMBIGUOUS when OnAmbiguous is fail.
func (r *Report) fails(v stats.Verdict) bool {
	return v == stats.Slower || v == stats.Missing || v == stats.Ambiguous && r.OnAmbiguous == pipeline.OnAmbiguousFail
}

// Endpoint names one side of a comparison.
type Endpoint struct {
	Path     string   `json:"path,omitempty"`
	Kind     string   `json:"kind"`
	Hardware Hardware `json:"hardware"`
}

// CompareOption configures Compare.
type CompareOption func(*compareOptions) error

type compareOptions struct {
	gate          stats.Gate
	allowMismatch bool
}

// WithThreshold sets the smallest relative slowdown that counts (0.03 = 3 %).
func WithThreshold(t float64) CompareOption {
	return func(o *compareOptions) error {
		if t < 0 || t >= 1 {
			return fmt.Errorf("threshold %v: expected a fraction in [0, 1), such as 0.03 for 3%%", t)
		}
		o.gate.Threshold = t
		return nil
	}
}

// WithAlpha sets the significance level of the Mann-Whitney test.
func WithAlpha(a float64) CompareOption {
	return func(o *compareOptions) error {
		if a <= 0 || a >= 1 {
			return fmt.Errorf("alpha %v: expected a level in (0, 1), such as 0.01", a)
		}
		o.gate.Alpha = a
		return nil
	}
}

// AllowHardwareMismatch lets Compare judge samples taken on different
// hardware; the report then lists the differences in HardwareMismatch.
func AllowHardwareMismatch() CompareOption {
	return func(o *compareOptions) error { o.allowMismatch = true; return nil }
}

// Compare judges each case of candidate against baseline. When the
// hardware differs and AllowHardwareMismatch was not given, every case is
// AMBIGUOUS with the differing fields, and the report fails.
func Compare(baseline, candidate *SampleSet, opts ...CompareOption) (*Report, error) {
	o := compareOptions{gate: stats.Gate{Threshold: stats.DefaultThreshold, Alpha: stats.DefaultAlpha}}
	for _, f := range opts {
		if err := f(&o); err != nil {
			return nil, err
		}
	}
	if len(baseline.Cases) == 0 {
		return nil, fmt.Errorf("baseline %s holds no case with samples: nothing to gate on", orUnknown(baseline.Path))
	}
	rep := &Report{
		Baseline:  Endpoint{Path: baseline.Path, Kind: baseline.Kind, Hardware: baseline.Hardware},
		Candidate: Endpoint{Path: candidate.Path, Kind: candidate.Kind, Hardware: candidate.Hardware},
		Gate:      o.gate,
		Counts:    map[stats.Verdict]int{},
	}
	if diff := baseline.Hardware.Differences(candidate.Hardware); len(diff) > 0 {
		rep.HardwareMismatch = diff
		if !o.allowMismatch {
			return refuseHardware(rep, baseline, candidate), nil
		}
	}
	if err := uniqueCases(baseline); err != nil {
		return nil, err
	}
	if err := uniqueCases(candidate); err != nil {
		return nil, err
	}
	cand := map[string]SampleCase{}
	for _, c := range candidate.Cases {
		cand[c.Name] = c
	}
	seen := map[string]bool{}
	for _, b := range baseline.Cases {
		seen[b.Name] = true
		c, ok := cand[b.Name]
		if !ok {
			rep.Cases = append(rep.Cases, CaseComparison{Name: b.Name, Comparison: stats.Comparison{
				BaselineN: len(b.SamplesNS), BaselineMedian: stats.Median(b.SamplesNS),
				Verdict: stats.Missing, Reason: "in the baseline but not in the candidate",
			}})
			continue
		}
		cmp, err := stats.Compare(b.SamplesNS, c.SamplesNS, o.gate)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", b.Name, err)
		}
		rep.Cases = append(rep.Cases, CaseComparison{Name: b.Name, Comparison: cmp})
	}
	for _, c := range candidate.Cases {
		if !seen[c.Name] {
			rep.Cases = append(rep.Cases, CaseComparison{Name: c.Name, Comparison: stats.Comparison{
				CandidateN: len(c.SamplesNS), CandidateMedian: stats.Median(c.SamplesNS),
				Verdict: stats.New, Reason: "not in the baseline: nothing to compare with",
			}})
		}
	}
	for _, c := range rep.Cases {
		rep.Counts[c.Verdict]++
		if c.Verdict == stats.Slower || c.Verdict == stats.Missing {
			rep.Failed = true
		}
	}
	return rep, nil
}
