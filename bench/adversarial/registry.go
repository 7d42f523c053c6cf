package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
)

// junkReferrers is the number of junk referrers of issue 21's goal: a
// verify of a release with that many stays within the peak RSS goal.
const junkReferrers = 25_000

// registryLab holds two releases signed by one key, published to
// registries on 127.0.0.1 that lie in different ways.
type registryLab struct {
	*lab
	dir  string
	pub  string
	runs [2]string // signed run directories
	// digests of the two releases, sha256:<hex>.
	digests [2]string
	stops   []func()
}

// registryCase is one verify or pull call against a hostile source.
type registryCase struct {
	name string
	args []string
	want []int
	// says is text the output must hold.
	says []string
	// after checks what the source saw, once the call is done.
	after func() string
	// within bounds the call's wall time.
	within time.Duration
	// slow holds the call to the peak RSS goal but not the CPU one.
	slow bool
}

// registryCases publishes two signed releases and checks that each lie a
// registry or a layout can tell is refused, with a bounded read.
func registryCases(ctx context.Context, l *lab) ([]result, error) {
	r := &registryLab{lab: l, dir: filepath.Join(l.dir, "registry")}
	defer func() {
		for _, stop := range r.stops {
			stop()
		}
	}()
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	cs, err := r.cases(ctx)
	if err != nil {
		return nil, err
	}
	return parallel(ctx, len(cs), func(ctx context.Context, i int) (result, error) { return r.run(ctx, cs[i]) })
}

// setUp signs two runs (internal/runfixture) with a key made by
// gpuattest key generate.
func (r *registryLab) setUp(ctx context.Context) error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	prefix, err := r.keyPair(ctx, r.dir, "release")
	if err != nil {
		return err
	}
	r.pub = prefix + ".pub"
	kp, err := sign.LoadPrivateKey(prefix+".key", nil)
	if err != nil {
		return err
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		return err
	}
	for i := range r.runs {
		r.runs[i] = filepath.Join(r.dir, fmt.Sprintf("run%d", i))
		files := []runfixture.File{{Name: "build/k.fatbin", Size: int64(4096 + i)}}
		if _, err := runfixture.Write(ctx, filepath.Join(r.dir, fmt.Sprintf("src%d", i)), r.runs[i], files, s); err != nil {
			return err
		}
	}
	return nil
}

// push publishes run i to ref with gpuattest push and returns the
// release's digest.
func (r *registryLab) push(ctx context.Context, i int, ref string) (string, error) {
	u, out, err := r.call(ctx, r.dir, nil, "push", r.runs[i], ref)
	if err != nil || u.Exit != 0 {
		return "", fmt.Errorf("push %s: exit %d, %v\n%s", ref, u.Exit, err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	at := strings.LastIndex(last, "@")
	if at < 0 {
		return "", fmt.Errorf("push %s printed no digest:\n%s", ref, out)
	}
	return strings.TrimSpace(last[at+1:]), nil
}

// serve starts a registry with the wrapper and remembers to stop it.
func (r *registryLab) serve(wrap func(http.Handler) http.Handler) string {
	host, stop := registrytest.ServeInProcess(wrap)
	r.stops = append(r.stops, stop)
	return host
}

// cases publishes the releases and builds the cases.
func (r *registryLab) cases(ctx context.Context) ([]registryCase, error) {
	var swapTo, headerSays atomic.Value // set once the digests are known
	swapTo.Store("")
	headerSays.Store("")
	liar := r.serve(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			p := req.URL.Path
			switch {
			case strings.HasPrefix(p, "/v2/swap/") && swapTo.Load() != "":
				from, to, _ := strings.Cut(swapTo.Load().(string), " ")
				req.URL.Path = strings.Replace(p, "/manifests/"+from, "/manifests/"+to, 1)
			case strings.HasPrefix(p, "/v2/header/") && strings.Contains(p, "/manifests/") && headerSays.Load() != "":
				w = registrytest.LyingHeader{ResponseWriter: w, Digest: headerSays.Load().(string)}
			}
			h.ServeHTTP(w, req)
		})
	})
	for _, repo := range []string{"honest", "swap", "header"} {
		for i := range r.runs {
			d, err := r.push(ctx, i, fmt.Sprintf("%s/%s/rel:v%d", liar, repo, i))
			if err != nil {
				return nil, err
			}
			r.digests[i] = d
		}
	}
	swapTo.Store(r.digests[0] + " " + r.digests[1])
	headerSays.Store(r.digests[1])

	junk := registrytest.NewJunk(junkReferrers, r.digests[0])
	junkHost := r.serve(junk.Wrap)
	if _, err := r.push(ctx, 0, junkHost+"/junk/rel:v0"); err != nil {
		return nil, err
	}

	layout, err := r.lyingLayout(ctx, liar)
	if err != nil {
		return nil, err
	}

	huge, err := oci.NewRelease([]oci.File{{Name: "huge.bin", SHA256: strings.Repeat("ab", 32), Size: 1 << 30}})
	if err != nil {
		return nil, err
	}
	stub, stop := registrytest.ServeStub(huge.Manifest())
	r.stops = append(r.stops, stop)
	noBlob := func() string {
		if n := stub.Served.Load(); n != 0 {
			return fmt.Sprintf("the registry served %d bytes of a layer", n)
		}
		return ""
	}
	trickle, stop := registrytest.ServeTrickle(3 * time.Second)
	r.stops = append(r.stops, stop)
	slowDrip, stop := registrytest.ServeTrickle(100 * time.Millisecond)
	r.stops = append(r.stops, stop)

	a, b := r.digests[0], r.digests[1]
	return []registryCase{
		{name: "an honest registry verifies, by tag", args: []string{"verify", liar + "/honest/rel:v0"}, want: []int{0}},
		{name: "an honest registry verifies, by digest", args: []string{"verify", liar + "/honest/rel@" + a}, want: []int{0}},
		{name: "another signed release served under the pinned digest", args: []string{"verify", liar + "/swap/rel@" + a}, want: []int{1},
			says: []string{"digest is " + b, "not " + a + ", the digest asked for"}},
		{name: "pull of another release served under the pinned digest writes nothing", args: []string{"pull", liar + "/swap/rel@" + a, "--out", filepath.Join(r.dir, "swap-out")}, want: []int{1},
			says: []string{"the digest asked for"}, after: absent(filepath.Join(r.dir, "swap-out"))},
		{name: "a Docker-Content-Digest that is not the manifest's, by tag", args: []string{"verify", liar + "/header/rel:v0"}, want: []int{1},
			says: []string{"Docker-Content-Digest is " + b, "has digest " + a}},
		{name: "a layout whose blob under the digest holds another release", args: []string{"verify", oci.LayoutPrefix + layout + "@" + a}, want: []int{1},
			says: []string{"holds a manifest whose digest is " + b}},
		{name: "a layout whose index.json entry names another manifest's bytes", args: []string{"verify", oci.LayoutPrefix + layout}, want: []int{1},
			says: []string{"holds a manifest whose digest is " + b}},
		{name: "a 1 GiB layer and no bundles: nothing of the layer fetched", args: []string{"verify", stub.Host + "/huge:v1"}, want: []int{1},
			says: []string{"Not fetched:", "1073741824 bytes"}, after: noBlob},
		{name: "a layer over --max-layer-size: refused before any fetch", args: []string{"verify", stub.Host + "/huge:v1", "--max-layer-size", "1000000"}, want: []int{1},
			says: []string{"--max-layer-size"}, after: noBlob},
		{name: fmt.Sprintf("%d junk referrers: verified, unfit ones never fetched", junkReferrers), args: []string{"verify", junkHost + "/junk/rel:v0"}, want: []int{0},
			says: []string{fmt.Sprintf("Not checked: %d referrer(s)", junkReferrers)}, slow: true,
			after: func() string {
				if n := junk.Unfit.Load(); n != 0 {
					return fmt.Sprintf("%d referrers fetched whose listing showed they are not bundles", n)
				}
				if m := junk.MaxInFlight.Load(); m > 8 {
					return fmt.Sprintf("%d referrers in flight at once, want 8 at most", m)
				}
				return ""
			}},
		{name: "a registry that sends a byte every 3 s (idle timeout 1s)", args: []string{"verify", trickle + "/r:v1", "--registry-idle-timeout", "1s"}, want: []int{1},
			says: []string{"registry " + trickle + " sent nothing for 1s", "--registry-idle-timeout"}, within: 10 * time.Second},
		{name: "a registry that sends a byte every 100 ms (overall timeout 2s)", args: []string{"verify", slowDrip + "/r:v1", "--registry-timeout", "2s"}, want: []int{1},
			says: []string{"registry " + slowDrip + ": not done within the overall timeout of 2s", "--registry-timeout"}, within: 10 * time.Second},
	}, nil
}

