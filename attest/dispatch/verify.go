package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// Verdicts of a job in a Report.
const (
	VerdictPassed    = "passed"
	VerdictFailed    = "failed"
	VerdictMissing   = "missing"
	VerdictDuplicate = "duplicate"
)

// Report is the outcome of Verify.
type Report struct {
	// Verified is true when the dispatch verified and every job passed.
	Verified bool `json:"verified"`
	// Failure is the most fundamental failure: FailureSignature when the
	// dispatch itself did not verify, FailureSubject when its subjects are
	// not the files read (Options.Files), FailurePolicy when a job is
	// missing, duplicated, foreign, on the wrong hardware or failed, or a
	// target is not covered.
	Failure verify.Failure `json:"failure"`
	// Dispatch is the verified dispatch; nil when it did not verify.
	Dispatch *Dispatch `json:"dispatch,omitempty"`
	// DispatchDigest is the dispatch statement's digest.
	DispatchDigest string `json:"dispatchDigest,omitempty"`
	// Signer describes the key or identity that signed the dispatch.
	Signer string `json:"signer,omitempty"`
	// HostSteps is how the owner's dispatch lets the nodes run
	// host-runner steps (Dispatch.HostStepsMode): each node's own claim
	// (JobResult.Sandbox) is checked against it.
	HostSteps string `json:"hostSteps,omitempty"`
	// Jobs has one row per job of the dispatch, in its order.
	Jobs []JobResult `json:"jobs"`
	// Rejected are node bundles that count for no job, with why.
	Rejected []Rejected `json:"rejected,omitempty"`
	// Coverage says, for each pinned target, which jobs cover it.
	Coverage []Coverage `json:"coverage,omitempty"`
	// Problems are everything that failed, one line each.
	Problems []string `json:"problems,omitempty"`
	// SimulatedAccepted is true when simulated GPUs were accepted.
	SimulatedAccepted bool `json:"simulatedAccepted,omitempty"`
	// Artifacts counts the artifacts checked against the dispatch's
	// subjects (Options.Artifacts).
	Artifacts int `json:"artifacts"`

	subjectFailed bool
}

// JobResult is one job's row.
type JobResult struct {
	Job       string `json:"job"`
	Class     string `json:"class"`
	JobID     string `json:"jobId,omitempty"`
	Node      string `json:"node,omitempty"`
	Verdict   string `json:"verdict"`
	Detail    string `json:"detail,omitempty"`
	Simulated bool   `json:"simulated,omitempty"`
	Source    string `json:"source,omitempty"`
	// GPU describes the node's GPUs as its bundle records them:
	// "2x NVIDIA H100 80GB HBM3 (9.0)", simulated ones said so.
	GPU string `json:"gpu,omitempty"`
	// Sandbox is how the node says it ran the host-runner steps
	// (Node.Sandbox): SandboxBwrap, SandboxNone, or empty.
	Sandbox string `json:"sandbox,omitempty"`
	// Arch is the architecture the node's gpuattest was built for
	// (Node.Arch); empty when it recorded none.
	Arch string `json:"arch,omitempty"`
	// GPUEvidence says what the node's GPUs signed over the job's nonce
	// ("GPU evidence: 8/8 device-signed", or the unattested and why);
	// empty when the node recorded none and none is required.
	GPUEvidence string `json:"gpuEvidence,omitempty"`
}

