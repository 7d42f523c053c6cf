// Command verify benchmarks gpuattest verify against cosign
// verify-blob-attestation on the same key-signed bundles:
//
//  1. one bundle + a 10 MB artifact: wall time and peak RSS of one call of
//     each tool (median of -runs rounds, after an untimed call of each;
//     each round calls both, alternating which goes first, and the
//     rounds' ratios are printed too; peak RSS is the child's ru_maxrss);
//  2. 100 bundles + 100 artifacts: one gpuattest verify call over a JSONL
//     of all bundles vs 100 cosign calls, one per bundle;
//  3. start-up: `gpuattest version`, a program that links only attest/
//     (bench/verify/attestonly, the floor of a verify-only binary) and a
//     minimal Go program (the floor on this machine at this time), 15
//     rounds, wall and CPU time, the rounds' ratios, and a sum of
//     gpuattest's package inits (GODEBUG=inittrace=1).
//
// It prints a table, then issue 22's goals with this run's figures, each
// PASS or MISS: version at most 4x the minimal program, the single verify
// at most 0.2x cosign (stretch: 0.1x). Run from the module root:
//
//	go run ./bench/verify [-runs 5] [-gpuattest BIN] [-cosign BIN]
//
// Without -gpuattest it builds ./cmd/gpuattest; without -cosign it looks
// in PATH and $GOPATH/bin (.ci/cosign installs it there).
//
// With -hostile it instead runs gpuattest verify on hostile and large
// inputs (predicates of 2, 10 and 21 MB, junk and deeply nested bundles,
// 10 MB of JSONL, nested, huge, multi-document and expensive policies)
// and prints exit code, wall and CPU time and peak RSS per case; it exits
// 1 when a case answers wrongly or an input of at most 10 MB takes more
// than 2 s of CPU or 256 MiB.
package main

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/bench/internal/benchbin"
)

func main() {
	runs := flag.Int("runs", 5, "runs per measurement (median wall time, max RSS)")
	gpuattestBin := flag.String("gpuattest", "", "gpuattest binary (default: go build ./cmd/gpuattest)")
	cosignBin := flag.String("cosign", "", "cosign binary (default: PATH, then $GOPATH/bin)")
	n := flag.Int("n", 100, "bundles in the many-bundles case")
	hostile := flag.Bool("hostile", false, "run the hostile-input cases instead (no cosign)")
	fixtures := flag.String("hostile-fixtures", "", "internal: write the hostile inputs into this directory and exit")
	flag.Parse()
	if *fixtures != "" {
		if err := writeHostileFixtures(*fixtures); err != nil {
			fmt.Fprintf(os.Stderr, "bench/verify: %v\n", err)
			os.Exit(1)
		}
		return
	}
	run := run
	if *hostile {
		run = func(_, _ int, bin, _ string) error { return hostileMain(bin) }
	}
	if err := run(*runs, *n, *gpuattestBin, *cosignBin); err != nil {
		fmt.Fprintf(os.Stderr, "bench/verify: %v\n", err)
		os.Exit(1)
	}
}

type measure struct {
	wall   time.Duration
	cpu    time.Duration // user + system time of the process
	maxRSS int64         // KiB
}

// timeCmd runs argv runs times and returns the median wall time and the
// largest peak RSS; every run must exit 0.
func timeCmd(ctx context.Context, runs int, dir string, env []string, argv ...string) (measure, error) {
	var walls []time.Duration
	var rss int64
	for range runs {
		m, err := timeOnce(ctx, dir, env, argv)
		if err != nil {
			return measure{}, err
		}
		walls = append(walls, m.wall)
		rss = max(rss, m.maxRSS)
	}
	slices.Sort(walls)
	return measure{wall: walls[len(walls)/2], maxRSS: rss}, nil
}

// timeOnce runs argv once, which must exit 0, and returns its wall time,
// CPU time and peak RSS (KiB).
func timeOnce(ctx context.Context, dir string, env []string, argv []string) (measure, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		return measure{}, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	m := measure{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.maxRSS = ru.Maxrss
	}
	return m, nil
}

