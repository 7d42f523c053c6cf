package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuattest/gpuattest/internal/cudaimage"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/image"
)

// TestCheckImage: a runner refuses a command with no image or one not
// pinned by digest; an image written as text is parsed once, by
// image.ParsePinned, which refuses what is not pinned the same way.
func TestCheckImage(t *testing.T) {
	tests := []struct {
		name, ref, wantErr string
	}{
		{"digest", "127.0.0.1:5000/cuda-build@sha256:" + strings.Repeat("ab", 32), ""},
		{"tag", "nvidia/cuda:12.4.1-devel-ubuntu22.04", "not pinned by digest"},
		{"empty", "", "has no image"},
		{"short digest", "x@sha256:abc", "not pinned by digest"},
		{"oci layout", "oci-layout:/srv/img@sha256:" + strings.Repeat("ab", 32), ""},
		{"docker archive", "docker-archive:/srv/img.tar@sha256:" + strings.Repeat("ab", 32), ""},
		{"floating oci layout", "oci-layout:/srv/img", "not pinned by digest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			switch p, perr := image.ParsePinned(tt.ref); {
			case tt.ref == "":
				err = checkImage("docker", image.Pinned{})
			case perr != nil:
				err = perr
			default:
				err = checkImage("docker", p)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "hint:") {
				t.Fatalf("got %v, want an error containing %q and a hint", err, tt.wantErr)
			}
		})
	}
}

func TestWriteEnvFile(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		want    string
		wantErr string
	}{
		{"plain", []string{"A=1", "B=two words", "C="}, "A=1\nB=two words\nC=\n", ""},
		{"newline", []string{"A=x\ny"}, "", "newline"},
		{"no equals", []string{"A"}, "", "not KEY=VALUE"},
		{"space in key", []string{"A B=1"}, "", "not KEY=VALUE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "env")
			err := writeEnvFile(p, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			if diff := cmp.Diff(tt.want, string(b)); diff != "" {
				t.Errorf("env file (-want +got):\n%s", diff)
			}
			if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
				t.Errorf("env file mode %v, want 0600", fi.Mode().Perm())
			}
		})
	}
}

func TestExtractIntoStaysInside(t *testing.T) {
	type ent struct {
		name, link, body string
		typ              byte
	}
	mk := func(ents ...ent) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range ents {
			h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
			if e.typ != tar.TypeReg {
				h.Size = 0
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if e.typ == tar.TypeReg {
				tw.Write([]byte(e.body))
			}
		}
		tw.Close()
		return buf.Bytes()
	}
	tests := []struct {
		name    string
		tar     []byte
		wantErr bool
	}{
		{"ok", mk(ent{"./", "", "", tar.TypeDir}, ent{"./out/a.txt", "", "hi", tar.TypeReg}, ent{"./l", "out/a.txt", "", tar.TypeSymlink}), false},
		{"dotdot", mk(ent{"../escape.txt", "", "x", tar.TypeReg}), true},
		{"through symlink", mk(ent{"up", "..", "", tar.TypeSymlink}, ent{"up/escape.txt", "", "x", tar.TypeReg}), true},
		{"through absolute symlink", mk(ent{"abs", filepath.Dir(t.TempDir()), "", tar.TypeSymlink}, ent{"abs/escape.txt", "", "x", tar.TypeReg}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "work")
			os.Mkdir(dir, 0o755)
			err := extractInto(bytes.NewReader(tt.tar), dir)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if _, err := os.Stat(filepath.Join(parent, "escape.txt")); err == nil {
				t.Fatal("an entry was written outside the work dir")
			}
			if !tt.wantErr {
				if b, _ := os.ReadFile(filepath.Join(dir, "l")); string(b) != "hi" {
					t.Errorf("extracted content %q, want %q", b, "hi")
				}
			}
		})
	}
}

// cudaImage builds (or loads) the CUDA build image, pushes it to a fresh
// registry on 127.0.0.1 under a tag and locks the tag to a digest the way
// gpuattest lock does (image.Resolve), returning the pinned image.
func cudaImage(t *testing.T) image.Pinned {
	t.Helper()
	testenv.RequireTool(t, "nvcc")
	_, img := cudaimage.Ensure(t)
	host := cudaimage.StartRegistry(t)
	pushed := cudaimage.Push(t, img, host)
	res, err := image.Resolve(t.Context(), host+"/cuda-build:"+cudaimage.Tag)
	if err != nil {
		t.Fatalf("locking the pushed image: %v", err)
	}
	if res.Pinned().String() != pushed {
		t.Fatalf("lock resolved %s, pushed %s", res.Pinned(), pushed)
	}
	return res.Pinned()
}

