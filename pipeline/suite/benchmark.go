package suite

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/floors"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Benchmark executes benchmark steps. Without a reference it runs the
// suite once per seed; with one it runs the candidate and the reference
// Rounds times each, interleaved in randomised ABBA blocks. Every
// invocation gets GPUATTEST_REPEATS (and, for repeats: auto,
// GPUATTEST_PRECISION, GPUATTEST_MAX_TIME and GPUATTEST_MIN_REPEATS),
// GPUATTEST_SEED, and GPUATTEST_WARMUP when the step sets warmup: (left
// unset, the suite's own default applies). It merges the raw samples per case, computes the
// statistics, throughput and roofline, judges the candidate against the
// reference (paired, invocation by invocation) and against the baseline
// when the step has one, and writes benchmark.json, samples.csv and
// junit.xml into the step directory.
type Benchmark struct {
	// Rand orders the ABBA blocks; nil draws a seed from crypto/rand (the
	// seed is recorded in the details either way).
	Rand *rand.Rand
	// Releases verifies and writes a reference's published release
	// (reference.release) before the step runs anything; without it such
	// a step is an error.
	Releases ReleaseFetcher
}

var _ step.Executor = Benchmark{}

// BenchmarkDetails is a benchmark step's facts (Outcome.Details). The same
// struct, with samples and a schema, is benchmark.json.
type BenchmarkDetails struct {
	// Schema is BenchmarkSchemaID in benchmark.json, empty in Details.
	Schema string `json:"schema,omitempty"`
	// Backend and Device are what the results files report.
	Backend string `json:"backend"`
	Device  string `json:"device,omitempty"`
	// DeviceUUID and CUDAVisibleDevices are the GPU the candidate's cases
	// ran on and CUDA_VISIBLE_DEVICES as it saw it, when its results say.
	DeviceUUID         string `json:"device_uuid,omitempty"`
	CUDAVisibleDevices string `json:"cuda_visible_devices,omitempty"`
	// Hardware is where the samples were taken (from the hardware record).
	Hardware Hardware `json:"hardware"`
	// Warmup, Repeats and Seeds are the knobs passed to the suite; Warmup
	// is nil when the step leaves it to the suite's default.
	Warmup  *int   `json:"warmup,omitempty"`
	Repeats string `json:"repeats,omitempty"`
	Seeds   []int  `json:"seeds,omitempty"`
	// Precision and MaxTime are repeats: auto's stopping rule.
	Precision float64 `json:"precision,omitempty"`
	MaxTime   string  `json:"max_time,omitempty"`
	// Counts tallies case statuses over all invocations of the candidate.
	Counts Counts `json:"counts"`
	// Cases are the candidate's merged cases.
	Cases []BenchmarkCase `json:"cases"`
	// Reference is the same-run reference and the paired verdicts, when
	// the step has one.
	Reference *ReferenceResult `json:"reference,omitempty"`
	// Gate is the baseline comparison, when the step names a baseline.
	Gate *GateResult `json:"gate,omitempty"`
	// Floors are the memory-bandwidth floors of the GPUs' models
	// (pipeline/floors) the bandwidth cases were judged against, or "no
	// floor: not judged".
	Floors []attest.AppliedFloor `json:"floors,omitempty"`
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
	// Sampling says how adaptive repeats stopped (repeats: auto).
	Sampling *Sampling `json:"sampling,omitempty"`
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
	// Clocks are the GPU's clocks and clock-event reasons around the
	// case's samples (from the step's telemetry, when it has any).
	Clocks *CaseClocks `json:"clocks,omitempty"`
	// windows are the invocations' sampling windows (ConfigSampledFrom).
	windows []window
}

// Sampling is how a case's adaptive repeats stopped, over all invocations.
type Sampling struct {
	// Stops counts the invocations by stop reason (precision, max_time,
	// max_samples).
	Stops map[string]int `json:"stops"`
	// Samples is the number of samples over all invocations.
	Samples int `json:"samples"`
	// Precision is the achieved half-width of the 95 % interval of the
	// merged median, relative to it.
	Precision float64 `json:"precision"`
}

