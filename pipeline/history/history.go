package history

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
)

// DefaultJobs is how many releases are verified at once unless WithJobs
// says otherwise.
const DefaultJobs = 8

// ClocksUnknown is the clocks part of a series key when the signed
// hardware record does not say whether clocks were locked (no record
// says so yet).
const ClocksUnknown = "unknown"

// History is a repository's verified benchmark history.
type History struct {
	// Repository is the registry repository read.
	Repository string `json:"repository"`
	// Threshold is the relative step between consecutive releases that
	// is marked (0.03: 3 %).
	Threshold float64 `json:"threshold"`
	// Releases are the release manifests that verified, each once
	// whatever the number of tags naming it, in signed order: by the
	// finish time of its first validation run, then run id, then
	// manifest digest (never by tag).
	Releases []Release `json:"releases"`
	// Excluded are the releases left out, each with the reason.
	Excluded []Excluded `json:"excluded"`
	// Series are the benchmark series, sorted by key.
	Series []Series `json:"series"`
}

// Release is a release manifest that verified. Its tags are the
// registry's word, which anyone who can push may change; its identity
// (run id, finish time, signing time) is its signed statements'.
type Release struct {
	// Tag is the first of Tags in version order, the name it is drawn
	// under.
	Tag string `json:"tag"`
	// Tags are every tag read that names the manifest, in version order.
	// More than one is flagged: a tag was re-pointed at, or copied to,
	// a release signed before.
	Tags []string `json:"tags"`
	// Manifest is "sha256:<hex>" of its release manifest.
	Manifest string `json:"manifest"`
	// Bundle, RunID, FinishedAt and SignedAt are those of its first
	// validation run (Runs[0]): the release's identity.
	Bundle     string     `json:"bundle"`
	RunID      string     `json:"run_id,omitempty"`
	FinishedAt time.Time  `json:"finished_at"`
	SignedAt   *time.Time `json:"signed_at,omitempty"`
	// Runs are its verified validation statements, one per signed run
	// (a release validated on an A100 and an H100 has two), in signed
	// order; each is drawn in its own hardware's series.
	Runs []Run `json:"runs"`
	// Flags say where the registry's tags disagree with the signed
	// statements: a manifest under several tags, a tag whose version
	// order is not the signed order.
	Flags []string `json:"flags,omitempty"`
}

// Run is one verified validation statement of a release.
type Run struct {
	// Bundle is "sha256:<hex>" of its Sigstore bundle.
	Bundle string `json:"bundle"`
	// RunID and FinishedAt are the run's id and finish time, as signed
	// (RunID is empty in statements made before it was signed).
	RunID      string    `json:"run_id,omitempty"`
	FinishedAt time.Time `json:"finished_at"`
	// SignedAt is the signature's verified timestamp, when the bundle
	// has one (a transparency log or a TSA; not a key signing offline).
	SignedAt *time.Time `json:"signed_at,omitempty"`
	// Hardware names the GPU models of its hardware record ("cpu"
	// without a GPU), with ", SIMULATED" for a simulated one.
	Hardware string `json:"hardware"`
}

// Excluded is a release left out of every series.
type Excluded struct {
	// Tag is its tag.
	Tag string `json:"tag"`
	// Reason says why, in one line.
	Reason string `json:"reason"`
}

// Key identifies a series: one benchmark case on one kind of hardware.
type Key struct {
	// Step and Case name the benchmark case.
	Step string `json:"step"`
	Case string `json:"case"`
	// GPU is the GPU model the case ran on ("cpu" when it used none).
	GPU string `json:"gpu"`
	// Driver is the NVIDIA driver version ("" without one).
	Driver string `json:"driver"`
	// Clocks is locked, unlocked or unknown.
	Clocks string `json:"clocks"`
	// Simulated is true for a simulated GPU.
	Simulated bool `json:"simulated"`
}

// String names the key in one line.
func (k Key) String() string {
	s := k.Step + "/" + k.Case + " on " + k.GPU
	if k.Driver != "" {
		s += ", driver " + k.Driver
	}
	s += ", clocks " + k.Clocks
	if k.Simulated {
		s += ", SIMULATED"
	}
	return s
}

