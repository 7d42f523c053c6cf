package attest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

// ProvenancePredicateType is the SLSA Provenance v1 predicate type.
const ProvenancePredicateType = "https://slsa.dev/provenance/v1"

// BuildType is the buildType of gpuattest's SLSA provenance; its
// parameters are documented in the package documentation.
const BuildType = "https://gpuattest.dev/build/v1"

// Builder ids, one per trust mode of the runners that ran the build steps.
const (
	BuilderHost      = "https://gpuattest.dev/builder/host/v1"
	BuilderContainer = "https://gpuattest.dev/builder/container/v1"
)

// Provenance is a SLSA Provenance v1 predicate.
type Provenance struct {
	// BuildDefinition says what was built and from what.
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	// RunDetails says who built it and how the run went.
	RunDetails RunDetails `json:"runDetails"`
}

// BuildDefinition is SLSA's buildDefinition.
type BuildDefinition struct {
	// BuildType is BuildType.
	BuildType string `json:"buildType"`
	// ExternalParameters are the pipeline and the selected steps.
	ExternalParameters ExternalParameters `json:"externalParameters"`
	// InternalParameters are the runner kind and the gpuattest version.
	InternalParameters InternalParameters `json:"internalParameters"`
	// ResolvedDependencies are the pipeline, lock, images, sources and tools.
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// ExternalParameters are the build's external parameters.
type ExternalParameters struct {
	// Source is the git source the build ran in: repository URI, commit
	// and whether the tree was dirty; absent outside a git work tree.
	Source *Source `json:"source,omitempty"`
	// Pipeline is the pipeline file.
	Pipeline PipelineParam `json:"pipeline"`
	// Steps are the selected step ids (empty: all steps).
	Steps []string `json:"steps"`
	// BuildSteps are the normalised build steps (cuda-build and exec), in
	// pipeline order: what a rebuild runs.
	BuildSteps []BuildStep `json:"buildSteps"`
}

// PipelineParam names the pipeline file.
type PipelineParam struct {
	// Path is the pipeline file's path, relative to the source root.
	Path string `json:"path"`
	// Digest is "sha256:<hex>" of the pipeline file.
	Digest string `json:"digest,omitempty"`
	// Ref is an optional source ref (git commit).
	Ref string `json:"ref,omitempty"`
}

// GitCommitDigest is the digest algorithm name of a git commit in
// resource descriptors (in-toto's gitCommit).
const GitCommitDigest = "gitCommit"

// sourceDescriptor is the resolved dependency of a git source: its URI
// and the commit as a gitCommit digest.
func sourceDescriptor(src *Source) (ResourceDescriptor, error) {
	if !gitCommitRE.MatchString(src.Commit) {
		return ResourceDescriptor{}, fmt.Errorf("commit %q: expected 40 or 64 lowercase hex digits", src.Commit)
	}
	rd := ResourceDescriptor{Name: "source", URI: src.URI, Digest: map[string]string{GitCommitDigest: src.Commit}}
	if src.Dirty {
		rd.Annotations = map[string]string{"dirty": "true"}
	}
	return rd, nil
}

var gitCommitRE = lazyregexp.New(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// toolDescriptor is the resolved dependency of a toolchain binary.
func toolDescriptor(t Tool) (ResourceDescriptor, error) {
	rd := ResourceDescriptor{Name: t.Name, Annotations: map[string]string{}}
	for k, v := range map[string]string{"version": t.Version, "path": t.Path, "image": t.Image} {
		if v != "" {
			rd.Annotations[k] = v
		}
	}
	if len(rd.Annotations) == 0 {
		rd.Annotations = nil
	}
	if t.SHA256 != "" {
		d, err := digestMap(t.SHA256)
		if err != nil {
			return ResourceDescriptor{}, err
		}
		rd.Digest = d
	}
	return rd, nil
}

// InternalParameters are the build's internal parameters.
type InternalParameters struct {
	// Runner is the runner kind of the build steps (host, docker, bwrap,
	// or a comma-separated list when they differ).
	Runner string `json:"runner"`
	// GpuattestVersion is gpuattest's version.
	GpuattestVersion string `json:"gpuattest_version"`
}

// ResourceDescriptor is an in-toto ResourceDescriptor.
type ResourceDescriptor struct {
	// Name names the resource.
	Name string `json:"name,omitempty"`
	// URI locates the resource.
	URI string `json:"uri,omitempty"`
	// Digest maps algorithm to hex digest.
	Digest map[string]string `json:"digest,omitempty"`
	// MediaType is the resource's media type, when known.
	MediaType string `json:"mediaType,omitempty"`
	// Annotations carry extra facts (tool versions, a test-result
	// configuration's gpuattest.role).
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RunDetails is SLSA's runDetails.
type RunDetails struct {
	// Builder identifies the builder.
	Builder Builder `json:"builder"`
	// Metadata holds the invocation id and times.
	Metadata BuildMetadata `json:"metadata"`
	// Byproducts are logs and reports.
	Byproducts []ResourceDescriptor `json:"byproducts,omitempty"`
}

// Builder is SLSA's builder.
type Builder struct {
	// ID is BuilderHost or BuilderContainer.
	ID string `json:"id"`
	// Version maps component to version.
	Version map[string]string `json:"version,omitempty"`
}

// BuildMetadata is SLSA's run metadata.
type BuildMetadata struct {
	// InvocationID is the run id.
	InvocationID string `json:"invocationId,omitempty"`
	// StartedOn is when the run started.
	StartedOn time.Time `json:"startedOn"`
	// FinishedOn is when the run finished.
	FinishedOn time.Time `json:"finishedOn"`
}

// digestMap turns "sha256:<hex>" or "<hex>" into a digest map.
func digestMap(d string) (map[string]string, error) {
	h := strings.TrimPrefix(d, "sha256:")
	if !hexSHA256.MatchString(h) {
		return nil, fmt.Errorf("digest %q: expected sha256:<64 hex digits>", d)
	}
	return map[string]string{"sha256": h}, nil
}

// imageDescriptor describes a container image: name, URI and manifest
// digest, with the index and config digests and the platform as
// annotations.
func imageDescriptor(im Image) (ResourceDescriptor, error) {
	d, err := digestMap(im.Digest)
	if err != nil {
		return ResourceDescriptor{}, err
	}
	if im.URI == "" {
		return ResourceDescriptor{}, errors.New("no URI")
	}
	rd := ResourceDescriptor{Name: im.Name, URI: im.URI, Digest: d}
	for k, v := range map[string]string{"index_digest": im.IndexDigest, "config_digest": im.ConfigDigest, "platform": im.Platform} {
		if v == "" {
			continue
		}
		if k != "platform" && !prefixSHA256.MatchString(v) {
			return ResourceDescriptor{}, fmt.Errorf("%s %q: expected sha256:<64 hex digits>", k, v)
		}
		if rd.Annotations == nil {
			rd.Annotations = map[string]string{}
		}
		rd.Annotations[k] = v
	}
	return rd, nil
}

// ProvenanceFor builds the SLSA Provenance v1 predicate of run's builds.
func ProvenanceFor(run *Run) (*Provenance, error) {
	if run == nil {
		return nil, errors.New("nil run")
	}
	deps, errs := resolvedDependencies(run)
	var byproducts []ResourceDescriptor
	for i, b := range run.Byproducts {
		d, err := digestMap(b.SHA256)
		if err != nil {
			errs = append(errs, fmt.Errorf("byproducts[%d] (%s): %w", i, b.Path, err))
			continue
		}
		byproducts = append(byproducts, ResourceDescriptor{Name: b.Path, Digest: d})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// The builder id is the weakest trust mode among the build steps.
	var runners []string
	builder := BuilderContainer
	for _, s := range run.Steps {
		if s.Kind != "cuda-build" {
			continue
		}
		r := s.Runner
		if r == "" {
			r = "host"
		}
		if !slices.Contains(runners, r) {
			runners = append(runners, r)
		}
		if r == "host" {
			builder = BuilderHost
		}
	}
	if len(runners) == 0 {
		builder = BuilderHost
		runners = []string{"host"}
	}
	steps := run.SelectedSteps
	if steps == nil {
		steps = []string{}
	}
	buildSteps := run.BuildSteps
	if buildSteps == nil {
		buildSteps = []BuildStep{}
	}
	return &Provenance{
		BuildDefinition: BuildDefinition{
			BuildType: BuildType,
			ExternalParameters: ExternalParameters{Source: run.Source, Pipeline: PipelineParam{Path: run.PipelinePath, Digest: run.PipelineDigest, Ref: run.PipelineRef},
				Steps: steps, BuildSteps: buildSteps},
			InternalParameters:   InternalParameters{Runner: strings.Join(runners, ","), GpuattestVersion: run.Version},
			ResolvedDependencies: deps,
		},
		RunDetails: RunDetails{
			Builder:    Builder{ID: builder, Version: map[string]string{"gpuattest": run.Version}},
			Metadata:   BuildMetadata{InvocationID: run.ID, StartedOn: run.StartedAt.UTC(), FinishedOn: run.FinishedAt.UTC()},
			Byproducts: byproducts,
		},
	}, nil
}

// ProvenanceStatement builds the SLSA Provenance v1 statement of run's
// builds, with run.Artifacts as subjects.
func ProvenanceStatement(run *Run) (*Statement, error) {
	p, err := ProvenanceFor(run)
	if err != nil {
		return nil, fmt.Errorf("building provenance: %w", err)
	}
	return newStatement(run.Artifacts, ProvenancePredicateType, p)
}

// resolvedDependencies are run's source commit, pipeline, lock, images,
// source files and toolchain binaries, with every problem found.
func resolvedDependencies(run *Run) ([]ResourceDescriptor, []error) {
	var errs []error
	var deps []ResourceDescriptor
	if run.Source != nil {
		if rd, err := sourceDescriptor(run.Source); err != nil {
			errs = append(errs, fmt.Errorf("source: %w", err))
		} else {
			deps = append(deps, rd)
		}
	}
	for i, st := range run.BuildSteps {
		if st.Image != "" && !strings.HasPrefix(st.Image, "oci://") && !strings.HasPrefix(st.Image, "pkg:oci/") {
			errs = append(errs, fmt.Errorf("buildSteps[%d] (%s).image %q: expected oci://REPO@sha256:<hex> or pkg:oci/NAME@sha256%%3A<hex>, never a path", i, st.ID, st.Image))
		}
	}
	if d, err := digestMap(run.PipelineDigest); err != nil {
		errs = append(errs, fmt.Errorf("pipeline_digest: %w", err))
	} else {
		deps = append(deps, ResourceDescriptor{Name: "pipeline", URI: run.PipelinePath, Digest: d})
	}
	if run.LockDigest != "" {
		if d, err := digestMap(run.LockDigest); err != nil {
			errs = append(errs, fmt.Errorf("lock_digest: %w", err))
		} else {
			deps = append(deps, ResourceDescriptor{Name: "lock", Digest: d})
		}
	}
	for i, im := range run.Images {
		rd, err := imageDescriptor(im)
		if err != nil {
			errs = append(errs, fmt.Errorf("images[%d] (%s): %w", i, im.Name, err))
			continue
		}
		deps = append(deps, rd)
	}
	for i, s := range run.Sources {
		d, err := digestMap(s.SHA256)
		if err != nil {
			errs = append(errs, fmt.Errorf("sources[%d] (%s): %w", i, s.Path, err))
			continue
		}
		deps = append(deps, ResourceDescriptor{Name: s.Path, Digest: d})
	}
	for _, t := range run.Toolchain {
		rd, err := toolDescriptor(t)
		if err != nil {
			errs = append(errs, fmt.Errorf("toolchain %s: %w", t.Name, err))
			continue
		}
		deps = append(deps, rd)
	}
	return deps, errs
}