// ReferenceResult is a benchmark's same-run reference and the verdicts of
// the candidate against it.
type ReferenceResult struct {
	// Run is the reference command as the step gives it; Results its
	// results file.
	Run     string `json:"run"`
	Results string `json:"results"`
	// Backend and Device are what the reference's results report.
	Backend string `json:"backend"`
	Device  string `json:"device,omitempty"`
	// Rounds is the number of invocations of each side: the pairs.
	Rounds int `json:"rounds"`
	// Sequential is how rounds: auto sampled; nil for rounds: N.
	Sequential *SequentialRounds `json:"sequential,omitempty"`
	// Order is the invocation order, one block per word: R is the
	// reference, C the candidate ("RCCR CRRC ...").
	Order string `json:"order"`
	// OrderSeed seeded the random choice of each block's order.
	OrderSeed uint64 `json:"order_seed"`
	// Counts tallies the reference's case statuses.
	Counts Counts `json:"counts"`
	// Cases are the reference's merged cases.
	Cases []BenchmarkCase `json:"cases"`
	// Report is the paired comparison; SLOWER and MISSING fail the step.
	Report *Report `json:"report"`
	// Release is the published release the reference ran against
	// (reference.release), as verified before the step ran.
	Release *ReferenceRelease `json:"release,omitempty"`
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

// Benchmark sides.
const (
	sideCandidate = "candidate"
	sideReference = "reference"
)

// invocation is one run of one side's command.
type invocation struct {
	side  string
	index int // among the side's invocations, from 0
	seed  int // -1: none
	res   *Results
	exit  int
}

// benchRun is one benchmark step in progress.
type benchRun struct {
	s        *step.Context
	d        *BenchmarkDetails
	out      *step.Outcome
	cand     []invocation
	ref      []invocation
	failures []string
	// release is the reference's verified release and refDir the
	// absolute directory of its files; nil and empty without one.
	release *ReferenceRelease
	refDir  string
	// decided maps the cases rounds: auto decided to the pairs they were
	// decided after.
	decided map[string]int
	// warnings are the step's warnings (Outcome.Warnings).
	warnings []string
	// look0 is the progress of rounds: auto's last look.
	look0 runtypes.Progress
}

// Execute runs the benchmark step s.Step.
func (b Benchmark) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	hw := HardwareFromRecord(s.Hardware)
	var err error
	st := s.Step
	d := &BenchmarkDetails{Hardware: hw, Warmup: st.Warmup, Repeats: st.Repeats.String(), Seeds: st.Seeds}
	if st.Repeats.Auto {
		if d.Precision = st.Precision.Fraction; !(d.Precision > 0 && d.Precision < 1) {
			return nil, fmt.Errorf("step %s: precision %q: expected a percentage above 0%% and below 100%%, such as 1%%", st.ID, st.Precision)
		}
		if st.MaxTime.Value() <= 0 {
			return nil, fmt.Errorf("step %s: maxTime %q: expected a positive duration such as 2m", st.ID, st.MaxTime)
		}
		d.MaxTime = st.MaxTime.Value().String()
	}
	br := &benchRun{s: s, d: d, out: &step.Outcome{Status: step.Passed}}
	if st.Reference != nil && st.Reference.Release != "" {
		// Nothing runs before the release verified.
		if br.release, br.refDir, err = b.fetchRelease(ctx, s); err != nil {
			return nil, err
		}
	}
	if st.Reference != nil {
		err = br.runInterleaved(ctx, b.Rand)
	} else {
		err = br.runSeeds(ctx)
	}
	if err != nil {
		return nil, err
	}
	return br.finish()
}

// runSeeds runs the candidate once per seed (once when there are none).
func (br *benchRun) runSeeds(ctx context.Context) error {
	seeds := br.s.Step.Seeds
	if len(seeds) == 0 {
		seeds = []int{-1}
	}
	for i, seed := range seeds {
		inv, err := br.invoke(ctx, sideCandidate, i, seed)
		if err != nil {
			return err
		}
		br.cand = append(br.cand, *inv)
	}
	return nil
}

// runInterleaved runs both sides in ABBA blocks whose order is drawn at
// random, so that drift in the machine's state (load, clocks,
// temperature) hits both sides alike: rounds: N pairs, or, with rounds:
// auto, until the gate is decided or its budget runs out
// (runSequential). Block b uses seed Seeds[b mod len(Seeds)] for both
// sides.
func (br *benchRun) runInterleaved(ctx context.Context, r *rand.Rand) error {
	st := br.s.Step
	r, seed, err := orderRand(r)
	if err != nil {
		return err
	}
	ref := &ReferenceResult{Run: st.Reference.Run.String(), Results: st.Reference.Results, OrderSeed: seed, Release: br.release}
	br.d.Reference = ref
	var order []bool
	if st.Rounds.Auto || st.Rounds.IsZero() {
		if order, err = br.runSequential(ctx, r); err != nil {
			return err
		}
	} else {
		order = abbaOrder(st.Rounds.N, r)
		if err := br.runOrder(ctx, order); err != nil {
			return err
		}
	}
	ref.Rounds, ref.Order = len(br.cand), orderString(order)
	return nil
}