// Series is one case's points on one kind of hardware, in release order.
type Series struct {
	// Key is the case and the hardware.
	Key Key `json:"key"`
	// Points are the verified releases' figures, in release order.
	Points []Point `json:"points"`
	// Marks are the steps between consecutive points larger than the
	// threshold.
	Marks []Mark `json:"marks"`
}

// Point is one release's figures for a case, from one of its runs.
type Point struct {
	// Tag, Manifest and Bundle name the release and the bundle read.
	Tag      string `json:"tag"`
	Manifest string `json:"manifest"`
	Bundle   string `json:"bundle"`
	// RunID and FinishedAt are the signed run's id and finish time.
	RunID      string    `json:"run_id,omitempty"`
	FinishedAt time.Time `json:"finished_at"`
	// MedianNS, CILowNS and CIHighNS are the median time per iteration
	// and its confidence interval, in nanoseconds.
	MedianNS float64 `json:"median_ns"`
	CILowNS  float64 `json:"ci_low_ns"`
	CIHighNS float64 `json:"ci_high_ns"`
	// Throughput is the case's throughput at the median, when it has one.
	Throughput *attest.Throughput `json:"throughput,omitempty"`
	// RooflinePercent is the attained percent of the roofline, when known.
	RooflinePercent *float64 `json:"roofline_percent,omitempty"`
}

// Mark is a step between two consecutive points of a series.
type Mark struct {
	// From and To index the series' points.
	From int `json:"from"`
	To   int `json:"to"`
	// Delta is the relative change of the median (0.2: 20 % slower).
	Delta float64 `json:"delta"`
	// FromManifest and ToManifest are the two releases' manifest
	// digests, FromBundle and ToBundle their bundles'.
	FromManifest string `json:"from_manifest"`
	ToManifest   string `json:"to_manifest"`
	FromBundle   string `json:"from_bundle"`
	ToBundle     string `json:"to_bundle"`
}

// Direction is "slower" or "faster".
func (m Mark) Direction() string {
	if m.Delta > 0 {
		return "slower"
	}
	return "faster"
}

// Option configures Collect.
type Option func(*options) error

type options struct {
	jobs      int
	limit     int
	sinceTag  string
	sinceTime time.Time
	threshold float64
	oci       []oci.Option
	logger    *slog.Logger
}

// WithJobs sets how many releases are verified at once (DefaultJobs).
func WithJobs(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 64 {
			return fmt.Errorf("jobs %d: expected 1 to 64", n)
		}
		o.jobs = n
		return nil
	}
}

// WithLimit keeps the n newest tags (in version order) only.
func WithLimit(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("limit %d: expected a positive number of releases", n)
		}
		o.limit = n
		return nil
	}
}

// WithSince keeps the releases from since on: a tag (those ordered at
// or after it) or a date (YYYY-MM-DD or RFC 3339: those whose run
// finished then or later, as signed).
func WithSince(since string) Option {
	return func(o *options) error {
		if since == "" {
			return errors.New("since: empty\nhint: give a tag (v1.2.0) or a date (2026-01-31)")
		}
		for _, layout := range []string{time.RFC3339, time.DateOnly} {
			if t, err := time.Parse(layout, since); err == nil {
				o.sinceTime = t
				return nil
			}
		}
		o.sinceTag = since
		return nil
	}
}

// WithThreshold sets the relative step that is marked (default the
// gate's default threshold, pipeline.DefaultThreshold).
func WithThreshold(f float64) Option {
	return func(o *options) error {
		if !(f > 0 && f < 10) {
			return fmt.Errorf("threshold %g: expected a fraction above 0 (0.03 for 3 %%)", f)
		}
		o.threshold = f
		return nil
	}
}

// WithRegistryOptions passes options to attest/oci's listing and
// verification (credentials, insecure registries, timeouts, limits).
func WithRegistryOptions(opts ...oci.Option) Option {
	return func(o *options) error {
		o.oci = append(o.oci, opts...)
		return nil
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("logger: nil")
		}
		o.logger = l
		return nil
	}
}

