// Command publish benchmarks publishing against a docker-registry
// (distribution 2.8, tag schema) it starts on 127.0.0.1, in one run:
//
//  1. push and pull of a release of -files files (-size in all, 1 GiB by
//     default): gpuattest push RUNDIR REF vs oras push, gpuattest pull
//     REF --out DIR (which verifies first, and fsyncs what it writes) vs
//     oras pull, median wall time of -transfer-runs rounds, each tool
//     first in every other round, the page cache written back (sync)
//     before each command;
//  2. gpuattest verify REF vs cosign verify-attestation
//     --new-bundle-format REF@DIGEST on a small release with -referrers
//     bundle referrers (median of -runs runs).
//
// Each tool pushes into its own repository of the same registry. It
// prints a table with the ratios and the goals (gpuattest at most 1.0x
// oras, verify at most 0.5x cosign). Run from the module root:
//
//	go run ./bench/publish [-gpuattest BIN] [-size 1GiB] [-files 8] [-referrers 20] [-runs 5] [-transfer-runs 3]
//
// Without -gpuattest it builds ./cmd/gpuattest; cosign and oras come from
// PATH or $GOPATH/bin (.ci/cosign and .ci/oras install them there).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
	"github.com/gpuattest/gpuattest/pipeline"
)

type config struct {
	gpuattest, cosign, oras string
	size                    int64
	files, referrers, runs  int
	transferRuns            int
	dir                     string
}

func main() {
	var c config
	size := flag.String("size", "1GiB", "total size of the pushed and pulled files")
	flag.StringVar(&c.gpuattest, "gpuattest", "", "gpuattest binary (default: go build ./cmd/gpuattest)")
	flag.IntVar(&c.files, "files", 8, "files in the release")
	flag.IntVar(&c.referrers, "referrers", 20, "bundle referrers in the verify case")
	flag.IntVar(&c.runs, "runs", 5, "runs of each verify (median)")
	flag.IntVar(&c.transferRuns, "transfer-runs", 3, "rounds of push and pull (median)")
	flag.Parse()
	n, err := pipeline.ParseSize(*size)
	if err == nil {
		c.size = int64(n)
		err = run(&c)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench/publish: %v\n", err)
		os.Exit(1)
	}
}

func run(c *config) error {
	var err error
	if c.dir, err = os.MkdirTemp("", "bench-publish-"); err != nil {
		return err
	}
	defer os.RemoveAll(c.dir)
	if err := c.tools(); err != nil {
		return err
	}
	reg, stop, err := registrytest.ServeDocker(filepath.Join(c.dir, "registry"))
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("docker-registry on %s; gpuattest %s; %s; %s\n\n", reg.Host, c.gpuattest, c.cosign, c.oras)
	rows, err := c.transfer(reg.Host)
	if err != nil {
		return err
	}
	vrows, err := c.verify(reg.Host)
	if err != nil {
		return err
	}
	fmt.Printf("%-44s %12s %12s %8s %s\n", "case", "gpuattest", "other", "ratio", "goal")
	for _, r := range append(rows, vrows...) {
		ratio := r.ours.Seconds() / r.theirs.Seconds()
		ok := "met"
		if ratio > r.goal {
			ok = "NOT met"
		}
		fmt.Printf("%-44s %12s %12s %7.2fx <= %.1fx %s\n", r.name, r.ours.Round(time.Millisecond), r.theirs.Round(time.Millisecond), ratio, r.goal, ok)
	}
	return nil
}

type row struct {
	name         string
	ours, theirs time.Duration
	goal         float64
}

// tools finds cosign and oras and builds gpuattest when not given.
func (c *config) tools() error {
	for _, t := range []struct {
		name string
		dst  *string
	}{{"cosign", &c.cosign}, {"oras", &c.oras}} {
		p, err := goTool(t.name)
		if err != nil {
			return err
		}
		*t.dst = p
	}
	if c.gpuattest != "" {
		return nil
	}
	c.gpuattest = filepath.Join(c.dir, "gpuattest")
	out, err := exec.Command("go", "build", "-o", c.gpuattest, "./cmd/gpuattest").CombinedOutput()
	if err != nil {
		return fmt.Errorf("building gpuattest: %v\n%s", err, out)
	}
	return nil
}

func goTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	p := filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found in PATH or $GOPATH/bin (.ci/%s installs it)", name, name)
	}
	return p, nil
}

// signedRun writes a signed fixture run of files of size bytes each into
// name and returns its directory, the public key file, the file names
// and the signer.
func (c *config) signedRun(name string, files int, size int64) (string, string, []string, *sign.Signer, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, nil, err
	}
	kp, _ := sign.NewKeypair(priv)
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		return "", "", nil, nil, err
	}
	pub, err := kp.GetPublicKeyPem()
	if err != nil {
		return "", "", nil, nil, err
	}
	pubFile := filepath.Join(c.dir, name+".pub")
	if err := os.WriteFile(pubFile, []byte(pub), 0o644); err != nil {
		return "", "", nil, nil, err
	}
	var fs []runfixture.File
	var names []string
	for i := range files {
		fs = append(fs, runfixture.File{Name: fmt.Sprintf("build/k%d.fatbin", i), Size: size})
		names = append(names, fmt.Sprintf("build/k%d.fatbin", i))
	}
	dir := filepath.Join(c.dir, name)
	if _, err := runfixture.Write(context.Background(), filepath.Join(c.dir, name+"-root"), dir, fs, s); err != nil {
		return "", "", nil, nil, err
	}
	return dir, pubFile, names, s, nil
}