// abbaOrder returns the invocation order of rounds pairs (true: the
// candidate): blocks of RCCR or CRRC chosen at random, a last RC or CR when
// rounds is odd. The i-th invocations of the two sides always sit next to
// each other, which makes them a pair.
func abbaOrder(rounds int, r *rand.Rand) []bool {
	out := make([]bool, 0, 2*rounds)
	for left := rounds; left > 0; left -= 2 {
		c := r.IntN(2) == 0 // the candidate first
		if left >= 2 {
			out = append(out, c, !c, !c, c)
		} else {
			out = append(out, c, !c)
		}
	}
	return out
}

func orderString(order []bool) string {
	var b strings.Builder
	for i, c := range order {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		if c {
			b.WriteByte('C')
		} else {
			b.WriteByte('R')
		}
	}
	return b.String()
}

// knobs is the environment every invocation of either side gets.
func (br *benchRun) knobs(seed int) []string {
	st := br.s.Step
	var env []string
	// Only a warmup the step sets is exported: GPUATTEST_WARMUP=0 would
	// override the suite's own default (the harness warms up 3 times).
	if st.Warmup != nil {
		env = append(env, "GPUATTEST_WARMUP="+strconv.Itoa(*st.Warmup))
	}
	switch {
	case st.Repeats.Auto:
		env = append(env, "GPUATTEST_REPEATS="+pipeline.RepeatsAuto,
			"GPUATTEST_PRECISION="+strconv.FormatFloat(br.d.Precision, 'g', -1, 64),
			"GPUATTEST_MAX_TIME="+strconv.FormatFloat(st.MaxTime.Value().Seconds(), 'g', -1, 64),
			"GPUATTEST_MIN_REPEATS="+strconv.Itoa(stats.MinSamples))
	case st.Repeats.N > 0:
		env = append(env, "GPUATTEST_REPEATS="+strconv.Itoa(st.Repeats.N))
	}
	if seed >= 0 {
		env = append(env, "GPUATTEST_SEED="+strconv.Itoa(seed))
	}
	return env
}

// invoke runs one side once, reads its results and copies them into the
// step directory.
func (br *benchRun) invoke(ctx context.Context, side string, index, seed int) (*invocation, error) {
	s := br.s
	cmd, field, results := s.Step.Run, "results", s.Step.Results
	if side == sideReference {
		cmd, field, results = s.Step.Reference.Run, "reference.results", s.Step.Reference.Results
	}
	resFile, err := namedResultsFile(s, field, results)
	if err != nil {
		return nil, err
	}
	if err := resFile.remove(); err != nil {
		return nil, err
	}
	env, ro := br.knobs(seed), []string(nil)
	if side == sideReference && br.refDir != "" {
		env, ro = append(env, ReferenceDirEnv+"="+br.refDir), []string{br.refDir}
	}
	res, err := runCommandWith(ctx, s, cmd, ro, env...)
	if err != nil {
		return nil, err
	}
	if side == sideCandidate {
		br.out.ExitCode = exitPtr(res)
	}
	r, b, err := readResults(resFile, s.Step.Format)
	if err != nil {
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("%s command exited %d and left no usable results: %w", side, res.ExitCode, err)
		}
		return nil, fmt.Errorf("%s: %w", side, err)
	}
	f, err := writeBytesToStep(s, copyName(s, side, index, seed, resFile.rel), resultsKind(r), b)
	if err != nil {
		return nil, err
	}
	br.out.Results = append(br.out.Results, f)
	if res.ExitCode != 0 {
		br.failures = append(br.failures, fmt.Sprintf("%s exit code %d%s", side, res.ExitCode, seedSuffix(seed)))
	}
	inv := &invocation{side: side, index: index, seed: seed, res: r, exit: res.ExitCode}
	br.progress(inv)
	return inv, nil
}

// copyName is the name of an invocation's results in the step directory:
// results-seed1.json for the seeds of a plain benchmark (as before
// references existed), candidate-03.json and reference-03.json with a
// reference.
func copyName(s *step.Context, side string, index, seed int, resPath string) string {
	ext := filepath.Ext(resPath)
	if s.Step.Reference != nil {
		return fmt.Sprintf("%s-%02d%s", side, index+1, ext)
	}
	if seed >= 0 {
		return fmt.Sprintf("results-seed%d%s", seed, ext)
	}
	return "results" + ext
}

func seedSuffix(seed int) string {
	if seed < 0 {
		return ""
	}
	return fmt.Sprintf(" (seed %d)", seed)
}

