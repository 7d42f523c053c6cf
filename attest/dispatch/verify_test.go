package dispatch_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// fixture is a signed two-job dispatch (a100-0, h100-0) and its keys.
type fixture struct {
	owner    *sign.Signer
	ownerPub *ecdsa.PublicKey
	jobKeys  map[string]*sign.Signer
	stmt     *attest.Statement
	entry    verify.Entry
	digest   string
	d        *dispatch.Dispatch
}

var subjects = []attest.Subject{{Name: "out/kernels.fatbin", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}}

func newSigner(t testing.TB) (*sign.Signer, *ecdsa.PublicKey, string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return s, &priv.PublicKey, string(pem)
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{jobKeys: map[string]*sign.Signer{}}
	f.owner, f.ownerPub, _ = newSigner(t)
	f.d = &dispatch.Dispatch{ID: "d1", Targets: []string{"sm_80", "sm_90"}, Pipeline: dispatch.Ref{Digest: "sha256:" + strings.Repeat("cd", 32)}}
	for _, c := range []struct{ class, cc, arch string }{{"a100", "8.0", "amd64"}, {"h100", "9.0", "arm64"}} {
		s, _, pem := newSigner(t)
		name := c.class + "-0"
		f.jobKeys[name] = s
		f.d.Jobs = append(f.d.Jobs, dispatch.Job{Name: name, Class: c.class, Gres: "gpu:" + c.class + ":1", GPUs: 1,
			GPUModel: c.class, ComputeCapability: c.cc, Arch: c.arch, Nonce: "nonce-" + name, PublicKey: pem, Targets: []string{"sm_" + strings.ReplaceAll(c.cc, ".", "")}})
	}
	var err error
	if f.stmt, err = f.d.Statement(subjects); err != nil {
		t.Fatal(err)
	}
	if f.digest, err = dispatch.Digest(f.stmt); err != nil {
		t.Fatal(err)
	}
	f.entry = verify.Entry{Source: "dispatch.intoto.jsonl", Data: signStmt(t, f.owner, f.stmt)}
	return f
}

