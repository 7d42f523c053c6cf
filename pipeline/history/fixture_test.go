package history_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// release is one simulated release of the fixture repository.
type release struct {
	tag string
	// gpu is the simulated GPU model; factor scales every median.
	gpu    string
	factor float64
	// extra adds that many test-result statements (referrers).
	extra int
	// also are further GPU models the release was validated on: each
	// is another signed run, finished an hour after the one before.
	also []string
}

// keys are the fixture's signing key and the verifier of its public key.
type keys struct {
	signer *sign.Signer
	pub    string
}

func newKeys(t testing.TB) keys {
	t.Helper()
	dir := t.TempDir()
	files, err := sign.GenerateKeyPair(filepath.Join(dir, "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.LoadPrivateKey(files.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	return keys{signer: s, pub: files.Public}
}

// verifier verifies with the fixture's key and the built-in policy that
// accepts simulated GPUs (as verify --allow-simulated does).
func (k keys) verifier(t testing.TB) *verify.Verifier {
	t.Helper()
	pub, err := sign.LoadPublicKey(k.pub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.WithKey(pub, k.pub), verify.WithSimulatedAllowed())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// baseMedians are the fixture's benchmark cases and their medians (ns).
var baseMedians = map[string]float64{"softmax/rows=512/cols=1024": 182_000, "vector_add/n=1048576": 41_000}

// publish signs a simulated run of r (a cuda-build and a benchmark on a
// simulated GPU), and one more for each of r.also, with k and pushes its
// release and bundles to host/repo:r.tag. It returns the release manifest's digest and its
// file's digest.
func publish(ctx context.Context, t testing.TB, k keys, host, repo string, i int, r release) (manifest, file string) {
	t.Helper()
	dir := t.TempDir()
	body := []byte(fmt.Sprintf("fatbin of %s %s\n", repo, r.tag))
	art := filepath.Join(dir, "k.fatbin")
	if err := os.WriteFile(art, body, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	fileHex := hex.EncodeToString(sum[:])
	rel, err := oci.NewRelease([]oci.File{{Name: "build/k.fatbin", Path: art, SHA256: fileHex, Size: int64(len(body))}})
	if err != nil {
		t.Fatal(err)
	}
	var bundles []oci.Bundle
	for j, gpu := range append([]string{r.gpu}, r.also...) {
		bundles = append(bundles, signRun(ctx, t, k, rel, fileHex, i, j, r, gpu)...)
	}
	if _, err := oci.Push(ctx, host+"/"+repo+":"+r.tag, rel, bundles); err != nil {
		t.Fatal(err)
	}
	return rel.Digest(), "sha256:" + fileHex
}

// signRun signs the statements of the j-th run of release r (the i-th
// of the fixture) on a simulated gpu, over rel.
func signRun(ctx context.Context, t testing.TB, k keys, rel *oci.Release, fileHex string, i, j int, r release, gpu string) []oci.Bundle {
	t.Helper()
	hw := &hardware.Record{Simulated: true, DriverVersion: "550.54.15", CUDADriverVersion: "12.4",
		GPUs: []hardware.GPU{{Index: 0, Name: gpu, UUID: "GPU-00000000-0000-0000-0000-000000000001", ComputeCapability: "9.0"}},
		Host: hardware.Host{CPUModel: "fixture CPU", CPUCores: 2, Kernel: "6.1.0", OS: "Debian GNU/Linux 12 (bookworm)"}}
	if err := hw.Seal(); err != nil {
		t.Fatal(err)
	}
	dev := []attest.Device{{UUID: hw.GPUs[0].UUID, Name: gpu, ComputeCapability: "9.0", Simulated: true}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*7*24*time.Hour + time.Duration(j)*time.Hour)
	id := "run-" + r.tag
	if j > 0 {
		id += fmt.Sprintf("-%d", j)
	}
	run := &attest.Run{
		ID: id, PipelinePath: "pipelines/release.yaml", PipelineDigest: "sha256:" + strings.Repeat("a", 64),
		Steps: []attest.StepVerdict{
			{ID: "kernels", Kind: "cuda-build", Verdict: "passed", Runner: "host", Devices: []attest.Device{}},
			{ID: "bench", Kind: "benchmark", Verdict: "passed", Runner: "host", GPU: true, Backend: "cuda", Devices: dev,
				Cases: &attest.CaseCounts{Total: len(baseMedians), Passed: len(baseMedians)}},
		},
		Hardware:   hw,
		Artifacts:  []attest.FileDigest{{Path: "build/k.fatbin", SHA256: fileHex, Step: "kernels", Kind: "fatbin"}},
		Results:    []attest.FileDigest{{Path: "steps/bench/results.json", SHA256: strings.Repeat("b", 64), Step: "bench", Kind: "results"}},
		StartedAt:  start,
		FinishedAt: start.Add(time.Hour),
		Version:    "v0.0.0-fixture",
	}
	var names []string
	for name := range baseMedians {
		names = append(names, name)
	}
	for _, name := range names {
		// A small wobble per release, well under the 3 % threshold.
		m := baseMedians[name] * r.factor * (1 + 0.004*float64(i%3-1))
		frac := 0.41 / r.factor
		run.Benchmarks = append(run.Benchmarks, attest.BenchmarkSummary{Step: "bench", Case: name, MedianNS: m, CILowNS: m * 0.99, CIHighNS: m * 1.01,
			Samples: 30, Status: "passed", Throughput: &attest.Throughput{Value: 1e6 / m, Unit: "GB/s"}, RooflineAttained: &frac, Gate: "none"})
	}
	run.Suites = []attest.SuiteCases{{Step: "bench", Passed: names}}
	run.Artifacts = append(run.Artifacts, attest.FileDigest{Path: oci.ManifestSubjectName, SHA256: strings.TrimPrefix(rel.Digest(), "sha256:"), Kind: "oci-manifest"})
	val, err := attest.ValidationStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []*attest.Statement{val}
	tests, err := attest.TestResultStatements(run)
	if err != nil {
		t.Fatal(err)
	}
	for range r.extra + 1 {
		stmts = append(stmts, tests...)
	}
	signed, err := sign.SignStatements(ctx, k.signer, stmts)
	if err != nil {
		t.Fatal(err)
	}
	var bundles []oci.Bundle
	for n, b := range signed {
		bundles = append(bundles, oci.Bundle{Data: b, PredicateType: stmts[n].PredicateType})
	}
	return bundles
}