// finish merges, summarises, judges and reports.
func (br *benchRun) finish() (*step.Outcome, error) {
	if err := br.judge(); err != nil {
		return nil, err
	}
	s, d := br.s, br.d
	files, err := writeBenchmarkReports(s, d)
	if err != nil {
		return nil, err
	}
	out := br.out
	out.Results = append(out.Results, files...)
	out.Details = detailsWithoutSamples(d)
	if d.Counts.Skipped > 0 {
		s.Logger.Info("benchmark cases skipped", "skipped", d.Counts.Skipped)
	}
	if len(br.failures) > 0 {
		out.Status = step.Failed
		out.Reason = strings.Join(br.failures, "; ")
	}
	out.Warnings = br.warnings
	return out, nil
}

// judge merges both sides' invocations, summarises every case and judges
// the candidate against the reference and the baseline, collecting the
// failures; it reads the baseline but writes nothing.
func (br *benchRun) judge() error {
	s, d := br.s, br.d
	var err error
	d.Backend, d.Device, d.Counts, d.Cases, err = br.merge(br.cand)
	if err != nil {
		return err
	}
	if len(br.cand) > 0 {
		br.out.DeviceUUID = br.cand[0].res.DeviceUUID
		d.DeviceUUID, d.CUDAVisibleDevices = br.cand[0].res.DeviceUUID, br.cand[0].res.CUDAVisibleDevices
	}
	d.Hardware.Backend = d.Backend
	if d.Hardware.GPUModel == "" && d.Device != "" {
		d.Hardware.GPUModel = d.Device
	}
	if d.Counts.Total == 0 {
		return fmt.Errorf("results %s hold no case\nhint: a benchmark needs at least one case with samples_ns", s.Step.Results)
	}
	if err := br.summarize(d.Cases, sideCandidate, br.cand); err != nil {
		return err
	}
	br.bandwidthFloors()
	br.clocks()
	if ref := d.Reference; ref != nil {
		ref.Backend, ref.Device, ref.Counts, ref.Cases, err = br.merge(br.ref)
		if err != nil {
			return err
		}
		if ref.Backend != d.Backend || ref.Device != d.Device {
			br.failures = append(br.failures, fmt.Sprintf("the reference ran on %s, the candidate on %s: a same-run comparison needs one device", backendString(ref.Backend, ref.Device), backendString(d.Backend, d.Device)))
		}
		if err := br.summarize(ref.Cases, sideReference, br.ref); err != nil {
			return err
		}
		if ref.Report, err = br.comparePaired(); err != nil {
			return fmt.Errorf("step %s: %w", s.Step.ID, err)
		}
		if ref.Report.Failed {
			br.failures = append(br.failures, "reference gate: "+failedCases(ref.Report))
		}
		br.warnings = append(br.warnings, ambiguousWarnings(sideReference, ref.Report)...)
	}
	if s.Step.Baseline != "" {
		g, err := gate(s, d)
		if err != nil {
			return err
		}
		d.Gate = g
		switch {
		case g.Refused != "" && g.Enforced:
			br.failures = append(br.failures, "baseline gate: "+g.Refused)
		case g.Enforced && g.Report != nil && g.Report.Failed:
			br.failures = append(br.failures, "baseline gate: "+failedCases(g.Report))
		}
		if g.Enforced {
			br.warnings = append(br.warnings, ambiguousWarnings("baseline", g.Report)...)
		}
	}
	return nil
}

func backendString(backend, device string) string {
	if device == "" {
		return backend
	}
	return backend + "/" + device
}

// detailsWithoutSamples is d for run.json: the same facts, no raw samples.
func detailsWithoutSamples(d *BenchmarkDetails) *BenchmarkDetails {
	strip := func(cs []BenchmarkCase) []BenchmarkCase {
		cs = slices.Clone(cs)
		for i := range cs {
			cs[i].SamplesNS = nil
		}
		return cs
	}
	details := *d
	details.Cases = strip(d.Cases)
	if d.Reference != nil {
		ref := *d.Reference
		ref.Cases = strip(ref.Cases)
		details.Reference = &ref
	}
	return &details
}

func failedCases(rep *Report) string {
	var bad []string
	for _, c := range rep.Cases {
		if rep.fails(c.Verdict) {
			bad = append(bad, fmt.Sprintf("%s %s (%s)", c.Name, c.Verdict, c.Reason))
		}
	}
	return strings.Join(bad, "; ")
}

