package image

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestPinner(t *testing.T) {
	t.Parallel()
	host := newRegistry(t)
	d1 := push(t, host+"/app:1", platformImage(t, "linux", "amd64"))
	images := map[string]string{"app": host + "/app:1"}
	lock, _, err := LockImages(t.Context(), images, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	d2 := push(t, host+"/app:1", imageOf(t, layerOf(t, file("v", "2"))))

	// Not locked, no lock: the tag is resolved now.
	p, err := NewPinner(t.Context(), images, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Pin(t.Context(), "app", images["app"]); err != nil || got.String() != host+"/app@"+d2.String() {
		t.Errorf("unlocked Pin = %q, %v; want the tag's current digest %s", got, err, d2)
	}
	// Not locked, with a lock: the lock's digest wins over the moved tag.
	p, err = NewPinner(t.Context(), images, lock)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Pin(t.Context(), "app", images["app"]); err != nil || got.String() != host+"/app@"+d1.String() {
		t.Errorf("Pin with a lock = %q, %v; want the locked digest %s", got, err, d1)
	}
	// Locked: the moved tag is refused before anything runs.
	_, err = NewPinner(t.Context(), images, lock, WithLocked(), WithPipelineFile("release.yaml"))
	if err == nil || !strings.Contains(err.Error(), `release mode refuses the pipeline's images:`) || !strings.Contains(err.Error(), `tag "1" moved after locking`) {
		t.Fatalf("locked NewPinner err = %v, want the moved tag refused", err)
	}
	// Locked with a fresh lock: pins from the lock.
	fresh, _, err := LockImages(t.Context(), images, lock, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err = NewPinner(t.Context(), images, fresh, WithLocked())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Pin(t.Context(), "app", images["app"]); err != nil || got.String() != host+"/app@"+d2.String() {
		t.Errorf("locked Pin = %q, %v; want %s", got, err, d2)
	}
	if _, err := p.Pin(t.Context(), "other", "ubuntu:22.04"); err == nil || !strings.Contains(err.Error(), "has no matching entry") {
		t.Errorf("locked Pin of an unlocked image: %v", err)
	}
}

func TestPinnerFileSourcesComeBackAbsolute(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	img := platformImage(t, "linux", "amd64")
	if err := writeLayout(filepath.Join(base, "layout"), img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	images := map[string]string{"base": "oci-layout:layout"}
	lock, _, err := LockImages(t.Context(), images, nil, false, WithBaseDir(base))
	if err != nil {
		t.Fatal(err)
	}
	want := "oci-layout:" + filepath.Join(base, "layout") + "@" + d.String()
	for _, l := range []*Lock{lock, nil} {
		opts := []Option{WithBaseDir(base)}
		if l != nil {
			opts = append(opts, WithLocked())
		}
		p, err := NewPinner(t.Context(), images, l, opts...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Pin(t.Context(), "base", images["base"])
		if err != nil || got.String() != want {
			t.Errorf("Pin (lock %v) = %q, %v; want %q", l != nil, got, err, want)
		}
		// The runner's Pull needs no base directory.
		if _, err := Resolve(t.Context(), got.String()); err != nil {
			t.Errorf("Resolve(%s): %v", got, err)
		}
	}
}

func TestLockImagesReresolvesAnotherPlatform(t *testing.T) {
	t.Parallel()
	host := newRegistry(t)
	idx, digests := multiIndex(t)
	pushIndex(t, host+"/multi:1", idx)
	images := map[string]string{"m": host + "/multi:1"}
	amd, _, err := LockImages(t.Context(), images, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	arm, changes, err := LockImages(t.Context(), images, amd, false, WithPlatform("linux/arm64"))
	if err != nil {
		t.Fatal(err)
	}
	e := mustEntry(t, arm, "m")
	if changes[0].Action != "updated" || e.Platform != "linux/arm64" || e.ManifestDigest != digests["linux/arm64/v8"].String() {
		t.Errorf("locking for linux/arm64 over a linux/amd64 lock: %s %+v", changes[0].Action, e)
	}
}