// timePair times a and b in runs rounds (timeRounds) and returns each
// one's medians and the rounds' ratios a/b.
func timePair(ctx context.Context, runs int, dir string, env []string, a, b []string) (ma, mb measure, r ratio, err error) {
	ms, rs, err := timeRounds(ctx, runs, dir, env, a, b)
	if err != nil {
		return ma, mb, r, err
	}
	return ms[0], ms[1], rs[0], nil
}

// timeRounds times every command in runs rounds, after one untimed call
// of each; each round calls them all, the first of a round rotating, so
// that all see the machine as it is then. It returns each one's median
// wall and CPU time and largest peak RSS, and, for each but the last,
// the rounds' ratios of its wall time to the last command's.
func timeRounds(ctx context.Context, runs int, dir string, env []string, cmds ...[]string) ([]measure, []ratio, error) {
	for _, argv := range cmds {
		if _, err := timeOnce(ctx, dir, env, argv); err != nil {
			return nil, nil, err
		}
	}
	walls := make([][]time.Duration, len(cmds))
	cpus := make([][]time.Duration, len(cmds))
	ms := make([]measure, len(cmds))
	rs := make([]ratio, len(cmds)-1)
	for i := range runs {
		round := make([]measure, len(cmds))
		for k := range cmds {
			j := (i + k) % len(cmds)
			m, err := timeOnce(ctx, dir, env, cmds[j])
			if err != nil {
				return nil, nil, err
			}
			round[j] = m
		}
		last := round[len(cmds)-1].wall
		for j, m := range round {
			walls[j], cpus[j] = append(walls[j], m.wall), append(cpus[j], m.cpu)
			ms[j].maxRSS = max(ms[j].maxRSS, m.maxRSS)
			if j < len(rs) {
				rs[j].rounds = append(rs[j].rounds, float64(m.wall)/float64(last))
			}
		}
	}
	for j := range cmds {
		slices.Sort(walls[j])
		slices.Sort(cpus[j])
		ms[j].wall, ms[j].cpu = walls[j][runs/2], cpus[j][runs/2]
	}
	for j := range rs {
		slices.Sort(rs[j].rounds)
	}
	return ms, rs, nil
}

// ratio is the per-round ratios of a timePair, sorted.
type ratio struct{ rounds []float64 }

// median is the median of the rounds' ratios.
func (r ratio) median() float64 { return r.rounds[len(r.rounds)/2] }

// String is the median ratio, with the middle half of the rounds' range.
func (r ratio) String() string {
	n := len(r.rounds)
	return fmt.Sprintf("%.2fx (per round: median of %d; middle half %.2f-%.2fx, all %.2f-%.2fx)",
		r.rounds[n/2], n, r.rounds[n/4], r.rounds[(3*n)/4], r.rounds[0], r.rounds[n-1])
}

func findCosign() (string, error) {
	if p, err := exec.LookPath("cosign"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	p := filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "bin", "cosign")
	if _, err := os.Stat(p); err != nil {
		return "", errors.New("cosign not found in PATH or $GOPATH/bin\nhint: run .ci/cosign")
	}
	return p, nil
}