// Rejected is a node bundle that counts for no job.
type Rejected struct {
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Options tune Verify.
type Options struct {
	// AllowSimulated accepts simulated GPUs (tests and demos).
	AllowSimulated bool
	// Files, when not nil, are the released files as read (name to hex
	// sha256) and Manifest the digest of their release manifest: each
	// subject of the dispatch must be one of them (or the manifest).
	Files    map[string]string
	Manifest string
	// Artifacts are files given to check (verify --bundle ... ARTIFACT):
	// each one's sha256 must be that of a subject of the dispatch.
	// RequireArtifacts fails the verification when none is given.
	Artifacts        []verify.Artifact
	RequireArtifacts bool
	// GPUEvidence verifies the nodes' GPU evidence with these options
	// (gpuevidence.WithDeviceRoot for simulated GPUs' test root,
	// collateral); NVIDIA's pinned roots without. RequireGPUEvidence
	// fails a job one of whose GPUs is not device-signed.
	GPUEvidence        []gpuevidence.Option
	RequireGPUEvidence bool
}

// HasDispatch reports whether a fleet dispatch is among entries, by the
// predicate type of their statements as read, unverified: a release
// with one verifies with VerifyEntries.
func HasDispatch(entries []verify.Entry) bool {
	for _, e := range entries {
		if st, err := sign.UnverifiedStatement(e.Data); err == nil && st.PredicateType == PredicateType {
			return true
		}
	}
	return false
}

// FleetRelease reports whether entries are a fleet release's, to verify
// with the dispatch's checks (VerifyEntries) rather than as an ordinary
// release judged by its bundles of predicateType: a dispatch is among
// them, and either one verifies with owner (the owner's key or identity,
// as for verify.New) and names manifest as its release manifest (any,
// when manifest is empty), or no bundle of predicateType is among them
// (the owner's material is wrong, and the dispatch's signature check
// says so). A dispatch that someone else signed, or the owner's
// dispatch of another release, added to an ordinary release does not
// make it a fleet release: the ordinary verification leaves it out
// (verify.WithLeftOut).
func FleetRelease(ctx context.Context, entries []verify.Entry, owner []verify.Option, predicateType, manifest string) bool {
	var disp []verify.Entry
	typed := false
	for _, e := range entries {
		st, err := sign.UnverifiedStatement(e.Data)
		if err != nil {
			continue
		}
		switch st.PredicateType {
		case PredicateType:
			disp = append(disp, e)
		case predicateType:
			typed = true
		}
	}
	if len(disp) == 0 {
		return false
	}
	if !typed {
		return true
	}
	for _, e := range disp {
		st, _, err := verifyOne(ctx, e, PredicateType, owner)
		if err == nil && (manifest == "" || namesManifest(st, manifest)) {
			return true
		}
	}
	return false
}

// namesManifest reports whether st names the release manifest digest
// ("sha256:<hex>").
func namesManifest(st *attest.Statement, manifest string) bool {
	for _, s := range st.Subject {
		if s.Name == manifestSubject && "sha256:"+s.Digest["sha256"] == manifest {
			return true
		}
	}
	return false
}

// VerifyEntries is Verify for bundles as a registry or an OCI layout
// lists them: the one dispatch among entries, and the node bundles; other
// bundles are left out. It is an error when entries hold no dispatch.
func VerifyEntries(ctx context.Context, entries []verify.Entry, owner []verify.Option, o Options) (*Report, error) {
	var disp []verify.Entry
	var nodes []verify.Entry
	for _, e := range entries {
		st, err := sign.UnverifiedStatement(e.Data)
		switch {
		case err != nil:
			nodes = append(nodes, e) // reported as counting for no job
		case st.PredicateType == PredicateType:
			disp = append(disp, e)
		case st.PredicateType == NodePredicateType:
			nodes = append(nodes, e)
		}
	}
	switch len(disp) {
	case 0:
		return nil, errors.New("no fleet dispatch among the bundles\nhint: this release was not made by run --fleet; verify it with gpuattest verify")
	case 1:
		return Verify(ctx, disp[0], owner, nodes, o)
	}
	sources := make([]string, len(disp))
	for i, e := range disp {
		sources[i] = e.Source
	}
	r := &Report{Jobs: []JobResult{}, Failure: verify.FailurePolicy}
	r.Problems = append(r.Problems, fmt.Sprintf("%d dispatches among the bundles (%s): a release has one", len(disp), strings.Join(sources, ", ")))
	return r, nil
}

// checkFiles checks the dispatch's subjects against the files read, and
// the artifacts given against its subjects.
func (r *Report) checkFiles(st *attest.Statement, o Options) {
	r.checkArtifacts(st, o)
	if o.Files == nil {
		return
	}
	for _, sub := range st.Subject {
		want := sub.Digest["sha256"]
		if sub.Name == manifestSubject {
			if "sha256:"+want != o.Manifest {
				r.Problems = append(r.Problems, fmt.Sprintf("the dispatch signs release manifest sha256:%s, the release read is %s", want, o.Manifest))
				r.subjectFailed = true
			}
			continue
		}
		if got, ok := o.Files[sub.Name]; !ok || got != want {
			r.Problems = append(r.Problems, fmt.Sprintf("subject %s (sha256:%s) is not a file of the release read", sub.Name, want))
			r.subjectFailed = true
		}
	}
}

// checkArtifacts checks that each artifact given is a subject of the
// dispatch, by its sha256.
func (r *Report) checkArtifacts(st *attest.Statement, o Options) {
	r.Artifacts = len(o.Artifacts)
	if len(o.Artifacts) == 0 && o.RequireArtifacts {
		r.Problems = append(r.Problems, "no artifact given, and artifacts are required\nhint: name the released files after the bundles")
		r.subjectFailed = true
	}
	subjects := map[string]bool{}
	for _, sub := range st.Subject {
		subjects[sub.Digest["sha256"]] = true
	}
	for _, a := range o.Artifacts {
		if !subjects[a.SHA256] {
			r.Problems = append(r.Problems, fmt.Sprintf("artifact %s (sha256:%s) is not a subject of the dispatch", a.Name, a.SHA256))
			r.subjectFailed = true
		}
	}
}

// manifestSubject is the subject name of the release manifest
// (attest.ManifestSubjectName).
const manifestSubject = attest.ManifestSubjectName

// Verify checks the dispatch bundle against the owner's verification
// options (a key or a trusted root and identity, as for verify.New),
// then every node bundle against the key the dispatch delegated to the
// job it claims: a bundle signed by any other key, the owner's included,
// counts for no job. Every job must report exactly once, with its nonce,
// this dispatch's digest, a passing result and GPUs matching its class.
func Verify(ctx context.Context, dispatchEntry verify.Entry, owner []verify.Option, nodes []verify.Entry, o Options) (*Report, error) {
	r := &Report{Jobs: []JobResult{}, SimulatedAccepted: o.AllowSimulated}
	st, signer, err := verifyOne(ctx, dispatchEntry, PredicateType, owner)
	if err != nil {
		r.Failure = verify.FailureSignature
		r.Problems = append(r.Problems, "dispatch: "+err.Error())
		return r, nil
	}
	r.Signer = signer
	return r, r.checkNodes(ctx, st, nodes, o)
}

// CheckNodes is Verify without the check of the dispatch's own signature:
// the coordinator that signed the dispatch checks the node bundles it
// collected with it.
func CheckNodes(ctx context.Context, dispatchEntry verify.Entry, nodes []verify.Entry, o Options) (*Report, error) {
	r := &Report{Jobs: []JobResult{}, SimulatedAccepted: o.AllowSimulated}
	st, err := sign.UnverifiedStatement(dispatchEntry.Data)
	if err != nil {
		r.Failure = verify.FailureSignature
		r.Problems = append(r.Problems, "dispatch: "+err.Error())
		return r, nil
	}
	return r, r.checkNodes(ctx, st, nodes, o)
}

// checkNodes decodes the dispatch st and checks every node bundle
// against it.
func (r *Report) checkNodes(ctx context.Context, st *attest.Statement, nodes []verify.Entry, o Options) error {
	d, err := Decode(st)
	if err != nil {
		r.Failure = verify.FailureSignature
		r.Problems = append(r.Problems, "dispatch: "+err.Error())
		return nil
	}
	r.checkFiles(st, o)
	r.Dispatch = d
	r.HostSteps = d.HostStepsMode()
	if len(d.Jobs) == 0 {
		r.Problems = append(r.Problems, "the dispatch has no jobs: it delegates to no node, so it proves nothing ran on any hardware")
	}
	if r.DispatchDigest, err = Digest(st); err != nil {
		return err
	}
	seen := map[string][]*Node{}
	sources := map[string][]string{}
	for _, e := range nodes {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, reason := r.node(ctx, d, st, e, o)
		if n == nil {
			r.Rejected = append(r.Rejected, Rejected{Source: e.Source, Reason: reason})
			r.Problems = append(r.Problems, fmt.Sprintf("%s: counts for no job: %s", e.Source, reason))
			continue
		}
		seen[n.Job] = append(seen[n.Job], n)
		sources[n.Job] = append(sources[n.Job], e.Source)
	}
	nodesOfClass := map[string]map[string]string{}
	passed := map[string]*Node{}
	for _, j := range d.Jobs {
		row := JobResult{Job: j.Name, Class: j.Class}
		ns := seen[j.Name]
		switch {
		case len(ns) == 0:
			row.Verdict, row.Detail = VerdictMissing, "no node bundle signed by the job's key"
		case len(ns) > 1:
			row.Verdict = VerdictDuplicate
			row.Detail = fmt.Sprintf("%d node bundles for the job: %s", len(ns), strings.Join(sources[j.Name], ", "))
		default:
			n := ns[0]
			row.JobID, row.Node, row.Simulated, row.Source, row.GPU, row.Sandbox, row.Arch = n.JobID, n.NodeName, n.Simulated, sources[j.Name][0], GPUSummary(n.Hardware), n.Sandbox, n.Arch
			row.Verdict, row.Detail = VerdictPassed, ""
			passed[j.Name] = n
			if problem := checkNode(&j, n, o); problem != "" {
				row.Verdict, row.Detail = VerdictFailed, problem
			} else if problem := checkSandbox(d, n); problem != "" {
				row.Verdict, row.Detail = VerdictFailed, problem
			} else if row.GPUEvidence, problem = r.checkEvidence(ctx, &j, n, o); problem != "" {
				row.Verdict, row.Detail = VerdictFailed, problem
			} else if j.Distinct {
				byNode := nodesOfClass[j.Class]
				if byNode == nil {
					byNode = map[string]string{}
					nodesOfClass[j.Class] = byNode
				}
				if other, dup := byNode[n.NodeName]; dup {
					row.Verdict, row.Detail = VerdictFailed, fmt.Sprintf("ran on node %s as job %s did; class %s asks for distinct nodes", n.NodeName, other, j.Class)
				}
				byNode[n.NodeName] = j.Name
			}
		}
		if row.Verdict != VerdictPassed {
			delete(passed, j.Name)
			r.Problems = append(r.Problems, fmt.Sprintf("job %s (class %s): %s: %s", j.Name, j.Class, row.Verdict, row.Detail))
		}
		r.Jobs = append(r.Jobs, row)
	}
	r.checkCoverage(d, passed)
	switch {
	case r.subjectFailed:
		r.Failure = verify.FailureSubject
	case len(r.Problems) > 0:
		r.Failure = verify.FailurePolicy
	default:
		r.Verified = true
	}
	return nil
}

// Coverage is whether one pinned target is covered.
type Coverage struct {
	Target  string `json:"target"`
	Covered bool   `json:"covered"`
	// By names the jobs that cover it.
	By []string `json:"by,omitempty"`
}

// checkCoverage checks that each pinned target of the dispatch is covered
// by a job whose class lists it and that passed on GPUs of the target's
// compute capability.
func (r *Report) checkCoverage(d *Dispatch, passed map[string]*Node) {
	for _, t := range d.Targets {
		c := Coverage{Target: t}
		cc := targetCC(t)
		for _, j := range d.Jobs {
			n := passed[j.Name]
			if n == nil || !slices.Contains(j.Targets, t) || n.Hardware == nil {
				continue
			}
			if !slices.ContainsFunc(n.Hardware.GPUs, func(g hardware.GPU) bool { return g.ComputeCapability != cc }) {
				c.By = append(c.By, j.Name)
			}
		}
		c.Covered = len(c.By) > 0
		if !c.Covered {
			r.Problems = append(r.Problems, fmt.Sprintf("target %s: not covered: no job of a class that lists it passed on GPUs of compute capability %s", t, cc))
		}
		r.Coverage = append(r.Coverage, c)
	}
}

// GPUSummary describes the GPUs of a hardware record, one entry per
// model and compute capability: "2x NVIDIA H100 80GB HBM3 (9.0)",
// followed by ", simulated" for a simulated record; "" for none.
func GPUSummary(h *hardware.Record) string {
	if h == nil || len(h.GPUs) == 0 {
		return ""
	}
	var order []string
	count := map[string]int{}
	for _, g := range h.GPUs {
		k := g.Name + " (" + g.ComputeCapability + ")"
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%dx %s", count[k], k)
	}
	out := strings.Join(parts, ", ")
	if h.Simulated {
		out += ", simulated"
	}
	return out
}

// targetCC is the compute capability of a target: sm_90a is 9.0.
func targetCC(t string) string {
	digits := strings.TrimRight(strings.TrimPrefix(t, "sm_"), "af")
	if len(digits) < 2 {
		return ""
	}
	return digits[:len(digits)-1] + "." + digits[len(digits)-1:]
}

// node verifies one node bundle: it reads the job the bundle claims,
// verifies the signature with that job's delegated key, and checks the
// dispatch digest, the nonce and the subjects. It returns the node
// statement, or nil and why the bundle counts for no job.
func (r *Report) node(ctx context.Context, d *Dispatch, dst *attest.Statement, e verify.Entry, o Options) (*Node, string) {
	claimed, err := sign.UnverifiedStatement(e.Data)
	if err != nil {
		return nil, "not a signed statement: " + err.Error()
	}
	cn, err := DecodeNode(claimed)
	if err != nil {
		return nil, err.Error()
	}
	j := d.Job(cn.Job)
	if j == nil {
		return nil, fmt.Sprintf("names job %q, which this dispatch does not have (a bundle from another dispatch?)", cn.Job)
	}
	pub, err := sign.ParsePublicKey("job "+j.Name+" key", []byte(j.PublicKey))
	if err != nil {
		return nil, err.Error()
	}
	opts := []verify.Option{verify.WithKey(pub, "job "+j.Name+" key")}
	if o.AllowSimulated {
		opts = append(opts, verify.WithSimulatedAllowed())
	}
	st, _, err := verifyOne(ctx, e, NodePredicateType, opts)
	if err != nil {
		return nil, fmt.Sprintf("claims job %s but is not signed by the key the dispatch delegated to it: %v", j.Name, err)
	}
	n, err := DecodeNode(st)
	if err != nil {
		return nil, err.Error()
	}
	switch {
	case n.Job != j.Name:
		return nil, fmt.Sprintf("signed by job %s's key but names job %s", j.Name, n.Job)
	case n.Dispatch != r.DispatchDigest:
		return nil, fmt.Sprintf("job %s: names dispatch %s, not this one (%s)", j.Name, n.Dispatch, r.DispatchDigest)
	case n.Nonce != j.Nonce:
		return nil, fmt.Sprintf("job %s: carries nonce %q, not the job's", j.Name, n.Nonce)
	}
	if !sameSubjects(st.Subject, dst.Subject) {
		return nil, fmt.Sprintf("job %s: its subjects are not the dispatch's", j.Name)
	}
	return n, ""
}

// checkNode checks a node's result and hardware against its job; it
// returns what is wrong, or "".
func checkNode(j *Job, n *Node, o Options) string {
	if n.Result != ResultPassed {
		reason := n.Reason
		if reason == "" {
			reason = "result " + n.Result
		}
		return fmt.Sprintf("on node %s: %s", n.NodeName, reason)
	}
	if j.Arch != "" && n.Arch != j.Arch {
		return fmt.Sprintf("on node %s: the node ran gpuattest for %s, class %s's arch is %s", n.NodeName, cmp.Or(n.Arch, "an architecture it did not record"), j.Class, j.Arch)
	}
	if n.Simulated && !o.AllowSimulated {
		return fmt.Sprintf("on node %s: the GPUs were simulated\nhint: --allow-simulated accepts them, for tests and demos", n.NodeName)
	}
	if n.Hardware == nil || len(n.Hardware.GPUs) == 0 {
		return fmt.Sprintf("on node %s: no GPU in the hardware record", n.NodeName)
	}
	if len(n.Hardware.GPUs) < j.GPUs {
		return fmt.Sprintf("on node %s: %d GPU(s), the class asks for %d", n.NodeName, len(n.Hardware.GPUs), j.GPUs)
	}
	for _, g := range n.Hardware.GPUs {
		if !strings.Contains(strings.ToLower(g.Name), strings.ToLower(j.GPUModel)) {
			return fmt.Sprintf("on node %s: GPU %d is %q, not a %s as class %s names", n.NodeName, g.Index, g.Name, j.GPUModel, j.Class)
		}
		if j.ComputeCapability != "" && g.ComputeCapability != j.ComputeCapability {
			return fmt.Sprintf("on node %s: GPU %d has compute capability %s, class %s's constraint %s needs %s", n.NodeName, g.Index, g.ComputeCapability, j.Class, j.Constraint, j.ComputeCapability)
		}
	}
	return ""
}

// checkEvidence verifies the GPU evidence of job j's node n, each GPU
// against the nonce the verifier derives from the dispatch it verified,
// the job and the GPU's UUID: evidence that answers another job's or
// another dispatch's nonce fails the job. It returns the job's evidence
// line and what is wrong, or "".
func (r *Report) checkEvidence(ctx context.Context, j *Job, n *Node, o Options) (string, string) {
	if n.GPUEvidence == nil {
		if o.RequireGPUEvidence {
			return "GPU evidence: none recorded", fmt.Sprintf("on node %s: no GPU evidence, and it is required", n.NodeName)
		}
		return "", ""
	}
	res := verify.VerifyGPUEvidence(ctx, n.GPUEvidence, func(c gpuevidence.Collected) gpuevidence.Nonce {
		return gpuevidence.FleetNonce(r.DispatchDigest, j.Name, c.UUID)
	}, o.RequireGPUEvidence, o.GPUEvidence...)
	if res.Passed {
		return res.Summary, ""
	}
	return res.Summary, fmt.Sprintf("on node %s: %s: %s", n.NodeName, res.Summary, strings.Join(res.Problems, "; "))
}

// checkSandbox checks a node's claim of how it ran its host-runner
// steps against what the owner signed; it returns the contradiction, or
// "". Under the default (sandboxed) a node that says it ran them with no
// sandbox went against the dispatch; under hostSteps: unsandboxed no
// honest node sandboxes, and any step there could have read every job
// key of the dispatch, so a claim of a sandbox proves nothing; on
// Kubernetes the node container is the sandbox and a node names none.
func checkSandbox(d *Dispatch, n *Node) string {
	mode := d.HostStepsMode()
	ok := n.Sandbox == ""
	switch mode {
	case HostStepsSandboxed:
		ok = ok || n.Sandbox == SandboxBwrap
	case HostStepsUnsandboxed, HostStepsPod:
		ok = ok || n.Sandbox == SandboxNone
	}
	if ok {
		return ""
	}
	signed := "hostSteps: " + mode
	if mode == HostStepsPod {
		signed = "a Kubernetes fleet, whose host-runner steps run in the pod's node container"
	}
	return fmt.Sprintf("on node %s: the node claims its host-runner steps ran with sandbox %q, which contradicts the owner's dispatch (%s)", n.NodeName, n.Sandbox, signed)
}

// verifyOne verifies one bundle of predicate type typ with opts and
// returns its statement and signer.
func verifyOne(ctx context.Context, e verify.Entry, typ string, opts []verify.Option) (*attest.Statement, string, error) {
	v, err := verify.New(append(append([]verify.Option{}, opts...), verify.WithPredicateType(typ))...)
	if err != nil {
		return nil, "", err
	}
	rep := v.Verify(ctx, []verify.Entry{e}, nil)
	if len(rep.Bundles) != 1 || rep.Bundles[0].Statement() == nil {
		var fails []string
		for _, c := range rep.Checks {
			if !c.Passed {
				fails = append(fails, c.Detail)
			}
		}
		return nil, "", errors.New(strings.Join(fails, "; "))
	}
	st := rep.Bundles[0].Statement()
	if st.PredicateType != typ {
		return nil, "", fmt.Errorf("predicate type %s: expected %s", st.PredicateType, typ)
	}
	return st, rep.Bundles[0].Signer, nil
}

func sameSubjects(a, b []attest.Subject) bool {
	key := func(ss []attest.Subject) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = s.Name + "@" + s.Digest["sha256"]
		}
		sort.Strings(out)
		return out
	}
	ka, kb := key(a), key(b)
	if len(ka) != len(kb) {
		return false
	}
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}