// merge combines one side's invocations into cases by key, tallying
// statuses; every invocation must report the same backend and device.
func (br *benchRun) merge(invs []invocation) (backend, device string, counts Counts, cases []BenchmarkCase, err error) {
	for i, inv := range invs {
		r := inv.res
		if i == 0 {
			backend, device = r.Backend, r.Device
		} else if r.Backend != backend || r.Device != device {
			br.failures = append(br.failures, fmt.Sprintf("%s invocation %d%s ran on %s, earlier ones on %s", inv.side, inv.index+1, seedSuffix(inv.seed),
				backendString(r.Backend, r.Device), backendString(backend, device)))
		}
		c := r.Count()
		counts.Total += c.Total
		counts.Passed += c.Passed
		counts.Failed += c.Failed
		counts.Errored += c.Errored
		counts.Skipped += c.Skipped
		for _, k := range r.Cases {
			cases = mergeCase(cases, k)
		}
	}
	return backend, device, counts, cases, nil
}

// summarize computes each case's statistics, throughput, roofline and
// adaptive-sampling account, and records the failures it finds.
func (br *benchRun) summarize(cases []BenchmarkCase, side string, invs []invocation) error {
	d := br.d
	model := d.Device
	if model == "" {
		model = d.Hardware.GPUModel
	}
	prefix := ""
	if side == sideReference {
		prefix = "reference "
	}
	var measured int
	for i := range cases {
		c := &cases[i]
		switch c.Status {
		case StatusFailed, StatusError:
			br.failures = append(br.failures, fmt.Sprintf("%scase %s %s: %s", prefix, c.Name, c.Status, c.Message))
		case StatusPassed:
			if len(c.SamplesNS) == 0 {
				br.failures = append(br.failures, fmt.Sprintf("%scase %s passed but reports no samples_ns", prefix, c.Name))
			}
		}
		if len(c.SamplesNS) == 0 {
			continue
		}
		measured++
		sum, err := stats.Summarize(c.SamplesNS)
		if err != nil {
			return fmt.Errorf("%scase %s: %w", prefix, c.Name, err)
		}
		c.Stats = &sum
		if sum.Median > 0 {
			c.GFLOPS = c.Flops / sum.Median // flop/ns = GFLOP/s
			c.GBPS = c.Bytes / sum.Median
		}
		c.Roofline = roofline(d.Backend, model, d.Hardware.Simulated, c.Flops, c.Bytes, sum.Median, c.Config)
		if br.s.Step.Repeats.Auto {
			c.Sampling = br.sampling(c, prefix, invs)
		}
	}
	if measured == 0 {
		br.failures = append(br.failures, "no "+prefix+"case has samples: nothing was measured")
	}
	return nil
}

// precisionSlack absorbs rounding between the suite's arithmetic and ours.
const precisionSlack = 1e-9

// sampling checks how a case's adaptive repeats stopped in each
// invocation. The suite's word is not taken for it: a case that claims
// to have reached the precision must have samples that show it, and a
// suite that reports no stop reason did not honour GPUATTEST_REPEATS=auto.
func (br *benchRun) sampling(c *BenchmarkCase, prefix string, invs []invocation) *Sampling {
	sp := &Sampling{Stops: map[string]int{}, Samples: len(c.SamplesNS), Precision: stats.MedianPrecision(c.SamplesNS)}
	if math.IsInf(sp.Precision, 0) {
		sp.Precision = 0 // not JSON-encodable; Stops and Samples tell the story
	}
	for _, inv := range invs {
		for _, k := range inv.res.Cases {
			if CaseKey(k.Name) != c.Name || len(k.SamplesNS) == 0 {
				continue
			}
			if k.Stop == nil {
				sp.Stops["unreported"]++
				br.failures = append(br.failures, fmt.Sprintf("%scase %s reports no stop reason (invocation %d): the suite does not honour GPUATTEST_REPEATS=auto", prefix, k.Name, inv.index+1))
				continue
			}
			sp.Stops[k.Stop.Reason]++
			if k.Stop.Reason == StopPrecision {
				if got := stats.MedianPrecision(k.SamplesNS); got > br.d.Precision+precisionSlack {
					br.failures = append(br.failures, fmt.Sprintf("%scase %s claims the precision was reached (invocation %d), but its %d samples give ±%.3g%%, not ±%.3g%%",
						prefix, k.Name, inv.index+1, len(k.SamplesNS), 100*got, 100*br.d.Precision))
				}
			}
		}
	}
	return sp
}

