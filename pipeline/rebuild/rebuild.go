package rebuild

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/source"
)

// Sentinel errors callers branch on; each error wrapping one says what
// was found and what was expected. Nothing was built when one of them is
// returned.
var (
	// ErrSourceMismatch: the source directory is not a clean checkout of
	// the commit the provenance records.
	ErrSourceMismatch = errors.New("source does not match the provenance")
	// ErrToolchainMismatch: a build step ran on the host and this host's
	// CUDA toolchain is not the one the provenance records.
	ErrToolchainMismatch = errors.New("the host toolchain does not match the provenance")
	// ErrImageMismatch: a build step ran in another image than the one
	// the provenance records (its reference is not pinned by digest).
	ErrImageMismatch = errors.New("the rebuild ran in another image than the provenance records")
	// ErrNotRebuildable: the provenance lacks what a rebuild needs (a
	// clean source commit, the pipeline, a build step).
	ErrNotRebuildable = errors.New("the provenance cannot be rebuilt")
)

// Artifact is one subject of the provenance, as recorded and as rebuilt.
type Artifact struct {
	// Name is the subject's name.
	Name string `json:"name"`
	// Expected is the subject's "sha256:<hex>" digest in the provenance.
	Expected string `json:"expected"`
	// Rebuilt is the digest of the rebuilt file; empty when the rebuild
	// did not produce it.
	Rebuilt string `json:"rebuilt"`
	// Match is true when Rebuilt equals Expected.
	Match bool `json:"match"`
}

// Report is the outcome of a rebuild.
type Report struct {
	// Match is true when every subject was rebuilt bit for bit.
	Match bool `json:"match"`
	// Source is the source the rebuild ran from, as checked: the
	// checkout's remote URI and the commit it is at (equal to the
	// provenance's).
	Source attest.Source `json:"source"`
	// Pipeline is the pipeline the build steps came from.
	Pipeline attest.PipelineParam `json:"pipeline"`
	// Steps are the ids of the steps run again.
	Steps []string `json:"steps"`
	// Artifacts compares every subject, in the provenance's order.
	Artifacts []Artifact `json:"artifacts"`
	// Diff explains the differing files, when any, as a reproducibility
	// check does: the rebuild was run a second time in another directory
	// and the two compared (by ELF section and embedded string).
	Diff *cuda.ReproReport `json:"diff,omitempty"`
	// DiffNote says how to read Diff.
	DiffNote string `json:"diff_note,omitempty"`
	// Notes are facts worth a look that do not decide the outcome.
	Notes []string `json:"notes,omitempty"`
	// Dir holds the rebuild: src/ (the copied tree) and run/ (its run
	// directory).
	Dir string `json:"dir"`
	// Unsandboxed is true when the host's build steps ran outside the
	// sandbox (WithoutSandbox).
	Unsandboxed bool `json:"unsandboxed,omitempty"`
}

// Option configures Run.
type Option func(*options) error

type options struct {
	out         string
	runOpts     []run.Option
	originals   map[string]string // sha256 hex -> file
	unsandboxed bool
}

// WithoutSandbox runs the build steps meant for the host runner directly
// on this host, as this user, with the network and every file this user
// may write, instead of in a runner.Sandbox: a hostile source then runs
// its code here (a -ccbin script, an exec step). Only for a source the
// rebuilder trusts as much as its own.
func WithoutSandbox() Option {
	return func(o *options) error { o.unsandboxed = true; return nil }
}

// WithOriginals gives copies of the original artifacts (files whose
// sha256 the caller checked against the subjects, by hex digest). A
// differing artifact whose original is given is explained by comparing
// the original with the rebuilt file; only when an original is missing
// is the build run a second time to compare two rebuilds.
func WithOriginals(files map[string]string) Option {
	return func(o *options) error { o.originals = files; return nil }
}

// WithOutDir puts the rebuild into dir, which must not exist or be empty
// (default: a new temporary directory, kept for inspection).
func WithOutDir(dir string) Option {
	return func(o *options) error { o.out = dir; return nil }
}

// WithRunOptions passes options to every run.Pipeline call (a logger,
// progress, the GPU source); the output directory, cache and source are
// the rebuild's.
func WithRunOptions(opts ...run.Option) Option {
	return func(o *options) error { o.runOpts = append(o.runOpts, opts...); return nil }
}