func writeArtifact(path string, size int) (string, error) {
	b := make([]byte, size)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// statement is a passing validation statement on real (non-simulated)
// hardware over one artifact: its test ran with backend cuda on the GPU,
// which covers the one pinned target, as the default policy wants.
func statement(name, digest string) (*attest.Statement, error) {
	hex64 := strings.Repeat("a", 64)
	hw := benchHardware()
	gpu := attest.Device{UUID: hw.GPUs[0].UUID, Name: hw.GPUs[0].Name, ComputeCapability: hw.GPUs[0].ComputeCapability}
	return attest.ValidationStatement(&attest.Run{
		PipelineDigest: "sha256:" + hex64,
		Build:          &attest.BuildFacts{Targets: []string{"sm_90"}},
		Steps: []attest.StepVerdict{{ID: "build", Kind: "cuda-build", Verdict: "passed"},
			{ID: "test", Kind: "test", Verdict: "passed", GPU: true, Backend: "cuda", Devices: []attest.Device{gpu}}},
		Hardware:   hw,
		Artifacts:  []attest.FileDigest{{Path: name, SHA256: digest}},
		Results:    []attest.FileDigest{{Path: "results.json", SHA256: hex64}},
		StartedAt:  time.Now().Add(-time.Minute),
		FinishedAt: time.Now(),
		Version:    "bench",
	})
}

func run(runs, n int, gpuattestBin, cosignBin string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "gpuattest-bench-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if gpuattestBin == "" {
		if gpuattestBin, err = benchbin.Gpuattest(dir); err != nil {
			return err
		}
	}
	if cosignBin == "" {
		if cosignBin, err = findCosign(); err != nil {
			return err
		}
	}
	kp, err := benchKey(dir)
	if err != nil {
		return err
	}
	signer, err := sign.NewKeySigner(kp)
	if err != nil {
		return err
	}
	env := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	cosignVerify := func(bundle, artifact string) []string { return cosignVerifyArgs(cosignBin, bundle, artifact) }

	// Case 1: one bundle, 10 MB artifact.
	digest, err := writeArtifact(filepath.Join(dir, "big.fatbin"), 10<<20)
	if err != nil {
		return err
	}
	st, err := statement("big.fatbin", digest)
	if err != nil {
		return err
	}
	b, err := signer.Sign(ctx, st)
	if err != nil {
		return err
	}
	if err := sign.WriteBundle(filepath.Join(dir, "big.bundle.json"), b); err != nil {
		return err
	}
	// The artifact's pages are written back before anything is timed.
	syscall.Sync()
	g1, c1, single, err := timePair(ctx, runs, dir, env,
		[]string{gpuattestBin, "verify", "--bundle", "big.bundle.json", "--key", "key.pub", "big.fatbin"},
		cosignVerify("big.bundle.json", "big.fatbin"))
	if err != nil {
		return err
	}

	// Case 2: n bundles, n small artifacts.
	var bundles [][]byte
	gArgs := []string{gpuattestBin, "verify", "--bundle", "all.jsonl", "--key", "key.pub"}
	for i := range n {
		name := fmt.Sprintf("k%03d.cubin", i)
		d, err := writeArtifact(filepath.Join(dir, name), 64<<10)
		if err != nil {
			return err
		}
		st, err := statement(name, d)
		if err != nil {
			return err
		}
		b, err := signer.Sign(ctx, st)
		if err != nil {
			return err
		}
		bundles = append(bundles, b)
		if err := sign.WriteBundle(filepath.Join(dir, name+".bundle.json"), b); err != nil {
			return err
		}
		gArgs = append(gArgs, name)
	}
	if err := sign.AppendJSONL(filepath.Join(dir, "all.jsonl"), bundles); err != nil {
		return err
	}
	gN, err := timeCmd(ctx, runs, dir, env, gArgs...)
	if err != nil {
		return err
	}
	cN, err := cosignEach(ctx, n, dir, env, cosignVerify)
	if err != nil {
		return err
	}

	startup, err := measureStartup(ctx, dir, env, gpuattestBin)
	if err != nil {
		return err
	}
	printComparison(runs, n, cosignVersion(cosignBin), g1, c1, gN, cN)
	fmt.Printf("single verify, gpuattest / cosign wall, the tools alternating: %s\n\n", single)
	fmt.Println(startup)
	printGoals(startup, single)
	return nil
}

// startup is what measureStartup found.
type startup struct {
	version, attestOnly, minimal measure
	// ratio and attestRatio are the rounds' ratios of gpuattest version
	// and of the attest-only program to the minimal program.
	ratio, attestRatio ratio
	// inits sums gpuattest version's package inits (GODEBUG=inittrace=1).
	inits string
}