func signStmt(t testing.TB, s *sign.Signer, st *attest.Statement) []byte {
	t.Helper()
	b, err := s.Sign(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// node is a passing node statement of job on matching hardware.
func (f *fixture) node(job string) *dispatch.Node {
	j := f.d.Job(job)
	gpuName := map[string]string{"a100": "NVIDIA A100-SXM4-40GB", "h100": "NVIDIA H100 80GB HBM3"}[j.Class]
	return &dispatch.Node{Dispatch: f.digest, Job: job, Nonce: j.Nonce, Engine: "slurm", JobID: "1" + job[len(job)-1:], NodeName: "node-" + job, Arch: j.Arch,
		Result: dispatch.ResultPassed, Hardware: &hardware.Record{GPUs: []hardware.GPU{{Name: gpuName, ComputeCapability: j.ComputeCapability}}}}
}

// bundle signs n with s as source.
func (f *fixture) bundle(t testing.TB, s *sign.Signer, n *dispatch.Node, source string) verify.Entry {
	t.Helper()
	st, err := n.Statement(subjects)
	if err != nil {
		t.Fatal(err)
	}
	return verify.Entry{Source: source, Data: signStmt(t, s, st)}
}

func (f *fixture) good(t testing.TB) []verify.Entry {
	return []verify.Entry{
		f.bundle(t, f.jobKeys["a100-0"], f.node("a100-0"), "a100-0.intoto.jsonl"),
		f.bundle(t, f.jobKeys["h100-0"], f.node("h100-0"), "h100-0.intoto.jsonl"),
	}
}

func TestVerify(t *testing.T) {
	f := newFixture(t)
	other := newFixture(t) // another dispatch with the same job names
	owner := []verify.Option{verify.WithKey(f.ownerPub, "release.pub")}
	tests := []struct {
		name    string
		nodes   func() []verify.Entry
		owner   []verify.Option
		failure verify.Failure
		want    []string // fragments of the problems, in order
	}{
		{name: "complete", nodes: func() []verify.Entry { return f.good(t) }},
		{
			name:    "missing job",
			nodes:   func() []verify.Entry { return f.good(t)[:1] },
			failure: verify.FailurePolicy, want: []string{"job h100-0 (class h100): missing", "target sm_90: not covered: no job of a class that lists it passed on GPUs of compute capability 9.0"},
		},
		{
			name:    "duplicated job",
			nodes:   func() []verify.Entry { g := f.good(t); return append(g, g[1]) },
			failure: verify.FailurePolicy, want: []string{"job h100-0 (class h100): duplicate: 2 node bundles", "target sm_90: not covered"},
		},
		{
			name: "bundle from another dispatch",
			nodes: func() []verify.Entry {
				g := f.good(t)
				g[1] = other.bundle(t, other.jobKeys["h100-0"], other.node("h100-0"), "swapped.intoto.jsonl")
				return g
			},
			failure: verify.FailurePolicy,
			want:    []string{"swapped.intoto.jsonl: counts for no job: claims job h100-0 but is not signed by the key the dispatch delegated to it", "job h100-0 (class h100): missing", "target sm_90: not covered"},
		},
		{
			name: "re-signed with the release key",
			nodes: func() []verify.Entry {
				g := f.good(t)
				g[0] = f.bundle(t, f.owner, f.node("a100-0"), "resigned.intoto.jsonl")
				return g
			},
			failure: verify.FailurePolicy,
			want:    []string{"resigned.intoto.jsonl: counts for no job: claims job a100-0 but is not signed by the key", "job a100-0 (class a100): missing", "target sm_80: not covered"},
		},
		{
			name: "wrong nonce",
			nodes: func() []verify.Entry {
				n := f.node("a100-0")
				n.Nonce = "replayed"
				return []verify.Entry{f.bundle(t, f.jobKeys["a100-0"], n, "a.jsonl"), f.good(t)[1]}
			},
			failure: verify.FailurePolicy, want: []string{`a.jsonl: counts for no job: job a100-0: carries nonce "replayed"`, "job a100-0 (class a100): missing", "target sm_80: not covered"},
		},
		{
			name: "wrong GPU model and compute capability",
			nodes: func() []verify.Entry {
				n := f.node("h100-0")
				n.Hardware.GPUs[0] = hardware.GPU{Name: "NVIDIA A100-SXM4-40GB", ComputeCapability: "8.0"}
				return []verify.Entry{f.good(t)[0], f.bundle(t, f.jobKeys["h100-0"], n, "h.jsonl")}
			},
			failure: verify.FailurePolicy, want: []string{`job h100-0 (class h100): failed: on node node-h100-0: GPU 0 is "NVIDIA A100-SXM4-40GB", not a h100`, "target sm_90: not covered"},
		},
		{
			name: "a node of the wrong arch",
			nodes: func() []verify.Entry {
				n := f.node("h100-0")
				n.Arch = "amd64"
				return []verify.Entry{f.good(t)[0], f.bundle(t, f.jobKeys["h100-0"], n, "h.jsonl")}
			},
			failure: verify.FailurePolicy, want: []string{"job h100-0 (class h100): failed: on node node-h100-0: the node ran gpuattest for amd64, class h100's arch is arm64", "target sm_90: not covered"},
		},
		{
			name: "a node that recorded no arch",
			nodes: func() []verify.Entry {
				n := f.node("h100-0")
				n.Arch = ""
				return []verify.Entry{f.good(t)[0], f.bundle(t, f.jobKeys["h100-0"], n, "h.jsonl")}
			},
			failure: verify.FailurePolicy, want: []string{"job h100-0 (class h100): failed: on node node-h100-0: the node ran gpuattest for an architecture it did not record, class h100's arch is arm64", "target sm_90: not covered"},
		},
		{
			name: "a node that failed preflight",
			nodes: func() []verify.Entry {
				n := f.node("a100-0")
				n.Result, n.Reason = dispatch.ResultFailed, "step check failed: preflight: 40 GiB free, the step needs 60 GiB"
				return []verify.Entry{f.bundle(t, f.jobKeys["a100-0"], n, "a.jsonl"), f.good(t)[1]}
			},
			failure: verify.FailurePolicy, want: []string{"job a100-0 (class a100): failed: on node node-a100-0: step check failed: preflight", "target sm_80: not covered"},
		},
		{
			name: "simulated GPUs not allowed",
			nodes: func() []verify.Entry {
				n := f.node("a100-0")
				n.Simulated = true
				return []verify.Entry{f.bundle(t, f.jobKeys["a100-0"], n, "a.jsonl"), f.good(t)[1]}
			},
			failure: verify.FailurePolicy, want: []string{"job a100-0 (class a100): failed: on node node-a100-0: the GPUs were simulated", "target sm_80: not covered"},
		},
		{
			name:    "dispatch signed by another key",
			nodes:   func() []verify.Entry { return f.good(t) },
			owner:   []verify.Option{verify.WithKey(other.ownerPub, "other.pub")},
			failure: verify.FailureSignature, want: []string{"dispatch: "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := owner
			if tt.owner != nil {
				o = tt.owner
			}
			r, err := dispatch.Verify(t.Context(), f.entry, o, tt.nodes(), dispatch.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Failure != tt.failure || r.Verified != (tt.failure == verify.FailureNone) {
				t.Errorf("failure %v, verified %v; want %v\n%s", r.Failure, r.Verified, tt.failure, strings.Join(r.Problems, "\n"))
			}
			if len(r.Problems) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%s", len(r.Problems), len(tt.want), strings.Join(r.Problems, "\n"))
			}
			for i, w := range tt.want {
				if i < len(r.Problems) && !strings.Contains(r.Problems[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, r.Problems[i], w)
				}
			}
			if tt.failure == verify.FailureNone {
				for _, j := range r.Jobs {
					if j.Verdict != dispatch.VerdictPassed || j.Node != "node-"+j.Job || j.JobID == "" {
						t.Errorf("job row %+v: want passed with its node and job ID", j)
					}
				}
			}
		})
	}
}

// TestVerifyDistinctNodes: a class asking for distinct nodes fails when
// two of its jobs report the same node.
func TestVerifyDistinctNodes(t *testing.T) {
	f := newFixture(t)
	f.d.Jobs = f.d.Jobs[:1]
	s, _, pem := newSigner(t)
	f.d.Jobs = append(f.d.Jobs, dispatch.Job{Name: "a100-1", Class: "a100", Index: 1, Gres: "gpu:a100:1", GPUs: 1, GPUModel: "a100", ComputeCapability: "8.0", Nonce: "n1", PublicKey: pem})
	f.d.Jobs[0].Distinct, f.d.Jobs[1].Distinct = true, true
	f.d.Targets = []string{"sm_80"}
	f.jobKeys["a100-1"] = s
	var err error
	if f.stmt, err = f.d.Statement(subjects); err != nil {
		t.Fatal(err)
	}
	if f.digest, err = dispatch.Digest(f.stmt); err != nil {
		t.Fatal(err)
	}
	f.entry = verify.Entry{Source: "d", Data: signStmt(t, f.owner, f.stmt)}
	n0, n1 := f.node("a100-0"), f.node("a100-1")
	n1.NodeName = n0.NodeName
	r, err := dispatch.CheckNodes(t.Context(), f.entry, []verify.Entry{f.bundle(t, f.jobKeys["a100-0"], n0, "0"), f.bundle(t, f.jobKeys["a100-1"], n1, "1")}, dispatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "job a100-1 (class a100): failed: ran on node node-a100-0 as job a100-0 did; class a100 asks for distinct nodes") {
		t.Errorf("verified %v, problems:\n%s", r.Verified, strings.Join(r.Problems, "\n"))
	}
}

// resign signs f's dispatch again after a change.
func (f *fixture) resign(t testing.TB) {
	t.Helper()
	var err error
	if f.stmt, err = f.d.Statement(subjects); err != nil {
		t.Fatal(err)
	}
	if f.digest, err = dispatch.Digest(f.stmt); err != nil {
		t.Fatal(err)
	}
	f.entry = verify.Entry{Source: "d", Data: signStmt(t, f.owner, f.stmt)}
}

// TestVerifyCoverage: every job passes, but sm_90a is pinned and no class
// lists it: the release is not covered (exit 12), and the report says
// which job covers each target.
func TestVerifyCoverage(t *testing.T) {
	f := newFixture(t)
	f.d.Targets = []string{"sm_80", "sm_90", "sm_90a"}
	f.resign(t)
	r, err := dispatch.CheckNodes(t.Context(), f.entry, f.good(t), dispatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || r.Failure != verify.FailurePolicy || len(r.Problems) != 1 ||
		r.Problems[0] != "target sm_90a: not covered: no job of a class that lists it passed on GPUs of compute capability 9.0" {
		t.Errorf("verified %v, failure %v, problems:\n%s", r.Verified, r.Failure, strings.Join(r.Problems, "\n"))
	}
	want := []dispatch.Coverage{{Target: "sm_80", Covered: true, By: []string{"a100-0"}}, {Target: "sm_90", Covered: true, By: []string{"h100-0"}}, {Target: "sm_90a"}}
	if diff := cmp.Diff(want, r.Coverage); diff != "" {
		t.Errorf("coverage (-want +got):\n%s", diff)
	}
}

// TestVerifyEntries: the bundles of a published release hold one
// dispatch and the node bundles; the dispatch's subjects must be the
// files read (exit 11 otherwise).
func TestVerifyEntries(t *testing.T) {
	f := newFixture(t)
	owner := []verify.Option{verify.WithKey(f.ownerPub, "release.pub")}
	entries := append([]verify.Entry{f.entry}, f.good(t)...)
	files := map[string]string{"out/kernels.fatbin": strings.Repeat("ab", 32)}
	r, err := dispatch.VerifyEntries(t.Context(), entries, owner, dispatch.Options{Files: files})
	if err != nil || !r.Verified {
		t.Fatalf("VerifyEntries: %v, problems %v", err, r.Problems)
	}
	files["out/kernels.fatbin"] = strings.Repeat("cd", 32)
	if r, err = dispatch.VerifyEntries(t.Context(), entries, owner, dispatch.Options{Files: files}); err != nil || r.Failure != verify.FailureSubject ||
		!strings.Contains(strings.Join(r.Problems, "\n"), "subject out/kernels.fatbin (sha256:abab") {
		t.Errorf("changed file: %v, failure %v, problems %v; want a subject failure", err, r.Failure, r.Problems)
	}
	if _, err := dispatch.VerifyEntries(t.Context(), f.good(t), owner, dispatch.Options{}); err == nil || !strings.Contains(err.Error(), "no fleet dispatch") {
		t.Errorf("no dispatch: %v", err)
	}
	if r, err = dispatch.VerifyEntries(t.Context(), append(entries, f.entry), owner, dispatch.Options{}); err != nil || r.Verified || !strings.Contains(r.Problems[0], "2 dispatches among the bundles") {
		t.Errorf("two dispatches: %v, %+v", err, r)
	}
}

// TestVerifyArtifacts: each artifact given must be a subject of the
// dispatch (exit 11 otherwise), and with RequireArtifacts one must be
// given; HasDispatch tells a fleet release's bundles from others.
func TestVerifyArtifacts(t *testing.T) {
	f := newFixture(t)
	owner := []verify.Option{verify.WithKey(f.ownerPub, "release.pub")}
	entries := append([]verify.Entry{f.entry}, f.good(t)...)
	if !dispatch.HasDispatch(entries) || dispatch.HasDispatch(f.good(t)) || dispatch.HasDispatch([]verify.Entry{{Source: "x", Data: []byte("not json")}}) {
		t.Errorf("HasDispatch: true for the dispatch and its nodes, false for the nodes alone and for garbage expected")
	}
	tests := []struct {
		name     string
		arts     []verify.Artifact
		require  bool
		want     verify.Failure
		wantProb string
	}{
		{name: "a subject", arts: []verify.Artifact{{Name: "kernels.fatbin", SHA256: strings.Repeat("ab", 32)}}, want: verify.FailureNone},
		{name: "not a subject", arts: []verify.Artifact{{Name: "other.bin", SHA256: strings.Repeat("ef", 32)}}, want: verify.FailureSubject,
			wantProb: "artifact other.bin (sha256:" + strings.Repeat("ef", 32) + ") is not a subject of the dispatch"},
		{name: "none, not required", want: verify.FailureNone},
		{name: "none, required", require: true, want: verify.FailureSubject, wantProb: "no artifact given, and artifacts are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := dispatch.VerifyEntries(t.Context(), entries, owner, dispatch.Options{Artifacts: tt.arts, RequireArtifacts: tt.require})
			if err != nil {
				t.Fatal(err)
			}
			if r.Failure != tt.want || r.Verified != (tt.want == verify.FailureNone) || r.Artifacts != len(tt.arts) {
				t.Errorf("failure %v, verified %v, artifacts %d; want failure %v, %d artifacts; problems %v", r.Failure, r.Verified, r.Artifacts, tt.want, len(tt.arts), r.Problems)
			}
			if tt.wantProb != "" && !strings.Contains(strings.Join(r.Problems, "\n"), tt.wantProb) {
				t.Errorf("problems %q lack %q", r.Problems, tt.wantProb)
			}
		})
	}
}

// TestVerifySandboxClaims (issue 30, item 11): each node's claim of how
// it ran its host-runner steps is checked against the hostSteps setting
// the owner signed, which the report carries: under the default a node
// that ran them unsandboxed fails, under hostSteps: unsandboxed one that
// claims a sandbox fails, and on Kubernetes one that claims bwrap fails.
func TestVerifySandboxClaims(t *testing.T) {
	tests := []struct {
		name      string
		fleet     dispatch.Fleet
		claim     string
		wantMode  string
		wantProbs []string
	}{
		{name: "sandboxed, bwrap", fleet: dispatch.Fleet{Engine: "slurm"}, claim: dispatch.SandboxBwrap, wantMode: dispatch.HostStepsSandboxed},
		{name: "sandboxed, no host step", fleet: dispatch.Fleet{Engine: "slurm"}, wantMode: dispatch.HostStepsSandboxed},
		{name: "sandboxed, none", fleet: dispatch.Fleet{Engine: "slurm"}, claim: dispatch.SandboxNone, wantMode: dispatch.HostStepsSandboxed,
			wantProbs: []string{`job h100-0 (class h100): failed: on node node-h100-0: the node claims its host-runner steps ran with sandbox "none", which contradicts the owner's dispatch (hostSteps: sandboxed)`, "target sm_90: not covered"}},
		{name: "unsandboxed, none", fleet: dispatch.Fleet{Engine: "slurm", HostSteps: "unsandboxed"}, claim: dispatch.SandboxNone, wantMode: dispatch.HostStepsUnsandboxed},
		{name: "unsandboxed, bwrap", fleet: dispatch.Fleet{Engine: "slurm", HostSteps: "unsandboxed"}, claim: dispatch.SandboxBwrap, wantMode: dispatch.HostStepsUnsandboxed,
			wantProbs: []string{`job h100-0 (class h100): failed: on node node-h100-0: the node claims its host-runner steps ran with sandbox "bwrap", which contradicts the owner's dispatch (hostSteps: unsandboxed)`, "target sm_90: not covered"}},
		{name: "kubernetes, empty", fleet: dispatch.Fleet{Engine: "kubernetes", Registry: "reg/x"}, wantMode: dispatch.HostStepsPod},
		{name: "kubernetes, none (older nodes)", fleet: dispatch.Fleet{Engine: "kubernetes", Registry: "reg/x"}, claim: dispatch.SandboxNone, wantMode: dispatch.HostStepsPod},
		{name: "kubernetes, bwrap", fleet: dispatch.Fleet{Engine: "kubernetes", Registry: "reg/x"}, claim: dispatch.SandboxBwrap, wantMode: dispatch.HostStepsPod,
			wantProbs: []string{`claims its host-runner steps ran with sandbox "bwrap", which contradicts the owner's dispatch (a Kubernetes fleet`, "target sm_90: not covered"}},
		{name: "unknown claim", fleet: dispatch.Fleet{Engine: "slurm"}, claim: "chroot", wantMode: dispatch.HostStepsSandboxed,
			wantProbs: []string{`sandbox "chroot", which contradicts`, "target sm_90: not covered"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.d.Fleet = tt.fleet
			f.resign(t)
			a, h := f.node("a100-0"), f.node("h100-0")
			if tt.claim != dispatch.SandboxNone || tt.wantMode != dispatch.HostStepsSandboxed {
				a.Sandbox = map[string]string{dispatch.HostStepsSandboxed: dispatch.SandboxBwrap, dispatch.HostStepsUnsandboxed: dispatch.SandboxNone}[tt.wantMode]
			}
			h.Sandbox = tt.claim
			nodes := []verify.Entry{f.bundle(t, f.jobKeys["a100-0"], a, "a"), f.bundle(t, f.jobKeys["h100-0"], h, "h")}
			r, err := dispatch.Verify(t.Context(), f.entry, []verify.Option{verify.WithKey(f.ownerPub, "release.pub")}, nodes, dispatch.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.HostSteps != tt.wantMode {
				t.Errorf("report's host steps %q, want %q (what the owner signed)", r.HostSteps, tt.wantMode)
			}
			if r.Verified != (len(tt.wantProbs) == 0) || len(r.Problems) != len(tt.wantProbs) {
				t.Fatalf("verified %v, problems:\n%s\nwant %d", r.Verified, strings.Join(r.Problems, "\n"), len(tt.wantProbs))
			}
			for i, w := range tt.wantProbs {
				if !strings.Contains(r.Problems[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, r.Problems[i], w)
				}
			}
			if got := r.Jobs[1].Sandbox; got != tt.claim {
				t.Errorf("job h100-0's row shows sandbox %q, want the node's claim %q", got, tt.claim)
			}
		})
	}
}

// TestVerifyNoJobs (issue 30, item 12): a dispatch with no jobs (and no
// targets to cover) delegates to no node and proves nothing: it fails.
func TestVerifyNoJobs(t *testing.T) {
	f := newFixture(t)
	f.d.Jobs, f.d.Targets = nil, nil
	f.resign(t)
	r, err := dispatch.Verify(t.Context(), f.entry, []verify.Option{verify.WithKey(f.ownerPub, "release.pub")}, nil, dispatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || r.Failure != verify.FailurePolicy || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "the dispatch has no jobs") {
		t.Errorf("verified %v, failure %v, problems %q; want a policy failure naming the missing jobs", r.Verified, r.Failure, r.Problems)
	}
}

// TestFleetRelease (issue 30, item 12): a release is a fleet release when
// the owner signed a dispatch naming its manifest, or when it holds
// nothing else to judge; a dispatch that another key signed, or the
// owner's dispatch of another release, beside an ordinary release's
// validation statement leaves it ordinary.
func TestFleetRelease(t *testing.T) {
	const manifest = "sha256:" + "12121212121212121212121212121212121212121212121212121212121212ab"
	withManifest := func(m string) []attest.Subject {
		return append(append([]attest.Subject{}, subjects...), attest.Subject{Name: attest.ManifestSubjectName, Digest: map[string]string{"sha256": m[len("sha256:"):]}})
	}
	f := newFixture(t)
	stranger, _, _ := newSigner(t)
	owner := []verify.Option{verify.WithKey(f.ownerPub, "release.pub")}
	dispatchBy := func(s *sign.Signer, m string) verify.Entry {
		st, err := f.d.Statement(withManifest(m))
		if err != nil {
			t.Fatal(err)
		}
		return verify.Entry{Source: "dispatch", Data: signStmt(t, s, st)}
	}
	const ordinary = "https://example.com/ordinary/v1" // a predicate type the signer does not check
	validation := verify.Entry{Source: "validation", Data: signStmt(t, f.owner, &attest.Statement{Type: attest.StatementType, Subject: withManifest(manifest),
		PredicateType: ordinary, Predicate: []byte(`{"result":"passed"}`)})}
	other := "sha256:" + strings.Repeat("34", 32)
	tests := []struct {
		name     string
		entries  []verify.Entry
		manifest string
		want     bool
	}{
		{name: "the owner's dispatch of this release", entries: append([]verify.Entry{dispatchBy(f.owner, manifest)}, f.good(t)...), manifest: manifest, want: true},
		{name: "a fleet release read with the wrong key", entries: append([]verify.Entry{dispatchBy(stranger, manifest)}, f.good(t)...), manifest: manifest, want: true},
		{name: "a stranger's dispatch beside a validation statement", entries: []verify.Entry{validation, dispatchBy(stranger, manifest)}, manifest: manifest},
		{name: "the owner's dispatch of another release beside a validation statement", entries: []verify.Entry{validation, dispatchBy(f.owner, other)}, manifest: manifest},
		{name: "the owner's dispatch of this release beside a validation statement", entries: []verify.Entry{validation, dispatchBy(f.owner, manifest)}, manifest: manifest, want: true},
		{name: "bundle files: the owner's dispatch", entries: []verify.Entry{validation, dispatchBy(f.owner, other)}, want: true},
		{name: "bundle files: a stranger's dispatch", entries: []verify.Entry{validation, dispatchBy(stranger, other)}},
		{name: "no dispatch", entries: []verify.Entry{validation}, manifest: manifest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dispatch.FleetRelease(t.Context(), tt.entries, owner, ordinary, tt.manifest); got != tt.want {
				t.Errorf("FleetRelease = %v, want %v", got, tt.want)
			}
		})
	}
}