// mergeCase appends k's samples to the case with the same key in cases,
// keeping the worst status, or adds the case.
func mergeCase(cases []BenchmarkCase, k Case) []BenchmarkCase {
	key := CaseKey(k.Name)
	for i := range cases {
		c := &cases[i]
		if c.Name != key {
			continue
		}
		c.SamplesNS = append(c.SamplesNS, k.SamplesNS...)
		if w, ok := caseWindow(k.Config); ok {
			c.windows = append(c.windows, w)
		}
		if statusRank[k.Status] > statusRank[c.Status] {
			c.Status, c.Message = k.Status, k.Message
		}
		return cases
	}
	cfg := map[string]string{}
	for kk, v := range k.Config {
		if kk != "seed" && kk != ConfigSampledFrom && kk != ConfigSampledTo {
			cfg[kk] = v
		}
	}
	if len(cfg) == 0 {
		cfg = nil
	}
	var ws []window
	if w, ok := caseWindow(k.Config); ok {
		ws = []window{w}
	}
	return append(cases, BenchmarkCase{
		Name: key, Kernel: k.Kernel, Status: k.Status, Message: k.Message,
		Flops: k.Flops, Bytes: k.Bytes, Config: cfg, SamplesNS: slices.Clone(k.SamplesNS), windows: ws,
	})
}

var statusRank = map[string]int{StatusPassed: 0, StatusSkipped: 1, StatusFailed: 2, StatusError: 3}

// invocationSamples returns the samples of case key in each invocation
// (seed segments merged), nil for an invocation without it.
func invocationSamples(invs []invocation, key string) [][]float64 {
	out := make([][]float64, len(invs))
	for i, inv := range invs {
		for _, k := range inv.res.Cases {
			if CaseKey(k.Name) == key {
				out[i] = append(out[i], k.SamplesNS...)
			}
		}
	}
	return out
}

// comparePaired judges every candidate case against the reference, pair
// by pair. A case on one side only is MISSING and fails the gate.
func (br *benchRun) comparePaired() (*Report, error) {
	d := br.d
	g, err := gateSettings(br.s.Step.Gate)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Baseline:  Endpoint{Kind: sideReference, Path: d.Reference.Results, Hardware: d.Hardware},
		Candidate: Endpoint{Kind: sideCandidate, Path: br.s.Step.Results, Hardware: d.Hardware},
		Gate:      g,
		Counts:    map[stats.Verdict]int{},
	}
	refCases := map[string]bool{}
	for _, c := range d.Reference.Cases {
		refCases[c.Name] = len(c.SamplesNS) > 0
	}
	candCases := map[string]bool{}
	for _, c := range d.Cases {
		candCases[c.Name] = len(c.SamplesNS) > 0
		if !candCases[c.Name] {
			continue
		}
		if !refCases[c.Name] {
			rep.Cases = append(rep.Cases, CaseComparison{Name: c.Name, Comparison: stats.Comparison{Method: stats.MethodPaired,
				CandidateN: len(c.SamplesNS), CandidateMedian: stats.Median(c.SamplesNS),
				Verdict: stats.Missing, Reason: "measured in the candidate but not in the reference"}})
			continue
		}
		ref, cand := invocationSamples(br.ref, c.Name), invocationSamples(br.cand, c.Name)
		if i := slices.IndexFunc(ref, func(x []float64) bool { return len(x) == 0 }); i >= 0 {
			return nil, fmt.Errorf("case %s: reference invocation %d has no samples for it\nhint: every invocation must report every case", c.Name, i+1)
		}
		if i := slices.IndexFunc(cand, func(x []float64) bool { return len(x) == 0 }); i >= 0 {
			return nil, fmt.Errorf("case %s: candidate invocation %d has no samples for it\nhint: every invocation must report every case", c.Name, i+1)
		}
		cmp, err := br.comparePairedCase(ref, cand, c.Name, g)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", c.Name, err)
		}
		rep.Cases = append(rep.Cases, CaseComparison{Name: c.Name, Comparison: cmp})
	}
	for _, c := range d.Reference.Cases {
		if len(c.SamplesNS) > 0 && !candCases[c.Name] {
			rep.Cases = append(rep.Cases, CaseComparison{Name: c.Name, Comparison: stats.Comparison{Method: stats.MethodPaired,
				BaselineN: len(c.SamplesNS), BaselineMedian: stats.Median(c.SamplesNS),
				Verdict: stats.Missing, Reason: "measured in the reference but not in the candidate"}})
		}
	}
	rep.OnAmbiguous = pipeline.OnAmbiguousFail
	if br.s.Step.Gate.WarnsOnAmbiguous() {
		rep.OnAmbiguous = pipeline.OnAmbiguousWarn
	}
	for _, c := range rep.Cases {
		rep.Counts[c.Verdict]++
		if rep.fails(c.Verdict) {
			rep.Failed = true
		}
	}
	return rep, nil
}

