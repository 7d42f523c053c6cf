package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/policy"
)

// Verify checks entries and artifacts against the Verifier's criteria.
// Every bundle must verify; every artifact must be a subject of a verified
// bundle of the predicate type; the policy is evaluated over each such
// bundle that covers a given artifact (or every such bundle when no
// artifact is given). It is CheckBundles followed by Complete.
func (v *Verifier) Verify(ctx context.Context, entries []Entry, artifacts []Artifact) *Report {
	return v.Complete(ctx, v.CheckBundles(ctx, entries), artifacts)
}

// Checked is the part of a verification that needs no artifact: each
// bundle's signature checked and its statement read. Complete finishes
// it, once.
type Checked struct {
	r          *Report
	hadEntries bool
}

// CheckBundles checks the signature of every entry, in order, until ctx
// is done: what Verify does before it looks at an artifact, so that a
// caller can do it while the artifacts are hashed.
func (v *Verifier) CheckBundles(ctx context.Context, entries []Entry) *Checked {
	r := &Report{
		PredicateType:     v.opts.predicateType,
		Checks:            []Check{},
		Bundles:           []BundleResult{},
		VerifiedAt:        v.opts.now().UTC(),
		SimulatedAccepted: v.opts.allowSimulated,
	}
	if v.program != nil {
		r.Policy = v.program.Policy().Source()
	}
	v.verifyEntries(ctx, r, entries)
	return &Checked{r: r, hadEntries: len(entries) > 0}
}

// Covers reports whether a bundle c checked verified, has the
// Verifier's predicate type and names a as a subject: what a reader of
// a published release asks of the manifest before it downloads the
// files that the manifest names.
func (c *Checked) Covers(a Artifact) bool {
	if c.r == nil {
		return false
	}
	for i := range c.r.Bundles {
		b := &c.r.Bundles[i]
		if !b.Verified || b.PredicateType != c.r.PredicateType {
			continue
		}
		for _, s := range b.Subjects {
			if strings.EqualFold(s.Digest["sha256"], a.SHA256) {
				return true
			}
		}
	}
	return false
}

// Complete checks the artifacts against the bundles c checked, evaluates
// the policy and returns the report. c must come from CheckBundles on v
// and is spent.
func (v *Verifier) Complete(ctx context.Context, c *Checked, artifacts []Artifact) *Report {
	r := c.r
	if r == nil {
		panic("verify: Complete called twice with the same Checked")
	}
	c.r = nil
	r.Criteria = v.Criteria(artifacts)
	r.Artifacts = artifacts
	if artifacts == nil {
		r.Artifacts = []Artifact{}
	}
	typed := v.checkPredicateType(r, c.hadEntries)
	covering := v.checkSubjects(r, typed, artifacts)
	v.readPredicates(ctx, r, covering, artifacts)
	if v.program != nil {
		v.checkCoverage(r, typed, artifacts)
	}
	if v.opts.allowSimulated {
		r.add(Check{Check: CheckSimulated, Target: "bundles", Passed: true, Detail: simulatedCount(typed)})
	}
	r.finish()
	return r
}

// simulatedCount says how many of the bundles ran on simulated hardware.
func simulatedCount(typed []*BundleResult) string {
	n := 0
	for _, b := range typed {
		if b.simulated {
			n++
		}
	}
	return fmt.Sprintf("accepted: %d of %d bundle(s) ran on simulated hardware", n, len(typed))
}

// readPredicates decodes each verified bundle's predicate once, where
// something reads it, drops the tree after: the validation result, and
// for the bundles of the predicate type the simulated flag, the policy's
// rules (in order, within the policy's cost budget, on the bundles that
// cover an artifact when artifacts are given) and the coverage facts.
func (v *Verifier) readPredicates(ctx context.Context, r *Report, covering map[*BundleResult]bool, artifacts []Artifact) {
	budget := v.opts.policyCost
	cov := v.program != nil && v.program.Policy().Coverage != nil && v.program.Policy().Coverage.Targets
	for i := range r.Bundles {
		b := &r.Bundles[i]
		if !b.Verified || b.statement == nil {
			continue
		}
		typed := b.PredicateType == v.opts.predicateType
		b.Judged = typed && (len(artifacts) == 0 || covering[b])
		rules := v.program != nil && b.Judged
		validation := b.PredicateType == attest.ValidationPredicateType
		if !validation && !(typed && (rules || cov || v.opts.allowSimulated)) {
			continue
		}
		// A predicate that does not decode is reported by the readers
		// that need it, each of which then decodes it again and fails.
		pred, err := policy.DecodePredicate(b.statement.Predicate)
		if err == nil {
			b.simulated = pred.Bool("simulated")
			if validation {
				b.Result = pred.String("result")
			}
		}
		var gpus []policy.GPUEvidence
		if validation && b.Judged {
			gpus = v.checkGPUEvidence(ctx, r, b)
		}
		if rules {
			budget -= min(budget, v.checkPolicy(ctx, r, b, pred, gpus, max(budget, 1)))
		}
		if cov && typed {
			b.coverage, b.coverageErr = policy.ReadCoverageFacts(policy.CoverageInput{Source: b.Source, Predicate: b.statement.Predicate, Decoded: pred}, v.opts.allowSimulated)
		}
	}
}