// Collect lists repo's release tags, verifies each release with v (as
// verify REF does), at most WithJobs at once, and builds the history of
// those that verified. A release that fails to verify, or has no GPU
// validation statement naming its manifest, is left out and named in
// Excluded with the reason. An error means the tags could not be listed
// (or ctx ended).
func Collect(ctx context.Context, repo string, v *verify.Verifier, opts ...Option) (*History, error) {
	o := &options{jobs: DefaultJobs, threshold: pipeline.DefaultThreshold.Fraction, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	if v == nil {
		return nil, errors.New("history: nil verifier")
	}
	tags, err := oci.Tags(ctx, repo, o.oci...)
	if err != nil {
		return nil, err
	}
	if o.sinceTag != "" {
		tags = slices.DeleteFunc(tags, func(t string) bool { return oci.CompareTags(t, o.sinceTag) < 0 })
	}
	if o.limit > 0 && len(tags) > o.limit {
		tags = tags[len(tags)-o.limit:]
	}
	found := make([]*found, len(tags))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.jobs)
	for i, tag := range tags {
		g.Go(func() error {
			found[i] = readRelease(gctx, v, repo, tag, o)
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h := &History{Repository: repo, Threshold: o.threshold, Releases: []Release{}, Excluded: []Excluded{}, Series: []Series{}}
	// One release per manifest: the tags come in version order, so the
	// first that verified names it.
	byManifest := map[string]*releaseFound{}
	var releases []*releaseFound
	for i, f := range found {
		if f.reason != "" {
			h.Excluded = append(h.Excluded, Excluded{Tag: tags[i], Reason: f.reason})
			continue
		}
		if r := byManifest[f.release.Manifest]; r != nil {
			r.release.Tags = append(r.release.Tags, tags[i])
			continue
		}
		f.release.Tag, f.release.Tags = tags[i], []string{tags[i]}
		rf := &releaseFound{release: f.release, points: f.points}
		byManifest[f.release.Manifest] = rf
		releases = append(releases, rf)
	}
	releases = slices.DeleteFunc(releases, func(r *releaseFound) bool {
		return !o.sinceTime.IsZero() && r.release.FinishedAt.Before(o.sinceTime)
	})
	sort.SliceStable(releases, func(i, j int) bool { return signedBefore(&releases[i].release, &releases[j].release) })
	for i, r := range releases {
		if len(r.release.Tags) > 1 {
			r.release.Flags = append(r.release.Flags, fmt.Sprintf("manifest %s is tagged %s: a tag was re-pointed at, or copied to, a release signed before; it is drawn once, as signed (run %s, finished %s)",
				r.release.Manifest, strings.Join(r.release.Tags, ", "), orNone(r.release.RunID), r.release.FinishedAt.UTC().Format(time.RFC3339)))
		}
		if i > 0 {
			if prev := releases[i-1].release; oci.CompareTags(prev.Tag, r.release.Tag) > 0 {
				r.release.Flags = append(r.release.Flags, fmt.Sprintf("tag %s sorts before %s, but its signed run finished after that release's: drawn in signed order",
					r.release.Tag, prev.Tag))
			}
		}
		h.Releases = append(h.Releases, r.release)
	}
	series := map[Key]*Series{}
	for _, r := range releases {
		for _, p := range r.points {
			p.Tag = r.release.Tag
			s := series[p.key]
			if s == nil {
				s = &Series{Key: p.key, Points: []Point{}, Marks: []Mark{}}
				series[p.key] = s
			}
			s.Points = append(s.Points, p.Point)
		}
	}
	for _, s := range series {
		s.Marks = marks(s.Points, o.threshold)
		h.Series = append(h.Series, *s)
	}
	sort.Slice(h.Series, func(i, j int) bool { return h.Series[i].Key.String() < h.Series[j].Key.String() })
	return h, nil
}

// releaseFound is a verified release and its points, in run order.
type releaseFound struct {
	release Release
	points  []keyedPoint
}

// signedBefore orders releases by their signed identity: finish time,
// then run id, then manifest digest.
func signedBefore(a, b *Release) bool {
	if !a.FinishedAt.Equal(b.FinishedAt) {
		return a.FinishedAt.Before(b.FinishedAt)
	}
	if a.RunID != b.RunID {
		return a.RunID < b.RunID
	}
	return a.Manifest < b.Manifest
}

// runBefore orders a release's runs the same way: finish time, run id,
// bundle digest.
func runBefore(a, b *Run) bool {
	if !a.FinishedAt.Equal(b.FinishedAt) {
		return a.FinishedAt.Before(b.FinishedAt)
	}
	if a.RunID != b.RunID {
		return a.RunID < b.RunID
	}
	return a.Bundle < b.Bundle
}

func orNone(s string) string {
	if s == "" {
		return "(no run id)"
	}
	return s
}

// marks are the steps of more than threshold between consecutive points.
func marks(ps []Point, threshold float64) []Mark {
	out := []Mark{}
	for i := 1; i < len(ps); i++ {
		a, b := ps[i-1], ps[i]
		if a.MedianNS <= 0 {
			continue
		}
		d := (b.MedianNS - a.MedianNS) / a.MedianNS
		if math.Abs(d) > threshold {
			out = append(out, Mark{From: i - 1, To: i, Delta: d, FromManifest: a.Manifest, ToManifest: b.Manifest, FromBundle: a.Bundle, ToBundle: b.Bundle})
		}
	}
	return out
}

// found is what one tag yielded: a reason it was left out, or its
// release (without tags) and points.
type found struct {
	reason  string
	release Release
	points  []keyedPoint
}

type keyedPoint struct {
	key Key
	Point
}

// readRelease verifies repo:tag and reads the points of every verified
// validation statement that names its manifest and that the
// verification judged, each run once.
func readRelease(ctx context.Context, v *verify.Verifier, repo, tag string, o *options) *found {
	ref := repo + ":" + tag
	res, err := oci.Verify(ctx, v, ref, o.oci...)
	if err != nil {
		return &found{reason: textsafe.Line(firstLine(err.Error()))}
	}
	if !res.Report.Verified {
		return &found{reason: "did not verify (" + res.Report.Failure.String() + "): " + failedChecks(res.Report)}
	}
	type run struct {
		Run
		points []keyedPoint
	}
	var runs []run
	seen := map[string]bool{}
	for i := range res.Report.Bundles {
		b := &res.Report.Bundles[i]
		st := b.Statement()
		if st == nil || !b.Judged || st.PredicateType != attest.ValidationPredicateType || !names(st, res.Digest) {
			continue
		}
		// The same statement in two bundles (signed twice, or a
		// referrer repeated) is one run.
		sum := sha256.Sum256(st.Predicate)
		if seen[string(sum[:])] {
			continue
		}
		seen[string(sum[:])] = true
		r, points, err := pointsOf(st, res.Digest, b.Digest)
		if err != nil {
			return &found{reason: fmt.Sprintf("validation statement %s: %v", b.Digest, err)}
		}
		r.SignedAt = b.SignedAt
		runs = append(runs, run{Run: r, points: points})
	}
	if len(runs) == 0 {
		return &found{reason: "verified, but no verified " + attest.ValidationPredicateType + " statement names its manifest " + res.Digest}
	}
	sort.SliceStable(runs, func(i, j int) bool { return runBefore(&runs[i].Run, &runs[j].Run) })
	first := runs[0].Run
	f := &found{release: Release{Manifest: res.Digest, Bundle: first.Bundle, RunID: first.RunID, FinishedAt: first.FinishedAt, SignedAt: first.SignedAt, Runs: []Run{}}}
	for _, r := range runs {
		f.release.Runs = append(f.release.Runs, r.Run)
		f.points = append(f.points, r.points...)
	}
	o.logger.DebugContext(ctx, "release read", "tag", tag, "manifest", res.Digest, "runs", len(runs), "points", len(f.points))
	return f
}

// names reports whether st names the release manifest digest.
func names(st *attest.Statement, digest string) bool {
	for _, s := range st.Subject {
		if s.Name == attest.ManifestSubjectName && "sha256:"+s.Digest["sha256"] == digest {
			return true
		}
	}
	return false
}

// failedChecks names the checks that failed, in one line.
func failedChecks(r *verify.Report) string {
	var out []string
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c.Check+" "+c.Target+": "+firstLine(c.Detail))
		}
		if len(out) == 3 {
			break
		}
	}
	if len(out) == 0 {
		return "no check passed"
	}
	return textsafe.Line(strings.Join(out, "; "))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// predicate is the part of the validation predicate history reads.
type predicate struct {
	Simulated  bool                      `json:"simulated"`
	FinishedAt time.Time                 `json:"finished_at"`
	RunID      string                    `json:"run_id"`
	Hardware   hardwarePart              `json:"hardware"`
	Steps      []attest.StepVerdict      `json:"steps"`
	Benchmarks []attest.BenchmarkSummary `json:"benchmarks"`
}

type hardwarePart struct {
	DriverVersion string `json:"driver_version"`
	ClocksLocked  *bool  `json:"clocks_locked"`
	GPUs          []struct {
		Name string `json:"name"`
	} `json:"gpus"`
}

// pointsOf reads the run and the benchmark points of a verified
// validation statement of the release manifest, read from bundle.
func pointsOf(st *attest.Statement, manifest, bundle string) (Run, []keyedPoint, error) {
	var p predicate
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		return Run{}, nil, err
	}
	r := Run{Bundle: bundle, RunID: textsafe.Line(p.RunID), FinishedAt: p.FinishedAt, Hardware: hardwareOf(&p)}
	clocks := ClocksUnknown
	if p.Hardware.ClocksLocked != nil {
		clocks = map[bool]string{true: "locked", false: "unlocked"}[*p.Hardware.ClocksLocked]
	}
	var out []keyedPoint
	for _, b := range p.Benchmarks {
		if b.MedianNS <= 0 || !finite(b.MedianNS) {
			continue
		}
		if !finite(b.CILowNS) || !finite(b.CIHighNS) || b.CILowNS > b.MedianNS || b.CIHighNS < b.MedianNS {
			// An interval that does not hold the median is drawn as none.
			b.CILowNS, b.CIHighNS = b.MedianNS, b.MedianNS
		}
		k := Key{Step: b.Step, Case: b.Case, GPU: gpuOf(&p, b.Step), Driver: p.Hardware.DriverVersion, Clocks: clocks, Simulated: p.Simulated}
		pt := Point{Manifest: manifest, Bundle: bundle, RunID: r.RunID, FinishedAt: r.FinishedAt,
			MedianNS: b.MedianNS, CILowNS: b.CILowNS, CIHighNS: b.CIHighNS, Throughput: b.Throughput}
		if b.RooflineAttained != nil {
			pct := *b.RooflineAttained * 100
			pt.RooflinePercent = &pct
		}
		out = append(out, keyedPoint{key: k, Point: pt})
	}
	return r, out, nil
}

