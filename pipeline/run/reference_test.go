package run_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/internal/tinyimage"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// release is a signed release published to a registry.
type release struct {
	ref    string // host/repo@sha256:...
	digest string
	pub    []byte // the signing key's PEM public key
	v      *verify.Verifier
}

// standIn is the stand-in suite harness (pipeline/suite/testdata), with
// its tool name replaced by tool so that results say which copy ran.
func standIn(t *testing.T, tool string) []byte {
	t.Helper()
	b, err := os.ReadFile("../suite/testdata/harness.sh")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Replace(string(b), "test-harness 0", tool, 1))
}

// publish signs a fixture run releasing the stand-in harness (as
// build/harness.sh, tool "released-harness") and pushes it to the
// in-process registry at host.
func publish(ctx context.Context, t *testing.T, host string) *release {
	t.Helper()
	files := []runfixture.File{{Name: "build/harness.sh", Data: standIn(t, "released-harness")}, {Name: "build/k.fatbin", Size: 3000}}
	return publishFiles(ctx, t, host, files)
}

// publishFiles signs a fixture run releasing files and pushes it to the
// in-process registry at host.
func publishFiles(ctx context.Context, t *testing.T, host string, files []runfixture.File) *release {
	t.Helper()
	dir, pub, v := signFixture(t, files, "release key")
	res, err := run.Push(ctx, dir, host+"/kernels:v1")
	if err != nil {
		t.Fatal(err)
	}
	return &release{ref: host + "/kernels@" + res.Digest, digest: res.Digest, pub: pub, v: v}
}