// runIn runs args in ref with r and returns the result and the output.
func runIn(t *testing.T, ctx context.Context, r Runner, ref image.Pinned, dir string, env []string, args ...string) (*Result, string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	res, err := r.Run(ctx, &Command{Args: args, Dir: dir, Env: env, Image: ref, Stdout: &stdout, Stderr: &stderr})
	return res, stdout.String(), stderr.String(), err
}

// hostProcessWith reports whether a process on this machine has arg in
// its command line.
func hostProcessWith(arg string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(arg)) {
			return true
		}
	}
	return false
}

// checkBuildEqualsHost builds the test kernel with nvcc in ref through r
// and checks that the fatbin is the host build's, byte for byte, and
// belongs to the invoking user.
func checkBuildEqualsHost(t *testing.T, r Runner, ref image.Pinned) {
	t.Helper()
	hostFatbin := cudaimage.HostFatbin(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "kernel.cu")
	if err := os.WriteFile(src, []byte(cudaimage.KernelSource), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "kernel.fatbin")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	res, stdout, stderr, err := runIn(t, ctx, r, ref, dir, nil, cudaimage.NvccArgs(src, out, true)...)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if res.ExitCode != 0 {
		t.Fatalf("nvcc exit %d\nstdout: %s\nstderr: %s", res.ExitCode, stdout, stderr)
	}
	t.Logf("nvcc build inside %s took %v (runner duration %v)", r.Name(), time.Since(start).Round(time.Millisecond), res.Duration.Round(time.Millisecond))
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, hostFatbin) {
		t.Fatalf("fatbin built inside (%d bytes) differs from the host build (%d bytes)", len(got), len(hostFatbin))
	}
	fi, _ := os.Stat(out)
	if uid, ok := fileUID(fi); !ok || uid != os.Getuid() {
		t.Errorf("output owned by %+v, want uid %d", fi.Sys(), os.Getuid())
	}
}

