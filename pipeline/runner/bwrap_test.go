package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/image"
)

func TestBwrapArgs(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "etc", "var/cache/apt", "var/lib", "tmp", "proc", "dev"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("usr/bin", filepath.Join(root, "bin"))
	os.WriteFile(filepath.Join(root, "etc-file"), nil, 0o644)

	im := &bwrapImage{rootfs: root, env: []string{"PATH=/usr/bin:/bin", "LANG=C"}}
	c := &Command{
		Args:     []string{"nvcc", "--version"},
		Dir:      "/var/cache/work",
		Env:      []string{"LANG=C.UTF-8", "X=1"},
		ReadOnly: []string{"/tmp/inputs"},
	}
	got, env, err := bwrapArgs(im, c, &gpuBinds{
		devices: []string{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidiactl"},
		libs:    map[string]string{"libcuda.so.1": "/usr/lib/x86_64-linux-gnu/libcuda.so.535.1"},
		sys:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := func(p string) string { return filepath.Join(root, p) }
	want := []string{
		"--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--args", "4", "--json-status-fd", "3",
		"--symlink", "usr/bin", "/bin",
		"--ro-bind", r("etc"), "/etc",
		"--ro-bind", r("etc-file"), "/etc-file",
		"--perms", "0755", "--dir", "/usr",
		"--ro-bind", r("usr/bin"), "/usr/bin",
		"--perms", "0755", "--dir", "/var",
		"--perms", "0755", "--dir", "/var/cache",
		"--ro-bind", r("var/cache/apt"), "/var/cache/apt",
		"--ro-bind", r("var/lib"), "/var/lib",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--dev-bind", "/dev/nvidia-uvm", "/dev/nvidia-uvm",
		"--dev-bind", "/dev/nvidia-uvm-tools", "/dev/nvidia-uvm-tools",
		"--dev-bind", "/dev/nvidia0", "/dev/nvidia0",
		"--dev-bind", "/dev/nvidiactl", "/dev/nvidiactl",
		"--ro-bind", "/sys", "/sys",
		"--ro-bind", "/usr/lib/x86_64-linux-gnu/libcuda.so.535.1", "/usr/local/nvidia/lib64/libcuda.so.1",
		"--ro-bind", "/tmp/inputs", "/tmp/inputs",
		"--bind", "/var/cache/work", "/var/cache/work",
		"--remount-ro", "/", "--chdir", "/var/cache/work",
		"--", "nvcc", "--version",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bwrap args (-want +got):\n%s", diff)
	}
	// The environment goes to bwrap through --args 4, never on its
	// command line.
	wantEnv := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "X=1", "LD_LIBRARY_PATH=/usr/local/nvidia/lib64"}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if got, want := string(envArgs(env[:2])), "--setenv\x00PATH\x00/usr/bin:/bin\x00--setenv\x00LANG\x00C.UTF-8\x00"; got != want {
		t.Errorf("envArgs = %q, want %q", got, want)
	}
}

// TestGPUDeviceNodes: the GPU binds include the unified-memory nodes
// cuInit opens (nvidia-uvm, nvidia-uvm-tools), the MIG capability
// directory and WSL2's dxg, and nothing else from /dev.
func TestGPUDeviceNodes(t *testing.T) {
	dev := t.TempDir()
	for _, n := range []string{"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "dxg", "null", "fuse"} {
		if err := os.WriteFile(filepath.Join(dev, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dev, "nvidia-caps"), 0o755); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range gpuDeviceNodes(dev) {
		got = append(got, filepath.Base(p))
	}
	want := []string{"dxg", "nvidia-caps", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1", "nvidiactl"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

func TestBwrapRefusesFloating(t *testing.T) {
	b, err := NewBwrap(WithBwrapCacheDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"127.0.0.1:1/cuda-build:11.8", "oci-layout:/nonexistent"} {
		src, err := image.ParseSource(ref)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Run(t.Context(), &Command{Args: []string{"true"}, Dir: t.TempDir(), Image: image.Pinned{Source: src}})
		if err == nil || !strings.Contains(err.Error(), "not pinned by digest") || !strings.Contains(err.Error(), "hint:") {
			t.Errorf("%s: got %v, want a not-pinned error with a hint", ref, err)
		}
	}
}

func TestBwrapCUDA(t *testing.T) {
	testenv.RequireTool(t, "bwrap")
	ref := cudaImage(t)
	b, err := NewBwrap(WithBwrapCacheDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rootfs, err := b.Prepare(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pull + extract of %s into %s took %v", ref, rootfs, time.Since(start).Round(time.Millisecond))

	checkRunnerBehaviour(t, b, ref, nil)

	t.Run("image is read-only", func(t *testing.T) {
		res, _, stderr, err := runIn(t, t.Context(), b, ref, t.TempDir(), nil, "bash", "-c", "touch /usr/bin/x || touch /x")
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 {
			t.Fatal("wrote into the image")
		}
		if _, err := os.Stat(filepath.Join(rootfs, "usr/bin/x")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the cached rootfs was modified (stderr %q)", stderr)
		}
	})

	t.Run("work dir outside the image's tree", func(t *testing.T) {
		// /var/cache/... exists in the image; a work dir under it needs the
		// skeleton expansion to get a mount point.
		base := filepath.Join("/var/cache", "gpuattest-bwrap-test-"+randomHex(4))
		if err := os.MkdirAll(base, 0o755); err != nil {
			t.Skip(err)
		}
		defer os.RemoveAll(base)
		res, stdout, stderr, err := runIn(t, t.Context(), b, ref, base, nil, "bash", "-c", "pwd > where && ls /var/cache/apt >/dev/null && cat where")
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v %+v %s", err, res, stderr)
		}
		if strings.TrimSpace(stdout) != base {
			t.Errorf("pwd inside %q, want %q", stdout, base)
		}
	})
}

// ExampleBwrap runs a command under bubblewrap in an image pulled by
// digest and extracted into the cache. (Not run: it needs bwrap and the
// image.)
func ExampleBwrap() {
	b, err := NewBwrap() // cache: $XDG_CACHE_HOME/gpuattest/rootfs/
	if err != nil {
		panic(err)
	}
	img, err := image.ParsePinned("oci-layout:/srv/images/cuda-build@sha256:" + strings.Repeat("0", 64))
	if err != nil {
		panic(err)
	}
	res, err := b.Run(context.Background(), &Command{
		Args:  []string{"nvcc", "--version"},
		Dir:   "/home/me/project",
		Image: img,
	})
	if err != nil {
		panic(err)
	}
	_ = res.ExitCode
}
