package verify

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/policy"
)

// CoverageResult is the target coverage of one group of bundles.
type CoverageResult struct {
	// Artifacts are the artifacts whose bundles were taken together;
	// empty when no artifact was given and every bundle was.
	Artifacts []string `json:"artifacts,omitempty"`
	// Bundles are the bundles taken together.
	Bundles []string `json:"bundles"`
	// Targets are the targets and whether each is covered.
	Targets []policy.TargetCoverage `json:"targets"`
}

// checkCoverage checks the policy's target coverage. Without artifacts
// all the verified bundles of the predicate type are taken together;
// with artifacts, for each artifact the bundles that name it as a
// subject (the release manifest's subject, attest.ManifestSubjectName,
// is skipped: it names no built artifact), so that a target is covered
// for the very bytes given.
func (v *Verifier) checkCoverage(r *Report, typed []*BundleResult, artifacts []Artifact) {
	cov := v.program.Policy().Coverage
	if cov == nil || !cov.Targets {
		return
	}
	// Each bundle's predicate was read once (readPredicates), whatever
	// groups it is in; an unreadable one is reported once.
	reported := map[*BundleResult]bool{}
	for _, g := range coverageGroups(typed, artifacts) {
		res := CoverageResult{Artifacts: g.artifacts}
		label := ""
		if len(g.artifacts) > 0 {
			label = names(g.artifacts) + ": "
		}
		var fs []*policy.CoverageFacts
		for _, b := range g.bundles {
			res.Bundles = append(res.Bundles, b.Source)
			if !reported[b] && b.coverageErr != nil {
				r.add(Check{Check: CheckCoverage, Target: b.Source, Detail: b.coverageErr.Error()})
				r.fail(FailurePolicy)
			}
			reported[b] = true
			if b.coverage != nil {
				fs = append(fs, b.coverage)
			}
		}
		res.Targets = cov.Judge(fs)
		r.Coverage = append(r.Coverage, res)
		for _, t := range res.Targets {
			r.add(Check{Check: CheckCoverage, Target: label + t.Target, Passed: t.Covered, Detail: t.Detail})
			if !t.Covered {
				r.fail(FailurePolicy)
			}
		}
	}
}

// coverageGroup is bundles taken together for coverage.
type coverageGroup struct {
	artifacts []string
	bundles   []*BundleResult
}

// coverageGroups groups the bundles: one group of all without artifacts;
// else one per set of bundles that name an artifact, with the artifacts
// it covers. An artifact no bundle names (a subject failure already) or
// names only as the release manifest forms no group; when none forms one,
// the bundles that name any artifact (the manifest included) are one
// group, so that coverage is never left unjudged.
func coverageGroups(typed []*BundleResult, artifacts []Artifact) []coverageGroup {
	if len(artifacts) == 0 {
		if len(typed) == 0 {
			return nil
		}
		return []coverageGroup{{bundles: typed}}
	}
	var out []coverageGroup
	index := map[string]int{}
	for _, a := range artifacts {
		var bs []*BundleResult
		var key []string
		for _, b := range typed {
			if namesArtifact(b, a) {
				bs = append(bs, b)
				key = append(key, b.Source)
			}
		}
		if len(bs) == 0 {
			continue
		}
		k := strings.Join(key, "\x00")
		if i, ok := index[k]; ok {
			out[i].artifacts = append(out[i].artifacts, a.Name)
			continue
		}
		index[k] = len(out)
		out = append(out, coverageGroup{artifacts: []string{a.Name}, bundles: bs})
	}
	if len(out) == 0 {
		return manifestGroup(typed, artifacts)
	}
	return out
}

// manifestGroup is the group of the bundles that name any of artifacts
// as a subject, whatever its name; none when no bundle does.
func manifestGroup(typed []*BundleResult, artifacts []Artifact) []coverageGroup {
	g := coverageGroup{}
	for _, a := range artifacts {
		g.artifacts = append(g.artifacts, a.Name)
	}
	for _, b := range typed {
		for _, s := range b.Subjects {
			if slices.ContainsFunc(artifacts, func(a Artifact) bool { return strings.EqualFold(s.Digest["sha256"], a.SHA256) }) {
				g.bundles = append(g.bundles, b)
				break
			}
		}
	}
	if len(g.bundles) == 0 {
		return nil
	}
	return []coverageGroup{g}
}

// namesArtifact reports whether b has a as a subject other than the
// release manifest.
func namesArtifact(b *BundleResult, a Artifact) bool {
	for _, s := range b.Subjects {
		if s.Name != attest.ManifestSubjectName && strings.EqualFold(s.Digest["sha256"], a.SHA256) {
			return true
		}
	}
	return false
}

// names lists artifact names for a check's target, at most three.
func names(ns []string) string {
	s := append([]string(nil), ns...)
	sort.Strings(s)
	if len(s) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(s[:3], ", "), len(s)-3)
	}
	return strings.Join(s, ", ")
}