// benchPipeline writes a pipeline into root whose benchmark compares the
// local stand-in harness with the one in the release it names, verified
// with keys/release.pub.
func benchPipeline(t *testing.T, root, releaseRef string, pub []byte) string {
	t.Helper()
	for name, data := range map[string][]byte{"harness.sh": standIn(t, "local-harness"), "keys/release.pub": pub} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: t\nsteps:\n" +
		"  - id: bench\n    kind: benchmark\n    run: sh harness.sh cand.json\n    results: cand.json\n" +
		"    repeats: 15\n    seeds: [1, 2]\n    rounds: 8\n" +
		"    reference:\n      release: '" + releaseRef + "'\n      key: keys/release.pub\n      policy: builtin:cpu-tier\n" +
		"      run: sh \"$GPUATTEST_REFERENCE_DIR/build/harness.sh\" ref.json\n      results: ref.json\n"
	p := filepath.Join(root, "p.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runBench runs the pipeline at path and returns the run's result.
func runBench(ctx context.Context, t *testing.T, path string) *run.Result {
	t.Helper()
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Pipeline(ctx, p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(), run.WithGPUSource(noGPU(t)))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// toLayout copies the release into an OCI layout at dir (pull --to).
func toLayout(ctx context.Context, t *testing.T, rel *release, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := oci.Verify(ctx, rel.v, rel.ref, oci.WithLayoutTo(dir))
	if err != nil || !res.Report.Verified {
		t.Fatalf("copying the release to a layout: %v %+v", err, res)
	}
}

// TestBenchmarkReferenceRelease: a benchmark's reference is a published
// release, from a registry or an OCI layout inside the root; it is
// verified before it runs, runs from the verified copy, and the step
// records which release, by which key.
func TestBenchmarkReferenceRelease(t *testing.T) {
	t.Parallel()
	rel := publish(t.Context(), t, registrytest.StartInProcess(t, nil))
	tests := []struct {
		name       string
		ref        func(ctx context.Context, t *testing.T, root string) string
		wantSource string
	}{
		{"registry", func(context.Context, *testing.T, string) string { return rel.ref }, rel.ref},
		{"oci layout", func(ctx context.Context, t *testing.T, root string) string {
			toLayout(ctx, t, rel, filepath.Join(root, "releases", "v1"))
			return "oci-layout:releases/v1"
		}, "oci-layout:releases/v1@" + rel.digest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			root := t.TempDir()
			path := benchPipeline(t, root, tt.ref(ctx, t, root), rel.pub)
			res := runBench(ctx, t, path)
			sr := res.Record.Step("bench")
			if !res.Passed() {
				t.Fatalf("run %s: step %s: %s", res.Record.State, sr.State, sr.Reason)
			}
			var d suite.BenchmarkDetails
			if err := json.Unmarshal(sr.Details, &d); err != nil {
				t.Fatal(err)
			}
			got := d.Reference.Release
			sum := sha256.Sum256(rel.pub)
			if got == nil || got.Digest != rel.digest || got.Source != tt.wantSource || got.KeySHA256 != hex.EncodeToString(sum[:]) ||
				got.Key != "keys/release.pub" || got.Policy != "builtin:cpu-tier" || got.Bundles != 2 || len(got.Files) != 2 {
				t.Fatalf("recorded release %+v, want digest %s from %s", got, rel.digest, tt.wantSource)
			}
			// The reference ran the release's copy, the candidate the local one.
			for name, tool := range map[string]string{"reference-01.json": "released-harness", "candidate-01.json": "local-harness"} {
				b, err := os.ReadFile(filepath.Join(res.Dir, "steps", "bench", name))
				if err != nil || !strings.Contains(string(b), `"tool":"`+tool+`"`) {
					t.Errorf("%s: %v, want results of %s", name, err, tool)
				}
			}
			bj, err := os.ReadFile(filepath.Join(res.Dir, "steps", "bench", "benchmark.json"))
			if err != nil || !strings.Contains(string(bj), rel.digest) {
				t.Errorf("benchmark.json does not name the release %s: %v", rel.digest, err)
			}
			// The validation statement says which release each verdict is against.
			p, err := pipeline.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			ar, err := collect.FromRunDir(res.Dir, p)
			if err != nil {
				t.Fatal(err)
			}
			// A statement needs a subject; this pipeline builds nothing.
			ar.Artifacts = []attest.FileDigest{{Path: "k.fatbin", SHA256: strings.Repeat("0", 64)}}
			st, err := attest.ValidationStatement(ar)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := attest.ParseStatement(b); err != nil {
				t.Fatalf("statement does not parse: %v", err)
			}
			if n := strings.Count(string(b), `"release":"`+rel.digest+`"`); n != 2 {
				t.Errorf("statement names release %s in %d comparisons, want 2 (one per case):\n%s", rel.digest, n, b)
			}
		})
	}
}

// TestBenchmarkReferenceReleaseRefused: a release that does not verify
// (a changed layer, another key) or a key reached through a symlink out
// of the root fails the step before anything runs, with a message that
// says why, and leaves no release files behind.
func TestBenchmarkReferenceReleaseRefused(t *testing.T) {
	t.Parallel()
	rel := publish(t.Context(), t, registrytest.StartInProcess(t, nil))
	otherKey := func(t *testing.T) []byte {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		kp, _ := sign.NewKeypair(priv)
		pem, _ := kp.GetPublicKeyPem()
		return []byte(pem)
	}
	tests := []struct {
		name string
		edit func(t *testing.T, root string) // after the layout and key are in place
		key  func(t *testing.T) []byte
		want []string
	}{
		{name: "changed layer", edit: func(t *testing.T, root string) {
			sum := sha256.Sum256(standIn(t, "released-harness"))
			blob := filepath.Join(root, "releases", "v1", "blobs", "sha256", hex.EncodeToString(sum[:]))
			b, err := os.ReadFile(blob)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(blob, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: []string{"reference.release oci-layout:releases/v1", "the release did not verify (subject)", "build/harness.sh", "nothing from it was run"}},
		{name: "another key", key: otherKey, want: []string{"the release did not verify (signature)", "not signed by keys/release.pub"}},
		{name: "key through a symlink out of the root", edit: func(t *testing.T, root string) {
			outside := filepath.Join(t.TempDir(), "release.pub")
			os.WriteFile(outside, rel.pub, 0o644)
			os.Remove(filepath.Join(root, "keys", "release.pub"))
			if err := os.Symlink(outside, filepath.Join(root, "keys", "release.pub")); err != nil {
				t.Fatal(err)
			}
		}, want: []string{"reference.key keys/release.pub leads outside the pipeline's root", "hint:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			root := t.TempDir()
			toLayout(ctx, t, rel, filepath.Join(root, "releases", "v1"))
			pub := rel.pub
			if tt.key != nil {
				pub = tt.key(t)
			}
			path := benchPipeline(t, root, "oci-layout:releases/v1", pub)
			if tt.edit != nil {
				tt.edit(t, root)
			}
			res := runBench(ctx, t, path)
			sr := res.Record.Step("bench")
			if res.Passed() || sr.State != runtypes.Error {
				t.Fatalf("run %s, step %s, want the step in error", res.Record.State, sr.State)
			}
			for _, w := range tt.want {
				if !strings.Contains(sr.Reason, w) {
					t.Errorf("reason %q\nwant it to contain %q", sr.Reason, w)
				}
			}
			// Nothing ran and nothing of the release was written.
			entries, _ := os.ReadDir(filepath.Join(res.Dir, "steps", "bench"))
			for _, e := range entries {
				if n := e.Name(); strings.HasPrefix(n, "reference") || strings.HasPrefix(n, "candidate") || strings.HasPrefix(n, ".") {
					t.Errorf("step directory holds %s", n)
				}
			}
			for _, f := range []string{"cand.json", "ref.json"} {
				if _, err := os.Stat(filepath.Join(root, f)); err == nil {
					t.Errorf("%s was written: a side ran", f)
				}
			}
		})
	}
}

// TestBenchmarkReferenceReleaseRecheck: before a run is signed (at its
// end or on a resume: rundir's Recheck, which Attest calls), a passed benchmark must still show the release the
// step names, verified with the key file the step names now, and the
// release's files as verified.
func TestBenchmarkReferenceReleaseRecheck(t *testing.T) {
	t.Parallel()
	rel := publish(t.Context(), t, registrytest.StartInProcess(t, nil))
	tests := []struct {
		name    string
		edit    func(t *testing.T, root, runDir string)
		wantErr string
	}{
		{name: "unchanged"},
		{name: "key file replaced", edit: func(t *testing.T, root, _ string) {
			os.WriteFile(filepath.Join(root, "keys", "release.pub"), []byte(strings.Replace(string(rel.pub), "\n", "\n\n", 1)), 0o644)
		}, wantErr: "verified with reference.key keys/release.pub of sha256"},
		{name: "release file changed in the run directory", edit: func(t *testing.T, _, runDir string) {
			os.WriteFile(filepath.Join(runDir, "steps", "bench", suite.ReferenceReleaseDir, "build", "k.fatbin"), []byte("x"), 0o644)
		}, wantErr: "the verified release's file build/k.fatbin has sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			root := t.TempDir()
			toLayout(ctx, t, rel, filepath.Join(root, "releases", "v1"))
			path := benchPipeline(t, root, "oci-layout:releases/v1", rel.pub)
			res := runBench(ctx, t, path)
			if !res.Passed() {
				t.Fatalf("run %s: %s", res.Record.State, res.Record.Step("bench").Reason)
			}
			if tt.edit != nil {
				tt.edit(t, root, res.Dir)
			}
			p, err := pipeline.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := rundir.Open(res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			err = rd.Recheck(p)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("recheck: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("recheck: err = %v\nwant %q", err, tt.wantErr)
			}
		})
	}
}

// TestBenchmarkReferenceReleaseBwrap: under the bwrap runner the
// reference sees the verified release read-only at
// $GPUATTEST_REFERENCE_DIR (the run directory is outside the root, so
// nothing else would show it), and cannot write there.
func TestBenchmarkReferenceReleaseBwrap(t *testing.T) {
	testenv.RequireTool(t, "bwrap")
	base := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(base, "cache"))
	tinyimage.WriteDockerArchive(t, filepath.Join(base, "images", "tiny.tar"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The results both sides report: the same fixed samples.
	var samples []string
	for i := range 20 {
		samples = append(samples, fmt.Sprintf("%d.5", 1000+i%7))
	}
	results := `{"schema":"https://gpuattest.dev/results/v1","tool":"fixed","backend":"cpu","cases":[` +
		`{"name":"copy/n=1024","status":"passed","samples_ns":[` + strings.Join(samples, ",") + `]}]}` + "\n"
	rel := publishFiles(ctx, t, registrytest.StartInProcess(t, nil), []runfixture.File{{Name: "build/results.json", Data: []byte(results)}})
	root := filepath.Join(base, "proj")
	for name, data := range map[string]string{"local.json": results, "keys/release.pub": string(rel.pub)} {
		p := filepath.Join(root, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyTo := func(src, dst string) string {
		return `while IFS= read -r l; do echo "$l"; done < ` + src + ` > ` + dst
	}
	src := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: t\nrunner: bwrap\nimages:\n  tiny: docker-archive:../images/tiny.tar\nsteps:\n" +
		"  - id: bench\n    kind: benchmark\n    image: tiny\n    run: '" + copyTo("local.json", "cand.json") + "'\n    results: cand.json\n    rounds: 8\n" +
		"    reference:\n      release: '" + rel.ref + "'\n      key: keys/release.pub\n      policy: builtin:cpu-tier\n" +
		"      run: 'if (echo x > \"$GPUATTEST_REFERENCE_DIR/pwned\") 2>/dev/null; then exit 3; fi; " + copyTo(`"$GPUATTEST_REFERENCE_DIR/build/results.json"`, "ref.json") + "'\n" +
		"      results: ref.json\n"
	path := filepath.Join(root, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Pipeline(ctx, p, run.WithOutDir(filepath.Join(base, "runs", "r")), run.WithoutCache(), run.WithGPUSource(noGPU(t)))
	if err != nil {
		t.Fatal(err)
	}
	if sr := res.Record.Step("bench"); !res.Passed() {
		b, _ := os.ReadFile(filepath.Join(res.Dir, "steps", "bench", "stderr.log"))
		t.Fatalf("step %s: %s\n%s", sr.State, sr.Reason, b)
	}
	if b, err := os.ReadFile(filepath.Join(root, "ref.json")); err != nil || string(b) != results {
		t.Errorf("ref.json %q %v, want the release's results", b, err)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "steps", "bench", suite.ReferenceReleaseDir, "pwned")); err == nil {
		t.Error("the reference wrote into the release directory")
	}
}

// TestBenchmarkReferenceReleaseLyingRegistry: a registry that serves
// another release (and its referrers) under the digest the step pins
// fails the step before anything runs, naming the digest asked for and
// the one served; nothing is recorded as that release.
func TestBenchmarkReferenceReleaseLyingRegistry(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var lie atomic.Value
	host := registrytest.StartInProcess(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if l, ok := lie.Load().([2]string); ok && (strings.HasSuffix(r.URL.Path, "/manifests/"+l[0]) || strings.HasSuffix(r.URL.Path, "/referrers/"+l[0])) {
				r.URL.Path = strings.Replace(r.URL.Path, l[0], l[1], 1)
			}
			h.ServeHTTP(w, r)
		})
	})
	pinned := publish(ctx, t, host)
	other := publishFiles(ctx, t, host, []runfixture.File{{Name: "build/harness.sh", Data: standIn(t, "other-harness")}})
	lie.Store([2]string{pinned.digest, other.digest})
	root := t.TempDir()
	path := benchPipeline(t, root, pinned.ref, pinned.pub)
	res := runBench(ctx, t, path)
	sr := res.Record.Step("bench")
	if res.Passed() || sr.State != runtypes.Error {
		t.Fatalf("run %s, step %s, want the step in error", res.Record.State, sr.State)
	}
	for _, w := range []string{"reference.release " + pinned.ref, "digest is " + other.digest, "not " + pinned.digest + ", the digest asked for"} {
		if !strings.Contains(sr.Reason, w) {
			t.Errorf("reason %q\nwant it to contain %q", sr.Reason, w)
		}
	}
	for _, f := range []string{"cand.json", "ref.json"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s was written: a side ran", f)
		}
	}
}