// checkRunnerBehaviour runs the checks shared by the container runners:
// a real nvcc build whose fatbin equals the host's, env, exit codes, no
// network, cancel.
func checkRunnerBehaviour(t *testing.T, r Runner, ref image.Pinned, afterCancel func(t *testing.T)) {
	t.Run("nvcc build equals host build", func(t *testing.T) { checkBuildEqualsHost(t, r, ref) })

	t.Run("env and exit code", func(t *testing.T) {
		res, stdout, stderr, err := runIn(t, t.Context(), r, ref, t.TempDir(), []string{"GREETING=hello there", "PATH=/usr/bin:/bin"},
			"bash", "-c", `echo "$GREETING from $(pwd)"; echo oops >&2; exit 7`)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 7 || !strings.HasPrefix(stdout, "hello there from /") || stderr != "oops\n" {
			t.Errorf("exit %d stdout %q stderr %q; want 7, %q, %q", res.ExitCode, stdout, stderr, "hello there from /...", "oops\n")
		}
	})

	t.Run("missing command is an error", func(t *testing.T) {
		_, _, _, err := runIn(t, t.Context(), r, ref, t.TempDir(), nil, "no-such-binary-gpuattest")
		if err == nil {
			t.Fatal("want an error for a command that is not in the image")
		}
	})

	t.Run("no network", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var accepted atomic.Int32
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		res, stdout, stderr, err := runIn(t, t.Context(), r, ref, t.TempDir(), nil, "bash", "-c",
			`cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; exec 3<>/dev/tcp/127.0.0.1/`+strconv.Itoa(port)+` && echo connected`)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || strings.Contains(stdout, "connected") || accepted.Load() != 0 {
			t.Fatalf("connected to the host from inside: exit %d stdout %q stderr %q", res.ExitCode, stdout, stderr)
		}
		if ifaces := strings.Fields(stdout); !cmp.Equal(ifaces, []string{"lo"}) {
			t.Errorf("network interfaces inside: %v, want only lo", ifaces)
		}
	})

	t.Run("cancel kills the process", func(t *testing.T) {
		marker := "987654.321" + strconv.Itoa(os.Getpid())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, _, _, err := runIn(t, ctx, r, ref, t.TempDir(), nil, "sleep", marker)
			errc <- err
		}()
		deadline := time.Now().Add(60 * time.Second)
		for !hostProcessWith(marker) {
			if time.Now().After(deadline) {
				t.Fatal("the sleep never started")
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancelled := time.Now()
		cancel()
		select {
		case err := <-errc:
			t.Logf("Run returned %v after cancel", time.Since(cancelled).Round(time.Millisecond))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
		if hostProcessWith(marker) {
			t.Error("the process survived the cancel")
		}
		if afterCancel != nil {
			afterCancel(t)
		}
	})

	t.Run("gpu without a gpu", func(t *testing.T) {
		if HostHasGPU() {
			t.Skip("this machine has a GPU")
		}
		_, err := r.Run(t.Context(), &Command{Args: []string{"true"}, Dir: t.TempDir(), Image: ref, GPU: true})
		if !errors.Is(err, ErrNoGPU) {
			t.Fatalf("got %v, want ErrNoGPU", err)
		}
	})
}

func TestDockerCUDA(t *testing.T) {
	testenv.RequireDocker(t)
	ref := cudaImage(t)
	t.Cleanup(func() { exec.Command("docker", "rmi", "--force", ref.String()).Run() })

	prefix := "gpuattest-test-" + randomHex(4) + "-"
	d, err := NewDocker(WithDockerNamePrefix(prefix), WithDockerLogger(slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := d.ensureImage(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	t.Logf("docker pull of %s took %v", ref, time.Since(start).Round(time.Millisecond))

	t.Run("refuses a tag", func(t *testing.T) {
		tag, err := image.ParseSource(ref.Source.Ref.Context().String() + ":" + cudaimage.Tag)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Run(t.Context(), &Command{Args: []string{"true"}, Dir: t.TempDir(), Image: image.Pinned{Source: tag}})
		if err == nil || !strings.Contains(err.Error(), "not pinned by digest") {
			t.Fatalf("got %v, want a not-pinned error", err)
		}
	})

	checkRunnerBehaviour(t, d, ref, func(t *testing.T) {
		out, err := exec.Command("docker", "ps", "--all", "--quiet", "--filter", "name="+prefix).Output()
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("containers left after cancel: %s", s)
		}
	})

	t.Run("bind mounts reach the engine", func(t *testing.T) {
		if !d.bindMountsWork(t.Context(), ref.String()) {
			t.Error("the probe says bind mounts do not work on a local engine")
		}
	})

	t.Run("copy fallback", func(t *testing.T) {
		dc, err := NewDocker(WithDockerCopy(), WithDockerNamePrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		src := filepath.Join(dir, "kernel.cu")
		os.WriteFile(src, []byte(cudaimage.KernelSource), 0o644)
		out := filepath.Join(dir, "build", "kernel.fatbin")
		args := append([]string{"bash", "-c", `mkdir -p build && exec "$@"`, "sh"}, cudaimage.NvccArgs(src, out, true)...)
		res, _, stderr, err := runIn(t, t.Context(), dc, ref, dir, nil, args...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v %+v\n%s", err, res, stderr)
		}
		if !slicesContains(res.Notes, "copied") {
			t.Errorf("notes %q do not say the work dir was copied", res.Notes)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, cudaimage.HostFatbin(t)) {
			t.Error("fatbin built in copy mode differs from the host build")
		}
	})
}

// labelled returns img with one more config label: the same file system
// under an image ID no engine has yet.
func labelled(t *testing.T, img v1.Image, value string) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := *cf.Config.DeepCopy()
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels["dev.gpuattest.test"] = value
	out, err := mutate.Config(img, c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dockerOut runs the docker CLI and returns its trimmed output.
func dockerOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestDockerFileSources is the air-gapped release path: the CUDA test
// image carried as an oci-layout: directory and as a docker-archive: tar
// (tagged, as docker save writes it), locked, and run by the docker runner
// with no registry. The runner loads each into the engine untagged, runs
// it by its image ID (the pinned config digest), and nvcc builds the same
// fatbin as the host. Each image gets a label of this test's own, so that
// its ID is new to the engine and the load itself is exercised; its file
// system is the CUDA test image's.
func TestDockerFileSources(t *testing.T) {
	testenv.RequireDocker(t)
	testenv.RequireTool(t, "nvcc")
	_, cuda := cudaimage.Ensure(t)
	dir := t.TempDir()
	run := randomHex(6)

	layoutImg := labelled(t, cuda, "layout-"+run)
	layoutDir := filepath.Join(dir, "cuda-oci")
	if _, err := layout.Write(layoutDir, mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: layoutImg})); err != nil {
		t.Fatal(err)
	}
	archiveImg := labelled(t, cuda, "archive-"+run)
	archive := filepath.Join(dir, "cuda.tar")
	victim := "gpuattest.test/victim:" + run
	vtag, err := name.NewTag(victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(archive, vtag, archiveImg); err != nil {
		t.Fatal(err)
	}

	for _, img := range []v1.Image{layoutImg, archiveImg} {
		cfg, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if out, err := dockerOut(t, "rmi", cfg.String()); err != nil {
				t.Logf("removing %s: %v: %s", cfg, err, out)
			}
		})
	}

	for _, tc := range []struct {
		src string
		img v1.Image
	}{{"oci-layout:" + layoutDir, layoutImg}, {"docker-archive:" + archive, archiveImg}} {
		kind, _, _ := strings.Cut(tc.src, ":")
		t.Run(kind, func(t *testing.T) {
			cfg, err := tc.img.ConfigName()
			if err != nil {
				t.Fatal(err)
			}
			id := cfg.String()
			// gpuattest lock, then the pinned image as a Pinner hands it over.
			res, err := image.Resolve(t.Context(), tc.src)
			if err != nil {
				t.Fatal(err)
			}
			e := image.EntryFor("cuda", res)
			pinned, err := e.Pinned()
			if err != nil {
				t.Fatal(err)
			}
			if pinned.ConfigDigest != id {
				t.Fatalf("locked config digest %s, want %s", pinned.ConfigDigest, id)
			}
			prefix := "gpuattest-test-" + randomHex(4) + "-"
			d, err := NewDocker(WithDockerNamePrefix(prefix), WithDockerLogger(slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			if err != nil {
				t.Fatal(err)
			}
			if d.hasImageID(t.Context(), id) {
				t.Fatalf("the engine has %s before the test loaded it", id)
			}
			start := time.Now()
			ref, err := d.ensureImage(t.Context(), pinned)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("docker load of %s (%s) took %v", tc.src, id, time.Since(start).Round(time.Millisecond))
			if ref != id {
				t.Errorf("the runner runs %s, want the image ID %s", ref, id)
			}
			if tags, err := dockerOut(t, "image", "inspect", "--format", "{{json .RepoTags}}", id); err != nil || tags != "[]" {
				t.Errorf("the loaded image has tags %s (%v), want none", tags, err)
			}
			if out, err := dockerOut(t, "image", "inspect", victim); err == nil {
				t.Errorf("the archive's own tag %s was applied: %s", victim, out)
			}

			checkBuildEqualsHost(t, d, pinned)

			// Another runner (another run) finds the image by its ID and
			// does not read the file again.
			d2, err := NewDocker(WithDockerNamePrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			gone := pinned
			gone.Source, err = image.ParseSource(kind + ":" + filepath.Join(dir, "moved-away") + "@" + pinned.ManifestDigest())
			if err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			if ref, err := d2.ensureImage(t.Context(), gone); err != nil || ref != id {
				t.Errorf("second run: %s, %v; want %s without reading the file", ref, err, id)
			}
			t.Logf("second run found the loaded image in %v", time.Since(start).Round(time.Millisecond))
		})
	}

	t.Run("full runner behaviour from an oci-layout", func(t *testing.T) {
		res, err := image.Resolve(t.Context(), "oci-layout:"+layoutDir)
		if err != nil {
			t.Fatal(err)
		}
		prefix := "gpuattest-test-" + randomHex(4) + "-"
		d, err := NewDocker(WithDockerNamePrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		checkRunnerBehaviour(t, d, res.Pinned(), func(t *testing.T) {
			if out, _ := dockerOut(t, "ps", "--all", "--quiet", "--filter", "name="+prefix); out != "" {
				t.Errorf("containers left after cancel: %s", out)
			}
		})
	})

	t.Run("a file that is not the locked image is refused", func(t *testing.T) {
		res, err := image.Resolve(t.Context(), "oci-layout:"+layoutDir)
		if err != nil {
			t.Fatal(err)
		}
		p := res.Pinned()
		p.ConfigDigest = "sha256:" + strings.Repeat("0", 64)
		d, err := NewDocker()
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Run(t.Context(), &Command{Args: []string{"true"}, Dir: t.TempDir(), Image: p})
		if err == nil || !strings.Contains(err.Error(), "not the pinned") {
			t.Fatalf("got %v, want the config digest mismatch", err)
		}
	})
}

// tlog writes log lines to t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func slicesContains(notes []string, sub string) bool {
	for _, n := range notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

// ExampleDocker builds a CUDA file in a digest-pinned image with the
// docker runner. (Not run: it needs a docker engine and the image.)
func ExampleDocker() {
	d, err := NewDocker()
	if err != nil {
		panic(err)
	}
	// Normally an image.Pinner pins the pipeline's image from the lock.
	img, err := image.ParsePinned("registry.example.com/cuda-build@sha256:" + strings.Repeat("0", 64))
	if err != nil {
		panic(err)
	}
	res, err := d.Run(context.Background(), &Command{
		Args:  []string{"nvcc", "-fatbin", "-gencode", "arch=compute_90,code=sm_90", "-o", "k.fatbin", "k.cu"},
		Dir:   "/home/me/project",
		Image: img,
		Env:   []string{"PATH=/usr/bin:/bin"},
	})
	if err != nil {
		panic(err)
	}
	_ = res.ExitCode // the process's exit status; res.Notes says if the work dir was copied
}