// ambiguousWarnings returns the warnings of rep's AMBIGUOUS cases under
// onAmbiguous: warn (none under fail: they failed the gate).
func ambiguousWarnings(label string, rep *Report) []string {
	if rep == nil || rep.OnAmbiguous != pipeline.OnAmbiguousWarn {
		return nil
	}
	var out []string
	for _, c := range rep.Cases {
		if c.Verdict == stats.Ambiguous {
			out = append(out, fmt.Sprintf("%s gate: case %s AMBIGUOUS, passed under gate.onAmbiguous: warn (%s)", label, c.Name, c.Reason))
		}
	}
	return out
}

// gateSettings turns a step's gate into stats.Gate, defaults filled in.
func gateSettings(gt *pipeline.Gate) (stats.Gate, error) {
	g := stats.Gate{Threshold: stats.DefaultThreshold, Alpha: stats.DefaultAlpha}
	if gt == nil {
		return g, nil
	}
	if !gt.Threshold.IsZero() {
		g.Threshold = gt.Threshold.Fraction
	}
	if gt.Alpha != 0 {
		g.Alpha = gt.Alpha
	}
	return g, nil
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

func gate(s *step.Context, d *BenchmarkDetails) (*GateResult, error) {
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
	sum := f.file(b, "").SHA256
	g := &GateResult{Baseline: s.Step.Baseline, SHA256: sum, Enforced: s.Step.Gate != nil}
	cand := &SampleSet{Kind: "benchmark", Hardware: d.Hardware}
	for _, c := range d.Cases {
		if len(c.SamplesNS) > 0 {
			cand.Cases = append(cand.Cases, SampleCase{Name: c.Name, SamplesNS: c.SamplesNS, Flops: c.Flops, Bytes: c.Bytes})
		}
	}
	gs, err := gateSettings(s.Step.Gate)
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", s.Step.ID, err)
	}
	opts := []CompareOption{WithThreshold(gs.Threshold), WithAlpha(gs.Alpha)}
	if s.Step.Gate != nil && s.Step.Gate.AllowHardwareMismatch {
		opts = append(opts, AllowHardwareMismatch())
	}
	rep, err := Compare(base, cand, opts...)
	if err != nil {
		return nil, fmt.Errorf("step %s: comparing with the baseline: %w", s.Step.ID, err)
	}
	if rep.HardwareRefused {
		msg := rep.RefusalMessage()
		s.Logger.Warn("baseline gate refused", "err", msg)
		g.Refused = strings.ReplaceAll(msg, "\n", " ")
		return g, nil
	}
	if len(rep.HardwareMismatch) > 0 {
		s.Logger.Warn("COMPARING ACROSS DIFFERENT HARDWARE (allowHardwareMismatch)", "differences", strings.Join(rep.HardwareMismatch, "; "))
	}
	if g.Enforced {
		rep.OnAmbiguous = pipeline.OnAmbiguousFail
		if s.Step.Gate.WarnsOnAmbiguous() {
			rep.OnAmbiguous = pipeline.OnAmbiguousWarn
		}
		rep.Failed = rep.Failed || slices.ContainsFunc(rep.Cases, func(c CaseComparison) bool { return rep.fails(c.Verdict) })
	}
	g.Report = rep
	return g, nil
}

func writeBenchmarkReports(s *step.Context, d *BenchmarkDetails) ([]step.File, error) {
	var files []step.File
	full := *d
	full.Schema = BenchmarkSchemaID
	f, err := writeStepFile(s, runlayout.BenchmarkFile, "benchmark", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(&full)
	})
	if err != nil {
		return nil, err
	}
	files = append(files, f)
	f, err = writeStepFile(s, "samples.csv", "samples", func(w io.Writer) error { return writeSamplesCSV(w, d) })
	if err != nil {
		return nil, err
	}
	files = append(files, f)
	f, err = writeStepFile(s, "junit.xml", "junit", func(w io.Writer) error { return WriteJUnit(w, "gpuattest."+s.Step.ID, benchmarkJUnit(s, d)) })
	if err != nil {
		return nil, err
	}
	return append(files, f), nil
}

