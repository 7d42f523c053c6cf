package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
)

// checkFleetPull pulls the fleet release pushed to ref (run's, signed by
// rel.key): --out holds the released files, --to an OCI layout that
// verify and fleet verify check offline; a failed verification, or a
// layout with a node bundle removed or a released file changed, writes
// nothing and exits with verify's code.
func checkFleetPull(t *testing.T, dir, ref string) {
	t.Helper()
	files, copied := filepath.Join(dir, "pulled-files"), filepath.Join(dir, "pulled-layout")
	code, out := fleetCLI(t, dir, "pull", ref, "--out", files, "--to", "oci-layout:"+copied, "--key", "rel.pub", "--allow-simulated", "-o", "json")
	var got struct {
		dispatch.Report
		Files     []oci.File `json:"files"`
		FilesDir  string     `json:"files_dir"`
		LayoutDir string     `json:"layout_dir"`
		ExitCode  int        `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got.ExitCode != 0 || !got.Verified || len(got.Jobs) != 2 ||
		len(got.Files) != 2 || got.FilesDir != files || got.LayoutDir != copied {
		t.Fatalf("pull --out --to of a fleet release: exit %d, %v\n%s", code, err, out)
	}
	sameTree(t, filepath.Join(dir, "run", "release"), files)
	for _, args := range [][]string{{"verify"}, {"fleet", "verify"}} {
		code, out = fleetCLI(t, dir, append(args, "oci-layout:"+copied, "--key", "rel.pub", "--allow-simulated")...)
		if code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") || !strings.Contains(out, "a100-0") || !strings.Contains(out, "h100-0") {
			t.Errorf("%s of the layout pull wrote: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	// Text output says what was written.
	code, out = fleetCLI(t, dir, "pull", ref, "--out", filepath.Join(dir, "pulled-text"), "--key", "rel.pub", "--allow-simulated")
	if code != 0 || !strings.Contains(out, "Wrote 2 file(s), each a subject of the dispatch, to ") || strings.Contains(out, "against these criteria") {
		t.Errorf("pull --out (text): exit %d\n%s", code, out)
	}
	// Simulated GPUs refused: verify's exit, nothing written.
	wantNothing(t, dir, ref, exitPolicy, "the GPUs were simulated", "--key", "rel.pub")
	wantNothing(t, dir, ref, exitUsage, "replace the policy", "--key", "rel.pub", "--allow-simulated", "--policy", "builtin:cpu-tier")
	// A node bundle removed from the layout.
	removed := copyTree(t, copied, filepath.Join(dir, "tampered-bundle"))
	dropNodeBundle(t, removed)
	wantNothing(t, dir, "oci-layout:"+removed, exitPolicy, "missing", "--key", "rel.pub", "--allow-simulated")
	// A released file changed in the layout.
	changed := copyTree(t, copied, filepath.Join(dir, "tampered-file"))
	h, err := v1.NewHash("sha256:" + got.Files[0].SHA256)
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(changed, "blobs", "sha256", h.Hex)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	_ = os.Chmod(blob, 0o644)
	write(t, blob, string(b))
	wantNothing(t, dir, "oci-layout:"+changed, -1, "", "--key", "rel.pub", "--allow-simulated")
}

// wantNothing pulls ref expecting exit code (verify REF's exit with the
// same flags, when code is -1) naming want, and that nothing was written.
func wantNothing(t *testing.T, dir, ref string, code int, want string, flags ...string) {
	t.Helper()
	if code == -1 {
		code, _ = fleetCLI(t, dir, append([]string{"verify", ref}, flags...)...)
		if code == 0 {
			t.Fatalf("verify %s passed; want it to fail", ref)
		}
	}
	files, copied := filepath.Join(dir, "nothing-files"), filepath.Join(dir, "nothing-layout")
	got, out := fleetCLI(t, dir, append([]string{"pull", ref, "--out", files, "--to", "oci-layout:" + copied}, flags...)...)
	t.Logf("pull %s %v: exit %d\n%s", ref, flags, got, out)
	if got != code || !strings.Contains(out, want) || (code != exitUsage && !strings.Contains(out, "Nothing was written.")) {
		t.Errorf("pull %s %v: exit %d, want %d naming %q and that nothing was written\n%s", ref, flags, got, code, want, out)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "nothing-") {
			t.Errorf("pull %s %v that failed left %s behind", ref, flags, e.Name())
		}
	}
}

// dropNodeBundle removes a node bundle referrer (one that is not the
// dispatch) from the layout's index.json.
func dropNodeBundle(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	for i, d := range idx.Manifests {
		if strings.HasPrefix(d.ArtifactType, "application/vnd.dev.sigstore.bundle") && d.Annotations[oci.AnnotationPredicateType] != dispatch.PredicateType {
			idx.Manifests = append(idx.Manifests[:i], idx.Manifests[i+1:]...)
			b, err = json.Marshal(idx)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "index.json"), string(b))
			return
		}
	}
	t.Fatalf("no node bundle in %s/index.json:\n%s", dir, b)
}

// copyTree copies the tree src to dst, writable, and returns dst.
func copyTree(t *testing.T, src, dst string) string {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// sameTree fails unless the regular files under a and b are the same.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	read := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			m[rel], err = os.ReadFile(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ma, mb := read(a), read(b)
	if len(ma) != len(mb) || len(ma) == 0 {
		t.Errorf("%s holds %d file(s), %s %d", a, len(ma), b, len(mb))
	}
	for name, data := range ma {
		if !bytes.Equal(data, mb[name]) {
			t.Errorf("%s: pulled %q, released %q", name, mb[name], data)
		}
	}
}