// timed runs a command in dir and returns its wall time.
func timed(dir string, name string, args ...string) (time.Duration, string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GPUATTEST_PASSWORD=")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return d, string(out), fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return d, string(out), nil
}

// transfer times push and pull of the large release, -transfer-runs
// rounds, each tool first in every other round. Before each timed command
// the page cache is written back (sync), so that one tool's downloads,
// still being written to disk, do not slow the next tool's run. Each
// round pushes into repositories of its own (a registry skips blobs a
// repository already has) and pulls into new directories.
func (c *config) transfer(host string) ([]row, error) {
	runDir, pub, names, _, err := c.signedRun("big", c.files, c.size/int64(c.files))
	if err != nil {
		return nil, err
	}
	outputs := filepath.Join(runDir, "steps", "kernels", "outputs")
	var push, orasPush, pull, orasPull []time.Duration
	for i := range c.transferRuns {
		ours := fmt.Sprintf("%s/bench/gpuattest-%d:v1", host, i)
		theirs := fmt.Sprintf("%s/bench/oras-%d:v1", host, i)
		gOut, oOut := filepath.Join(c.dir, fmt.Sprintf("gpuattest-out-%d", i)), filepath.Join(c.dir, fmt.Sprintf("oras-out-%d", i))
		steps := []struct {
			into *[]time.Duration
			dir  string
			argv []string
		}{
			{&orasPush, outputs, append([]string{c.oras, "push", "--plain-http", "--disable-path-validation", theirs}, names...)},
			{&push, c.dir, []string{c.gpuattest, "push", runDir, ours}},
			{&orasPull, c.dir, []string{c.oras, "pull", "--plain-http", "-o", oOut, theirs}},
			// The fixture run used no GPU: verified with the CPU tier, by name.
			{&pull, c.dir, []string{c.gpuattest, "pull", ours, "--key", pub, "--policy", "builtin:cpu-tier", "--out", gOut}},
		}
		if i%2 == 1 {
			steps[0], steps[1], steps[2], steps[3] = steps[1], steps[0], steps[3], steps[2]
		}
		for _, st := range steps {
			if err := exec.Command("sync").Run(); err != nil {
				return nil, fmt.Errorf("sync: %w", err)
			}
			d, _, err := timed(st.dir, st.argv[0], st.argv[1:]...)
			if err != nil {
				return nil, err
			}
			*st.into = append(*st.into, d)
		}
		for _, d := range []string{gOut, oOut} {
			if err := os.RemoveAll(d); err != nil {
				return nil, err
			}
		}
		fmt.Printf("round %d: push %s (oras %s), pull %s (oras %s)\n", i+1, push[i].Round(time.Millisecond), orasPush[i].Round(time.Millisecond),
			pull[i].Round(time.Millisecond), orasPull[i].Round(time.Millisecond))
	}
	label := fmt.Sprintf("%d files, %s", c.files, human(c.size))
	return []row{
		{name: "push " + label + " vs oras push", ours: median(push), theirs: median(orasPush), goal: 1.0},
		{name: "pull " + label + " vs oras pull", ours: median(pull), theirs: median(orasPull), goal: 1.0},
	}, nil
}

// verify times gpuattest verify REF and cosign verify-attestation on a
// small release with c.referrers bundle referrers.
func (c *config) verify(host string) ([]row, error) {
	runDir, pub, _, s, err := c.signedRun("small", 4, 64<<10)
	if err != nil {
		return nil, err
	}
	if err := multiplyBundles(runDir, s, c.referrers); err != nil {
		return nil, err
	}
	ref := host + "/bench/referrers:v1"
	_, out, err := timed(c.dir, c.gpuattest, "push", runDir, ref)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	byDigest := lines[len(lines)-1]
	var ours, theirs []time.Duration
	for range c.runs {
		d, _, err := timed(c.dir, c.gpuattest, "verify", ref, "--key", pub, "--policy", "builtin:cpu-tier")
		if err != nil {
			return nil, err
		}
		ours = append(ours, d)
		d, _, err = timed(c.dir, c.cosign, "verify-attestation", "--new-bundle-format", "--key", pub, "--insecure-ignore-tlog",
			"--allow-http-registry", "--type", attest.ValidationPredicateType, byDigest)
		if err != nil {
			return nil, err
		}
		theirs = append(theirs, d)
	}
	return []row{{name: fmt.Sprintf("verify REF, %d referrers vs cosign", c.referrers), ours: median(ours), theirs: median(theirs), goal: 0.5}}, nil
}

// multiplyBundles signs the run's statements again with s until its
// attestations hold n bundles (ECDSA signatures differ each time, so each
// bundle is its own referrer).
func multiplyBundles(runDir string, s *sign.Signer, n int) error {
	path := filepath.Join(runDir, "attestations.intoto.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var stmts []*attest.Statement
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		st, err := sign.UnverifiedStatement([]byte(line))
		if err != nil {
			return err
		}
		stmts = append(stmts, st)
	}
	if len(stmts) == 0 {
		return errors.New("the run has no bundles")
	}
	var bundles [][]byte
	for i := range n {
		b, err := s.Sign(context.Background(), stmts[i%len(stmts)])
		if err != nil {
			return err
		}
		bundles = append(bundles, b)
	}
	return sign.WriteJSONL(path, bundles)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func human(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
