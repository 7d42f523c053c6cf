package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

func deleteManifest(t *testing.T, ref string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(r, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("deleting %s: %v", ref, err)
	}
}

// lockScenario locks a single-image tag and a multi-platform tag, then
// checks CheckLock's verdicts as the registry changes under the lock.
func lockScenario(t *testing.T, host string) {
	idx, _ := multiIndex(t)
	pushIndex(t, host+"/cuda:12", idx)
	push(t, host+"/tools:1", platformImage(t, "linux", "amd64"))
	pinnedImg := platformImage(t, "linux", "amd64")
	pinnedDigest := push(t, host+"/pinned:x", pinnedImg)

	images := map[string]string{
		"cuda":   host + "/cuda:12",
		"tools":  host + "/tools:1",
		"pinned": host + "/pinned@" + pinnedDigest.String(),
	}
	lock, changes, err := LockImages(t.Context(), images, nil, false, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, c := range changes {
		actions = append(actions, c.Name+":"+c.Action)
	}
	if diff := cmp.Diff([]string{"cuda:added", "pinned:added", "tools:added"}, actions); diff != "" {
		t.Errorf("LockImages actions (-want +got):\n%s", diff)
	}
	if e, _ := lock.Entry("cuda"); e.IndexDigest == "" || e.ManifestDigest == "" || e.Platform != "linux/amd64" {
		t.Errorf("cuda entry lacks the index or manifest digest: %+v", e)
	}
	if ps := CheckLock(t.Context(), images, lock); len(ps) != 0 {
		t.Fatalf("fresh lock: CheckLock = %v, want no problems", ps)
	}

	// Without a lock, floating tags are refused, the pinned digest is fine.
	ps := CheckLock(t.Context(), images, nil, WithPipelineFile("release.yaml"))
	wantMsgs(t, ps, []string{
		`image cuda (` + host + `/cuda:12): tag "12" is not pinned to a digest and there is no gpuattest.lock` + "\nhint: run `gpuattest lock release.yaml` and commit gpuattest.lock",
		`image tools (` + host + `/tools:1): tag "1" is not pinned to a digest and there is no gpuattest.lock`,
	})

	// The tag moves after locking: refused, though the old digest is served.
	push(t, host+"/tools:1", imageOf(t, layerOf(t, file("new", "v2"))))
	ps = CheckLock(t.Context(), images, lock, WithPipelineFile("release.yaml"))
	wantMsgs(t, ps, []string{
		`image tools (` + host + `/tools:1): tag "1" moved after locking: it now points to manifest sha256:`,
		"hint: if the change is intended, run `gpuattest lock --update release.yaml`, review the new digests and commit gpuattest.lock",
	})
	// lock without --update keeps the old entry; --update takes the move.
	kept, changes, err := LockImages(t.Context(), images, lock, false, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := kept.Entry("tools"); e != mustEntry(t, lock, "tools") || changes[2].Action != "kept" {
		t.Errorf("lock without --update changed tools: %+v, %+v", e, changes[2])
	}
	updated, changes, err := LockImages(t.Context(), images, lock, true, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{changes[0].Action, changes[1].Action, changes[2].Action}; !cmp.Equal(got, []string{"unchanged", "unchanged", "updated"}) {
		t.Errorf("lock --update actions = %v", got)
	}
	if changes[2].Previous == nil || changes[2].Previous.ManifestDigest == changes[2].Entry.ManifestDigest {
		t.Errorf("updated entry does not record the previous digest: %+v", changes[2])
	}
	if ps := CheckLock(t.Context(), images, updated); len(ps) != 0 {
		t.Errorf("after lock --update: %v", ps)
	}

	// The locked manifest is deleted from the registry: no longer served.
	old := mustEntry(t, lock, "tools")
	deleteManifest(t, host+"/tools@"+old.ManifestDigest)
	ps = CheckLock(t.Context(), images, lock)
	wantMsgs(t, ps, []string{
		`image tools (` + host + `/tools:1): the locked digest ` + old.ManifestDigest + ` is no longer served`,
		"hint: the image was deleted from its source or replaced",
	})
}

func mustEntry(t *testing.T, l *Lock, name string) LockEntry {
	t.Helper()
	e, ok := l.Entry(name)
	if !ok {
		t.Fatalf("no lock entry %q", name)
	}
	return e
}

// wantMsgs checks that the problems, rendered, contain each wanted text in
// one problem per line of want that starts with "image " (one problem when
// none does).
func wantMsgs(t *testing.T, ps []runtypes.LockProblem, want []string) {
	t.Helper()
	all := ProblemsError(ps)
	if all == nil {
		t.Fatalf("no problems, want %q", want)
	}
	n := 0
	for _, w := range want {
		if strings.HasPrefix(w, "image ") {
			n++
		}
		if !strings.Contains(all.Error(), w) {
			t.Errorf("problems lack %q:\n%v", w, all)
		}
	}
	if n == 0 {
		n = 1
	}
	if len(ps) != n {
		t.Errorf("%d problems, want %d:\n%v", len(ps), n, all)
	}
}

func TestLockAndCheckInProcessRegistry(t *testing.T) {
	t.Parallel()
	lockScenario(t, newRegistry(t))
}

func TestLockAndCheckDockerRegistry(t *testing.T) {
	t.Parallel()
	lockScenario(t, registrytest.StartDocker(t).Host)
}

func TestCheckLockMismatches(t *testing.T) {
	t.Parallel()
	host := newRegistry(t)
	d := push(t, host+"/app:1", platformImage(t, "linux", "amd64"))
	images := map[string]string{"app": host + "/app:1"}
	lock, _, err := LockImages(t.Context(), images, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	e := mustEntry(t, lock, "app")
	other := "sha256:" + strings.Repeat("9", 64)
	withEntry := func(f func(*LockEntry)) *Lock {
		l := NewLock()
		c := e
		f(&c)
		l.Set(c)
		return l
	}
	tests := []struct {
		name   string
		images map[string]string
		lock   *Lock
		want   []string
	}{
		{name: "image missing from lock", images: map[string]string{"app": host + "/app:1", "extra": host + "/app@" + d.String()}, lock: lock,
			want: []string{`image extra (` + host + `/app@` + d.String() + `): gpuattest.lock has no entry for this image (the lock is stale)`}},
		{name: "entry for an image the pipeline dropped", images: map[string]string{}, lock: lock,
			want: []string{`image app: gpuattest.lock has an entry for "app" (` + host + `/app:1), which the pipeline does not define (the lock is stale)`}},
		{name: "reference changed", images: map[string]string{"app": host + "/app:2"}, lock: lock,
			want: []string{`gpuattest.lock records reference "` + host + `/app:1", but the pipeline says "` + host + `/app:2"`}},
		{name: "platform differs", images: images, lock: withEntry(func(c *LockEntry) { c.Platform = "linux/arm64" }),
			want: []string{`image app (` + host + `/app:1): gpuattest.lock was resolved for linux/arm64, not linux/amd64`}},
		{name: "pipeline pins another digest", images: map[string]string{"app": host + "/app:1@" + other}, lock: withEntry(func(c *LockEntry) { c.Reference = host + "/app:1@" + other }),
			want: []string{`the pipeline pins ` + other + ` but gpuattest.lock records manifest ` + d.String()}},
		{name: "locked digest never served", images: images, lock: withEntry(func(c *LockEntry) { c.ManifestDigest = other }),
			want: []string{`the locked digest ` + other + ` is no longer served`}},
		{name: "unparsable reference", images: map[string]string{"app": "Bad Ref"}, lock: nil,
			want: []string{`image app (Bad Ref): image source "Bad Ref": not a valid registry reference`}},
		{name: "no lock, pinned digest gone", images: map[string]string{"app": host + "/app@" + other}, lock: nil,
			want: []string{`the pinned digest cannot be fetched`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantMsgs(t, CheckLock(t.Context(), tt.images, tt.lock), tt.want)
		})
	}
	// Offline linting checks only the agreement between lock and pipeline.
	if ps := CheckLock(t.Context(), images, withEntry(func(c *LockEntry) { c.ManifestDigest = other }), WithoutSourceCheckUnsafe()); len(ps) != 0 {
		t.Errorf("WithoutSourceCheckUnsafe asked the source: %v", ps)
	}
}

func TestCheckLockFileSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := platformImage(t, "linux", "amd64")
	tag, _ := name.NewTag("example.com/cuda:dev")
	if err := tarball.WriteToFile(filepath.Join(dir, "img.tar"), tag, img); err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(filepath.Join(dir, "layout"), img); err != nil {
		t.Fatal(err)
	}
	images := map[string]string{"archive": "docker-archive:img.tar", "layout": "oci-layout:layout"}
	opts := []Option{WithBaseDir(dir)}
	lock, _, err := LockImages(t.Context(), images, nil, false, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if ps := CheckLock(t.Context(), images, lock, opts...); len(ps) != 0 {
		t.Fatalf("fresh lock: %v", ps)
	}
	// Both files are replaced by another image after locking.
	img2 := imageOf(t, layerOf(t, file("other", "2")))
	if err := tarball.WriteToFile(filepath.Join(dir, "img.tar"), tag, img2); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "layout")); err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(filepath.Join(dir, "layout"), img2); err != nil {
		t.Fatal(err)
	}
	wantMsgs(t, CheckLock(t.Context(), images, lock, opts...), []string{
		`image archive (docker-archive:img.tar): the locked digest ` + mustEntry(t, lock, "archive").ManifestDigest + ` is no longer served`,
		"the file changed since it was pinned",
		`image layout (oci-layout:layout): the locked digest ` + mustEntry(t, lock, "layout").ManifestDigest + ` is no longer served`,
	})
}

func writeLayout(dir string, img v1.Image) error {
	_, err := layout.Write(dir, mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img}))
	return err
}