// verifyEntries verifies every bundle, in order, until ctx is done.
func (v *Verifier) verifyEntries(ctx context.Context, r *Report, entries []Entry) {
	if len(entries) == 0 {
		r.add(Check{Check: CheckSignature, Target: "bundles", Detail: "no bundles given"})
		r.fail(FailureError)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			r.add(Check{Check: CheckSignature, Target: e.Source, Detail: err.Error()})
			r.fail(FailureError)
			return
		}
		br := v.verifyBundle(r, e)
		v.opts.logger.DebugContext(ctx, "bundle checked", "source", e.Source, "verified", br.Verified, "predicate_type", br.PredicateType, "left_out", br.leftOut)
		if !br.leftOut {
			r.Bundles = append(r.Bundles, br)
		}
	}
}

// checkPredicateType returns the verified bundles of the predicate type
// and checks that there is at least one.
func (v *Verifier) checkPredicateType(r *Report, haveEntries bool) []*BundleResult {
	var typed []*BundleResult
	for i := range r.Bundles {
		b := &r.Bundles[i]
		if b.Verified && b.PredicateType == v.opts.predicateType {
			typed = append(typed, b)
		}
	}
	if !haveEntries {
		return typed
	}
	c := Check{Check: CheckPredicateType, Target: "bundles", Passed: len(typed) > 0}
	if c.Passed {
		c.Detail = fmt.Sprintf("%d of %d bundle(s) have predicate type %s", len(typed), len(r.Bundles), v.opts.predicateType)
	} else {
		c.Detail = fmt.Sprintf("no verified bundle has predicate type %s", v.opts.predicateType)
		r.fail(FailurePolicy)
	}
	r.add(c)
	return typed
}

// checkSubjects checks that every artifact is a subject of a typed
// bundle and returns the bundles that cover an artifact.
func (v *Verifier) checkSubjects(r *Report, typed []*BundleResult, artifacts []Artifact) map[*BundleResult]bool {
	covering := map[*BundleResult]bool{}
	if len(artifacts) == 0 && v.opts.requireArtifacts {
		r.add(Check{Check: CheckSubject, Target: "artifacts", Detail: "no artifact given: at least one is required (--require-artifacts)"})
		r.fail(FailureSubject)
	}
	for _, a := range artifacts {
		c := Check{Check: CheckSubject, Target: a.Name}
		var names []string
		for _, b := range typed {
			for _, s := range b.Subjects {
				if strings.EqualFold(s.Digest["sha256"], a.SHA256) {
					covering[b] = true
					names = append(names, fmt.Sprintf("%s in %s", s.Name, b.Source))
				}
			}
		}
		if len(names) > 0 {
			c.Passed = true
			c.Detail = "sha256:" + a.SHA256 + " is subject " + strings.Join(names, ", ")
		} else {
			c.Detail = "sha256:" + a.SHA256 + " is not a subject of any verified " + v.opts.predicateType + " bundle"
			if len(typed) > 0 {
				// Without any bundle of the type the predicate type
				// check already failed; that is the cause to report.
				r.fail(FailureSubject)
			}
		}
		r.add(c)
	}
	return covering
}

// checkPolicy evaluates the policy over b's statement, its predicate
// decoded as pred (nil: not decodable), its GPUs' evidence as gpus, within budget cost units and
// returns what it cost.
func (v *Verifier) checkPolicy(ctx context.Context, r *Report, b *BundleResult, pred *policy.Predicate, gpus []policy.GPUEvidence, budget uint64) uint64 {
	subj, err := json.Marshal(b.statement.Subject)
	if err != nil {
		r.add(Check{Check: CheckPolicy, Target: b.Source, Detail: err.Error()})
		r.fail(FailureError)
		return 0
	}
	results, err := v.program.Evaluate(ctx, policy.Input{
		PredicateType: b.statement.PredicateType,
		Predicate:     b.statement.Predicate,
		Decoded:       pred,
		Subjects:      subj,
		GPUEvidence:   gpus,
	}, policy.WithCostLimit(budget))
	switch {
	case err != nil && ctx.Err() != nil:
		r.add(Check{Check: CheckPolicy, Target: b.Source, Detail: "policy not evaluated: " + err.Error()})
		r.fail(FailureError)
		return 0
	case err != nil:
		r.add(Check{Check: CheckPolicy, Target: b.Source, Detail: err.Error()})
		r.fail(FailurePolicy)
		return 0
	}
	var cost uint64
	for _, res := range results {
		cost += res.Cost
		c := Check{Check: CheckPolicy, Target: b.Source + ": " + res.Name, Passed: res.Passed}
		switch {
		case res.CostLimitExceeded:
			c.Detail = fmt.Sprintf("error: not decided: the policy may cost %d units over all bundles (--max-policy-cost)", v.opts.policyCost)
			r.fail(FailureError)
		case res.Error != "":
			c.Detail = "error: " + res.Error
		case !res.Passed && res.Message != "":
			c.Detail = res.Message
		case res.Passed:
			c.Detail = "holds"
		default:
			c.Detail = "does not hold: " + res.Expr
		}
		if !res.Passed {
			r.fail(FailurePolicy)
		}
		r.add(c)
	}
	return cost
}