// Run rebuilds the artifacts of a verified SLSA provenance statement
// from sourceDir: it checks that sourceDir is a clean work tree at the
// recorded commit and, for build steps that ran on the host, that the
// host's CUDA toolchain has the recorded digests (before anything is
// built); writes the commit's files into a fresh directory; runs the
// recorded cuda-build steps there (with the exec steps they need),
// without any cache, in the pipeline's pinned images (docker or bwrap,
// without network) or, for steps meant for the host runner, in a
// runner.Sandbox (the host's tools, no network, nothing writable outside
// the rebuild directory) unless WithoutSandbox; and compares every
// subject's digest. A Report that does not Match carries the diff of a
// second rebuild. prov must come from a verified bundle.
func Run(ctx context.Context, prov *attest.Statement, sourceDir string, opts ...Option) (*Report, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	pred, err := Decode(prov)
	if err != nil {
		return nil, err
	}
	ext := pred.BuildDefinition.ExternalParameters
	info, err := CheckSource(ctx, pred, sourceDir)
	if err != nil {
		return nil, err
	}
	// The report (and a VSA made from it) names the source as this
	// rebuild checked it out: the checkout's own remote and commit. The
	// provenance's URI was never checked (only its commit is), so it is
	// named in a note when it differs, never vouched for.
	rep := &Report{Source: attest.Source{URI: info.URI, Commit: info.Commit, Dirty: info.Dirty}, Pipeline: ext.Pipeline}
	if ext.Source.URI != "" && ext.Source.URI != info.URI {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the provenance names the source %s; this checkout's remote is %s: the rebuild checked the commit, not where it came from, and reports the checkout's", ext.Source.URI, cmp.Or(info.URI, "none")))
	}
	if rep.Dir, err = outDir(o.out); err != nil {
		return nil, err
	}
	rep.Unsandboxed = o.unsandboxed
	if !o.unsandboxed {
		sb, err := runner.NewSandbox([]string{rep.Dir})
		if err != nil {
			return rep, fmt.Errorf("%w\nhint: a rebuild runs the source's build steps in a sandbox; install bubblewrap, or pass --unsandboxed for a source you trust", err)
		}
		o.runOpts = append(append([]run.Option{run.WithBaseEnv(sandboxEnv(os.Environ()))}, o.runOpts...), run.WithRunners(sb))
	}
	first, err := buildOnce(ctx, pred, info, filepath.Join(rep.Dir, "src"), filepath.Join(rep.Dir, "run"), o.runOpts)
	if err != nil {
		return rep, err
	}
	rep.Steps, rep.Notes = first.steps, append(rep.Notes, first.notes...)
	rep.compare(prov.Subject, first)
	if rep.Match {
		return rep, nil
	}
	if done, err := rep.explainOriginals(first, o.originals); done || err != nil {
		return rep, err
	}
	second, err := buildOnce(ctx, pred, info, filepath.Join(rep.Dir, "src2"), filepath.Join(rep.Dir, "run2"), o.runOpts)
	if err != nil {
		return rep, fmt.Errorf("rebuilding a second time to explain the difference: %w", err)
	}
	return rep, rep.explain(first, second)
}