// writeSamplesCSV writes every raw sample: case, iteration, ns, and the
// side (candidate or reference) it was measured on.
func writeSamplesCSV(w io.Writer, d *BenchmarkDetails) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"case", "iteration", "ns", "side"}); err != nil {
		return err
	}
	sides := []struct {
		name  string
		cases []BenchmarkCase
	}{{sideCandidate, d.Cases}}
	if d.Reference != nil {
		sides = append(sides, struct {
			name  string
			cases []BenchmarkCase
		}{sideReference, d.Reference.Cases})
	}
	for _, sd := range sides {
		for _, c := range sd.cases {
			for i, v := range c.SamplesNS {
				if err := cw.Write([]string{c.Name, strconv.Itoa(i), strconv.FormatFloat(v, 'f', -1, 64), sd.name}); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// benchmarkJUnit is one JUnit case per benchmark case, failed when the
// case failed, has no samples, or is SLOWER or MISSING against an enforced
// reference or baseline, or AMBIGUOUS against one that does not warn on
// it (gate.onAmbiguous).
func benchmarkJUnit(s *step.Context, d *BenchmarkDetails) []JUnitCase {
	type judged struct {
		label    string
		rep      *Report
		enforced bool
	}
	var reps []judged
	if d.Reference != nil && d.Reference.Report != nil {
		reps = append(reps, judged{sideReference, d.Reference.Report, true})
	}
	if d.Gate != nil && d.Gate.Report != nil {
		reps = append(reps, judged{"baseline", d.Gate.Report, d.Gate.Enforced})
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
		for _, r := range reps {
			for _, v := range r.rep.Cases {
				if v.Name != c.Name {
					continue
				}
				j.Output += "\n" + r.label + ": " + string(v.Verdict) + ": " + v.Reason
				if r.enforced && r.rep.fails(v.Verdict) && j.Status == StatusPassed {
					j.Status, j.Message = StatusFailed, r.label+" "+string(v.Verdict)+": "+v.Reason
				}
			}
		}
		jc = append(jc, j)
	}
	for _, r := range reps {
		for _, v := range r.rep.Cases {
			if v.Verdict != stats.Missing || slices.ContainsFunc(d.Cases, func(c BenchmarkCase) bool { return c.Name == v.Name }) {
				continue
			}
			st := StatusPassed
			if r.enforced {
				st = StatusFailed
			}
			jc = append(jc, JUnitCase{Name: v.Name, Classname: "benchmark." + s.Step.ID, Status: st, Message: r.label + " MISSING: " + v.Reason})
		}
	}
	return jc
}

// bandwidthFloors judges each bandwidth case (the harness's --membw:
// config floor_metric memory_bandwidth) on the cuda backend against the
// memory-bandwidth floor of its GPU's model, and records the floor in
// the details: a GPU under it fails, on real hardware; on simulated GPUs
// the floor is named and not judged; a model without floors gets "no
// floor: not judged".
func (br *benchRun) bandwidthFloors() {
	d, rec := br.d, br.s.Hardware
	if d.Backend != "cuda" {
		return
	}
	for _, c := range d.Cases {
		if c.Config[ConfigFloorMetric] != string(floors.MetricMemoryBandwidth) {
			continue
		}
		uuid, model := c.Config["device_uuid"], d.Device
		if uuid == "" {
			uuid = d.DeviceUUID
		}
		if rec != nil {
			for _, g := range rec.GPUs {
				if uuid != "" && strings.EqualFold(g.UUID, uuid) {
					model = g.Name
				}
			}
		}
		f := attest.AppliedFloor{Step: br.s.Step.ID, GPU: uuid, Metric: string(floors.MetricMemoryBandwidth), Verdict: attest.FloorNotJudged}
		if c.GBPS > 0 {
			f.Measured = ptrFloat(c.GBPS * 1e9)
		}
		m, ok := floors.Lookup(model)
		if !ok {
			f.Note = floors.NotJudged
			d.Floors = append(d.Floors, f)
			continue
		}
		fl := m.MemoryBandwidth
		f.Model, f.Min, f.Peak, f.Unit, f.Source, f.SourceURL = m.Name, float64(fl.Min), float64(fl.Peak), fl.Min.Unit(), fl.Source.Name, fl.Source.URL
		switch {
		case f.Measured == nil:
			f.Note = "the case has no median"
		case d.Hardware.Simulated:
			f.Note = "SIMULATED GPU: the fake driver's copy runs on the host, not judged"
		case *f.Measured >= float64(fl.Min):
			f.Verdict = attest.FloorPassed
		default:
			f.Verdict = attest.FloorFailed
			br.failures = append(br.failures, fmt.Sprintf("case %s on %s: %v device-local copy bandwidth, under the %s floor of %v (%.0f %% of its %v peak, %s)",
				c.Name, orUnknown(uuid), floors.BytesPerSecond(*f.Measured), m.Name, fl.Min, 100*float64(fl.Min)/float64(fl.Peak), fl.Peak, fl.Source.Name))
		}
		d.Floors = append(d.Floors, f)
	}
}

// ConfigFloorMetric is the case config key naming the floor metric a
// case measures (the bandwidth case: "memory_bandwidth").
const ConfigFloorMetric = "floor_metric"
