package attest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

var (
	sha256DigestRE = lazyregexp.New(`^sha256:[0-9a-f]{64}$`)
	sha256HexRE    = lazyregexp.New(`^[0-9a-f]{64}$`)
	commitRE       = lazyregexp.New(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
)

// Validate returns every problem of a decoded predicate beyond its
// shape, each with its field path: what schemas/predicate.schema.json
// says of the values.
func (p *ValidationPredicate) Validate() problem.List {
	var l problem.List
	oneOf(&l, "result", p.Result, "passed", "failed")
	if t := bytes.TrimSpace(p.Hardware); len(t) > 0 && t[0] != '{' {
		l.Add("hardware", "", "expected an object")
	}
	match(&l, "pipeline_digest", p.PipelineDigest, sha256DigestRE, "sha256:<64 hex digits>")
	if p.LockDigest != "" {
		match(&l, "lock_digest", p.LockDigest, sha256DigestRE, "sha256:<64 hex digits>")
	}
	if b := p.Build; b != nil {
		for i, a := range b.Artifacts {
			q := fmt.Sprintf("build.artifacts[%d]", i)
			match(&l, q+".sha256", a.SHA256, sha256HexRE, "64 hex digits")
			for j, c := range a.Cubins {
				match(&l, fmt.Sprintf("%s.cubins[%d].sha256", q, j), c.SHA256, sha256HexRE, "64 hex digits")
			}
		}
	}
	for i, r := range p.Results {
		match(&l, fmt.Sprintf("results[%d].sha256", i), r.SHA256, sha256HexRE, "64 hex digits")
	}
	for i, s := range p.Steps {
		q := fmt.Sprintf("steps[%d]", i)
		if s.Runner != "" {
			oneOf(&l, q+".runner", s.Runner, "host", "docker", "bwrap")
		}
		if s.Backend != "" {
			oneOf(&l, q+".backend", s.Backend, "cuda", "cpu")
		}
	}
	for i, b := range p.Benchmarks {
		for j, c := range b.Comparisons {
			q := fmt.Sprintf("benchmarks[%d].comparisons[%d]", i, j)
			oneOf(&l, q+".against", c.Against, "reference", "baseline")
			oneOf(&l, q+".verdict", c.Verdict, "SAME", "FASTER", "SLOWER", "AMBIGUOUS", "MISSING", "NEW")
			if c.Release != "" {
				match(&l, q+".release", c.Release, sha256DigestRE, "sha256:<64 hex digits>")
			}
		}
	}
	for i, b := range p.Burnin {
		if b.Telemetry != nil {
			oneOf(&l, fmt.Sprintf("burnin[%d].telemetry.verdict", i), b.Telemetry.Verdict, "passed", "failed")
		}
	}
	if s := p.Source; s != nil {
		match(&l, "source.commit", s.Commit, commitRE, "a git commit: 40 or 64 hex digits")
	}
	return l
}

func oneOf(l *problem.List, path, got string, want ...string) {
	if !slices.Contains(want, got) {
		l.Add(path, "", "%q: expected %s", got, strings.Join(want, ", "))
	}
}

func match(l *problem.List, path, got string, re *lazyregexp.Regexp, want string) {
	if !re.MatchString(got) {
		l.Add(path, "", "%q: expected %s", got, want)
	}
}