// measureStartup times 15 rounds of gpuattest version, a program that
// links only attest/ (bench/verify/attestonly: the floor of a verify-only
// binary) and a minimal Go program, the first of each round rotating
// (timeRounds), against the goal of issue 22: version at most 4x the
// minimal program on the same host (absolute times differ about 5x
// between hosts of this kind).
func measureStartup(ctx context.Context, dir string, env []string, gpuattestBin string) (startup, error) {
	floor, err := minimalProgram(dir)
	if err != nil {
		return startup{}, err
	}
	attestOnly := filepath.Join(dir, "attestonly")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", attestOnly, "./bench/verify/attestonly").CombinedOutput(); err != nil {
		return startup{}, fmt.Errorf("building bench/verify/attestonly: %v\n%s", err, out)
	}
	ms, rs, err := timeRounds(ctx, 15, dir, env, []string{gpuattestBin, "version"}, []string{attestOnly}, []string{floor})
	if err != nil {
		return startup{}, err
	}
	s := startup{version: ms[0], attestOnly: ms[1], minimal: ms[2], ratio: rs[0], attestRatio: rs[1]}
	s.inits, err = initSummary(ctx, dir, env, gpuattestBin)
	return s, err
}

// initSummary runs gpuattest version with GODEBUG=inittrace=1 and sums
// its package inits: how many, their clock and allocations, and the five
// slowest (one run: the clocks are as noisy as the machine).
func initSummary(ctx context.Context, dir string, env []string, bin string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, "version")
	cmd.Dir, cmd.Env = dir, append(slices.Clone(env), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s version: %v\n%s", bin, err, out)
	}
	type pkgInit struct {
		name string
		ms   float64
	}
	var inits []pkgInit
	var total float64
	var allocs int
	for line := range strings.Lines(string(out)) {
		// init PKG @0.5 ms, 0.1 ms clock, 9216 bytes, 3 allocs
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" {
			continue
		}
		var ms float64
		var n int
		fmt.Sscan(f[4], &ms)
		fmt.Sscan(f[9], &n)
		inits = append(inits, pkgInit{f[1], ms})
		total += ms
		allocs += n
	}
	slices.SortFunc(inits, func(a, b pkgInit) int { return cmp.Compare(b.ms, a.ms) })
	var top []string
	for _, p := range inits[:min(5, len(inits))] {
		top = append(top, fmt.Sprintf("%s %.2f ms", p.name, p.ms))
	}
	return fmt.Sprintf("%d package inits, %.1f ms clock, %d allocations; slowest: %s",
		len(inits), total, allocs, strings.Join(top, ", ")), nil
}

// String prints the start-up figures.
func (s startup) String() string {
	row := func(name string, m measure) string {
		return fmt.Sprintf("  %-42s wall %8s  CPU %8s\n", name,
			m.wall.Round(100*time.Microsecond), m.cpu.Round(100*time.Microsecond))
	}
	return "start-up, 15 rounds, the first of each round rotating (medians; CPU is user + system):\n" +
		row("gpuattest version", s.version) +
		row("attest/... only (bench/verify/attestonly)", s.attestOnly) +
		row("a minimal Go program", s.minimal) +
		fmt.Sprintf("  version / minimal: %s\n", s.ratio) +
		fmt.Sprintf("  attest/... only / minimal: %s\n", s.attestRatio) +
		fmt.Sprintf("  CPU time, version / minimal: %.2fx\n", float64(s.version.cpu)/float64(s.minimal.cpu)) +
		"  gpuattest version: " + s.inits
}

// printGoals prints issue 22's start-up goals with this run's figures,
// each PASS or MISS: the median of the rounds' ratios decides.
func printGoals(s startup, single ratio) {
	goal := func(name string, got, limit float64) {
		verdict := "PASS"
		if got > limit {
			verdict = "MISS"
		}
		fmt.Printf("  %-50s %6.2fx  %s\n", fmt.Sprintf(name, limit), got, verdict)
	}
	fmt.Printf("\ngoals (issue 22) on this host, load average %s:\n", loadAverage())
	goal("gpuattest version <= %.0fx a minimal Go program", s.ratio.median(), 4)
	goal("single verify <= %.2fx cosign", single.median(), 0.2)
	goal("stretch: single verify <= %.2fx cosign", single.median(), 0.1)
}

// loadAverage is /proc/loadavg's three load averages, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// minimalProgram builds a Go program that prints one line, the floor of
// any Go program's start-up on this machine, into dir.
func minimalProgram(dir string) (string, error) {
	src := filepath.Join(dir, "minimal")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"minimal\") }\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module minimal\n"), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "minimal-bin")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the minimal program: %v\n%s", err, out)
	}
	return bin, nil
}