// hardwareOf names the record's GPU models ("cpu" without), and says
// SIMULATED for a simulated record.
func hardwareOf(p *predicate) string {
	var ns []string
	for _, g := range p.Hardware.GPUs {
		if !slices.Contains(ns, g.Name) {
			ns = append(ns, g.Name)
		}
	}
	s := "cpu"
	if len(ns) > 0 {
		s = strings.Join(ns, " + ")
	}
	if p.Simulated {
		s += ", SIMULATED"
	}
	return textsafe.Line(s)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// gpuOf names the GPU model a benchmark step ran on: its devices' names,
// else "cpu" for a step that ran on the CPU backend or no GPU, else the
// record's GPUs.
func gpuOf(p *predicate, step string) string {
	for _, s := range p.Steps {
		if s.ID != step {
			continue
		}
		var ns []string
		for _, d := range s.Devices {
			if !slices.Contains(ns, d.Name) {
				ns = append(ns, d.Name)
			}
		}
		if len(ns) > 0 {
			return textsafe.Line(strings.Join(ns, " + "))
		}
		if s.Backend == attest.BackendCPU || !s.GPU {
			return "cpu"
		}
	}
	var ns []string
	for _, g := range p.Hardware.GPUs {
		if !slices.Contains(ns, g.Name) {
			ns = append(ns, g.Name)
		}
	}
	if len(ns) == 0 {
		return "cpu"
	}
	return textsafe.Line(strings.Join(ns, " + "))
}