// Decode reads the SLSA provenance predicate of st and checks that it
// records what a rebuild needs: a source commit from a clean tree, the
// pipeline, and at least one cuda-build step.
func Decode(st *attest.Statement) (*attest.Provenance, error) {
	if st == nil || st.PredicateType != attest.ProvenancePredicateType {
		return nil, fmt.Errorf("%w: expected a statement of predicate type %s", ErrNotRebuildable, attest.ProvenancePredicateType)
	}
	var p attest.Provenance
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		return nil, fmt.Errorf("%w: decoding the provenance: %v", ErrNotRebuildable, err)
	}
	ext := p.BuildDefinition.ExternalParameters
	switch {
	case ext.Source == nil || ext.Source.Commit == "":
		return nil, fmt.Errorf("%w: buildDefinition.externalParameters.source: no source commit recorded\nhint: run the pipeline in a git work tree (gpuattest records its commit)", ErrNotRebuildable)
	case ext.Source.Dirty:
		return nil, fmt.Errorf("%w: buildDefinition.externalParameters.source.dirty: the build ran in a tree with uncommitted changes, so no commit holds what was built\nhint: sign releases from a clean tree (release: true refuses a dirty one)", ErrNotRebuildable)
	case !filepath.IsLocal(filepath.FromSlash(ext.Pipeline.Path)):
		return nil, fmt.Errorf("%w: buildDefinition.externalParameters.pipeline.path %q: expected a relative path inside the source", ErrNotRebuildable, ext.Pipeline.Path)
	case !slices.ContainsFunc(ext.BuildSteps, func(s attest.BuildStep) bool { return s.Kind == pipeline.KindCUDABuild }):
		return nil, fmt.Errorf("%w: buildDefinition.externalParameters.buildSteps: no cuda-build step recorded", ErrNotRebuildable)
	}
	return &p, nil
}

// CheckSource checks that dir is a clean git work tree at the commit the
// provenance records; any other tree is refused with ErrSourceMismatch
// naming what differs.
func CheckSource(ctx context.Context, prov *attest.Provenance, dir string) (*source.Info, error) {
	want := prov.BuildDefinition.ExternalParameters.Source
	info, err := source.Detect(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSourceMismatch, dir, err)
	}
	if info.Commit != want.Commit {
		return nil, fmt.Errorf("%w: %s is at commit %s, the provenance records %s\nhint: git checkout %s (in a clean clone of %s)", ErrSourceMismatch, dir, info.Commit, want.Commit, want.Commit, orUnknown(want.URI))
	}
	if info.Dirty {
		lines := info.DirtyFiles
		if len(info.Hidden) > 0 {
			lines = append(append(slices.Clone(lines), "not shown by git status:"), info.Hidden...)
		}
		return nil, fmt.Errorf("%w: %s has uncommitted changes:\n  %s\nhint: rebuild from a clean checkout of commit %s", ErrSourceMismatch, dir, strings.Join(lines, "\n  "), want.Commit)
	}
	return info, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "the repository"
	}
	return s
}