// cosignEach verifies each of the n bundles with its own cosign call and
// returns the total wall time and the largest peak RSS.
func cosignEach(ctx context.Context, n int, dir string, env []string, cosignVerify func(bundle, artifact string) []string) (measure, error) {
	var cN measure
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("k%03d.cubin", i)
		m, err := timeCmd(ctx, 1, dir, env, cosignVerify(name+".bundle.json", name)...)
		if err != nil {
			return measure{}, err
		}
		cN.maxRSS = max(cN.maxRSS, m.maxRSS)
	}
	cN.wall = time.Since(start)
	return cN, nil
}

// cosignVerifyArgs is the cosign call that verifies bundle for artifact.
func cosignVerifyArgs(bin, bundle, artifact string) []string {
	return []string{bin, "verify-blob-attestation", "--key", "key.pub", "--bundle", bundle,
		"--insecure-ignore-tlog", "--type", attest.ValidationPredicateType, artifact}
}

// printComparison prints the table of the gpuattest and cosign figures.
func printComparison(runs, n int, cosignVer string, g1, c1, gN, cN measure) {
	fmt.Printf("gpuattest verify vs cosign %s verify-blob-attestation (key-signed bundles, --insecure-ignore-tlog for cosign)\n", cosignVer)
	fmt.Printf("runs per single-call figure: %d (median wall, max peak RSS; the single verify's rounds alternate the tools)\n\n", runs)
	fmt.Printf("%-34s %-10s %12s %14s\n", "case", "tool", "wall", "peak RSS")
	row := func(c, tool string, m measure) {
		fmt.Printf("%-34s %-10s %12s %11.1f MiB\n", c, tool, m.wall.Round(100*time.Microsecond), float64(m.maxRSS)/1024)
	}
	row("1 bundle + 10 MB artifact", "gpuattest", g1)
	row("1 bundle + 10 MB artifact", "cosign", c1)
	row(fmt.Sprintf("%d bundles, 1 gpuattest call", n), "gpuattest", gN)
	row(fmt.Sprintf("%d bundles, %d cosign calls", n, n), "cosign", cN)
	fmt.Printf("\nratios (gpuattest / cosign): single wall %.2fx, single peak RSS %.2fx; %d bundles: gpuattest %.1fx faster\n",
		float64(g1.wall)/float64(c1.wall), float64(g1.maxRSS)/float64(c1.maxRSS), n, float64(cN.wall)/float64(gN.wall))
}

// hostileMain runs the hostile-input cases in a temporary directory.
func hostileMain(bin string) error {
	dir, err := os.MkdirTemp("", "gpuattest-bench-hostile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		if bin, err = benchbin.Gpuattest(dir); err != nil {
			return err
		}
	}
	env := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	return runHostile(context.Background(), bin, dir, env)
}

// benchKey makes a key pair and writes its public key to dir/key.pub.
func benchKey(dir string) (*sign.Keypair, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	kp, err := sign.NewKeypair(priv)
	if err != nil {
		return nil, err
	}
	pubPEM, err := kp.GetPublicKeyPem()
	if err != nil {
		return nil, err
	}
	return kp, os.WriteFile(filepath.Join(dir, "key.pub"), []byte(pubPEM), 0o644)
}

func cosignVersion(bin string) string {
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		return "?"
	}
	s := string(out)
	if i := strings.Index(s, `"gitVersion": "`); i >= 0 {
		s = s[i+len(`"gitVersion": "`):]
		if j := strings.IndexByte(s, '"'); j >= 0 {
			return s[:j]
		}
	}
	return "?"
}

// benchHardware is a sealed record of one real (not simulated) GPU.
func benchHardware() *hardware.Record {
	rec := &hardware.Record{Host: hardware.Host{CPUModel: "bench"}, GPUs: []hardware.GPU{{Name: "bench", UUID: "GPU-bench", ComputeCapability: "9.0"}}}
	if err := rec.Seal(); err != nil {
		panic(err)
	}
	return rec
}