// lyingLayout copies both releases into OCI layouts (pull --to) and
// returns the first, with the second's blobs added and its manifest
// written under the first's digest.
func (r *registryLab) lyingLayout(ctx context.Context, host string) (string, error) {
	var dirs [2]string
	for i := range dirs {
		dirs[i] = filepath.Join(r.dir, fmt.Sprintf("layout%d", i))
		u, out, err := r.call(ctx, r.dir, nil, "pull", host+"/honest/rel@"+r.digests[i], "--key", r.pub, "--policy", "builtin:cpu-tier", "--to", oci.LayoutPrefix+dirs[i])
		if err != nil || u.Exit != 0 {
			return "", fmt.Errorf("pull --to: exit %d, %v\n%s", u.Exit, err, out)
		}
	}
	blobs := func(dir string) string { return filepath.Join(dir, "blobs", "sha256") }
	entries, err := os.ReadDir(blobs(dirs[1]))
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(blobs(dirs[1]), e.Name()))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(blobs(dirs[0]), e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	other, err := os.ReadFile(filepath.Join(blobs(dirs[1]), strings.TrimPrefix(r.digests[1], "sha256:")))
	if err != nil {
		return "", err
	}
	return dirs[0], os.WriteFile(filepath.Join(blobs(dirs[0]), strings.TrimPrefix(r.digests[0], "sha256:")), other, 0o644)
}

// absent checks that path was not written.
func absent(path string) func() string {
	return func() string {
		if _, err := os.Stat(path); err == nil {
			return path + " was written"
		}
		return ""
	}
}

// run runs one case with the release key and the CPU-tier policy.
func (r *registryLab) run(ctx context.Context, c registryCase) (result, error) {
	args := append(append([]string(nil), c.args...), "--key", r.pub, "--policy", "builtin:cpu-tier")
	u, out, err := r.call(ctx, r.dir, nil, args...)
	if err != nil {
		return result{}, err
	}
	right, why := exitIn(u, out, c.want...)
	for _, s := range c.says {
		if right && !strings.Contains(out, s) {
			right, why = false, fmt.Sprintf("output does not say %q%s", s, tail(out))
		}
	}
	if right && c.within > 0 && u.Wall > c.within {
		right, why = false, fmt.Sprintf("took %s, want %s at most", u.Wall.Round(time.Millisecond), c.within)
	}
	if right && c.after != nil {
		if bad := c.after(); bad != "" {
			right, why = false, bad
		}
	}
	if bad := unsafeText(out); right && bad != "" {
		right, why = false, bad+tail(out)
	}
	return result{name: c.name, right: right, why: why, usage: u, noCPUGoal: c.slow}, nil
}