// outDir creates (or checks) the rebuild's directory.
func outDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "gpuattest-rebuild-")
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return "", fmt.Errorf("%s exists and is not empty\nhint: give a new --out directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}

// compare fills the report's artifact table from the subjects and the
// rebuilt files.
func (r *Report) compare(subjects []attest.Subject, b *built) {
	r.Match = true
	for _, s := range subjects {
		a := Artifact{Name: s.Name, Expected: "sha256:" + s.Digest["sha256"]}
		if d, ok := b.digests[s.Name]; ok {
			a.Rebuilt = "sha256:" + d
		}
		a.Match = a.Rebuilt == a.Expected
		r.Match = r.Match && a.Match
		r.Artifacts = append(r.Artifacts, a)
	}
}

// explain compares the differing files of two rebuilds.
func (r *Report) explain(first, second *built) error {
	var names []string
	for _, a := range r.Artifacts {
		if a.Match || a.Name == oci.ManifestSubjectName || a.Rebuilt == "" {
			continue
		}
		if _, ok := second.digests[a.Name]; ok {
			names = append(names, a.Name)
		}
	}
	diff, err := cuda.CompareBuilds(first.work, second.work, names)
	if err != nil {
		return err
	}
	r.Diff = diff
	if diff.Reproducible {
		r.DiffNote = "the two rebuilds agree with each other: the difference comes from the original build (its toolchain, image or environment), not from this rebuild"
	} else {
		r.DiffNote = "the two rebuilds differ from each other too: the build is not deterministic (see the differing sections and strings)"
	}
	return nil
}

// explainOriginals compares each differing artifact's original (by the
// expected digest) with the rebuilt file; it reports false, doing
// nothing, unless every differing rebuilt file has an original.
func (r *Report) explainOriginals(b *built, originals map[string]string) (bool, error) {
	diff := &cuda.ReproReport{FirstDir: "original", SecondDir: b.work, Identical: []string{}, Differing: []*cuda.FileDiff{}}
	for _, a := range r.Artifacts {
		if a.Match || a.Name == oci.ManifestSubjectName || a.Rebuilt == "" {
			continue
		}
		orig, ok := originals[strings.TrimPrefix(a.Expected, "sha256:")]
		if !ok {
			return false, nil
		}
		d, err := cuda.CompareFiles(orig, filepath.Join(b.work, filepath.FromSlash(a.Name)))
		if err != nil {
			return false, err
		}
		d.Path = a.Name
		diff.Differing = append(diff.Differing, d)
	}
	r.Diff = diff
	r.DiffNote = "the originals given (first) compared with the rebuilt files (second)"
	return true, nil
}

// built is one rebuild: where it ran and what it produced.
type built struct {
	work    string            // the pipeline's root in the copied tree
	digests map[string]string // subject name -> hex sha256
	steps   []string
	notes   []string
}

// buildOnce copies the verified tree into work and runs the recorded
// build steps there, into the run directory runDir.
func buildOnce(ctx context.Context, prov *attest.Provenance, info *source.Info, work, runDir string, runOpts []run.Option) (*built, error) {
	ext := prov.BuildDefinition.ExternalParameters
	if err := source.CopyTracked(ctx, info, work); err != nil {
		return nil, fmt.Errorf("copying the source: %w", err)
	}
	p, err := pipeline.Load(filepath.Join(work, filepath.FromSlash(ext.Pipeline.Path)), pipeline.WithRoot(work))
	if err != nil {
		return nil, fmt.Errorf("loading the pipeline of the source: %w", err)
	}
	if ext.Pipeline.Digest != "" && p.Digest != ext.Pipeline.Digest {
		return nil, fmt.Errorf("%w: %s has digest %s, the provenance records %s", ErrSourceMismatch, ext.Pipeline.Path, p.Digest, ext.Pipeline.Digest)
	}
	root := p.Root
	if root == "" {
		root = p.Dir
	}
	b := &built{work: root, digests: map[string]string{}}
	if b.steps, err = selectSteps(p, ext.BuildSteps); err != nil {
		return nil, err
	}
	if err := checkHostToolchain(ctx, p, prov.BuildDefinition.ResolvedDependencies); err != nil {
		return nil, err
	}
	opts := append(append([]run.Option(nil), runOpts...), run.WithOutDir(runDir), run.WithoutCache(), run.WithSource(info))
	res, err := run.Pipeline(ctx, p, opts...)
	if err != nil {
		return nil, fmt.Errorf("rebuilding: %w", err)
	}
	if !res.Passed() {
		return nil, fmt.Errorf("rebuilding: the run %s: %s (see %s)", res.Record.State, firstFailure(res), runDir)
	}
	rd, err := rundir.Open(runDir)
	if err != nil {
		return nil, err
	}
	ar, err := collect.FromRun(rd, p)
	if err != nil {
		return nil, err
	}
	if b.notes, err = compareSteps(ext.BuildSteps, ar.BuildSteps); err != nil {
		return nil, err
	}
	return b, b.hash(ctx, ar.Artifacts)
}

// hash records the digest of every rebuilt artifact (hashed again from
// the work tree) and of the release manifest they make.
func (b *built) hash(ctx context.Context, arts []attest.FileDigest) error {
	var files []oci.File
	for _, a := range arts {
		p := filepath.Join(b.work, filepath.FromSlash(a.Path))
		sum, n, err := digest.FileContext(ctx, p)
		if err != nil {
			return fmt.Errorf("rebuilt artifact %s: %w", a.Path, err)
		}
		b.digests[a.Path] = sum
		files = append(files, oci.File{Name: a.Path, Path: p, SHA256: sum, Size: n})
	}
	if len(files) == 0 {
		return nil
	}
	rel, err := oci.NewRelease(files)
	if err != nil {
		return fmt.Errorf("the rebuilt release manifest: %w", err)
	}
	b.digests[oci.ManifestSubjectName] = strings.TrimPrefix(rel.Digest(), "sha256:")
	return nil
}

func firstFailure(res *run.Result) string {
	for _, s := range res.Record.Steps {
		if s.State != runtypes.Passed {
			return fmt.Sprintf("step %s %s: %s", s.ID, s.State, s.Reason)
		}
	}
	return res.Record.Reason
}
