package image

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const lockSchemaFile = "../../schemas/lock.schema.json"

func compileLockSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(lockSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("https://gpuattest.dev/schemas/lock.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("https://gpuattest.dev/schemas/lock.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sampleLock() *Lock {
	l := NewLock()
	l.Set(LockEntry{Name: "cuda", Reference: "nvidia/cuda:12.4.1-devel-ubuntu22.04",
		IndexDigest:    "sha256:" + strings.Repeat("1", 64),
		ManifestDigest: "sha256:" + strings.Repeat("2", 64),
		ConfigDigest:   "sha256:" + strings.Repeat("3", 64),
		Platform:       "linux/amd64", ResolvedAt: fixedNow})
	l.Set(LockEntry{Name: "base", Reference: "oci-layout:images/base",
		ManifestDigest: "sha256:" + strings.Repeat("4", 64),
		Platform:       "linux/amd64", ResolvedAt: fixedNow})
	return l
}

func TestLockWriteReadRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, LockFileName)
	l := sampleLock()
	if err := l.Write(p); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLock(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if names := []string{got.Images[0].Name, got.Images[1].Name}; names[0] != "base" || names[1] != "cuda" {
		t.Errorf("entries not sorted by name: %v", names)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries after an atomic write, want only the lock", len(ents))
	}
	// The written file validates against the checked-in schema.
	f, _ := os.Open(p)
	defer f.Close()
	v, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := compileLockSchema(t).Validate(v); err != nil {
		t.Errorf("written lock does not validate against %s: %v", lockSchemaFile, err)
	}
	raw, _ := os.ReadFile(p)
	for _, key := range []string{`"apiVersion": "gpuattest.dev/v1"`, `"kind": "Lock"`, `"index_digest"`, `"manifest_digest"`, `"resolved_at": "2026-11-22T12:00:00Z"`} {
		if !bytes.Contains(raw, []byte(key)) {
			t.Errorf("lock file lacks %s:\n%s", key, raw)
		}
	}
	if bytes.Contains(raw, []byte("pipeline_digest")) {
		t.Errorf("lock file must not carry the pipeline digest:\n%s", raw)
	}
	pinnedRef, err := got.Images[1].Pinned()
	if want := "index.docker.io/nvidia/cuda@sha256:" + strings.Repeat("2", 64); err != nil || pinnedRef.String() != want {
		t.Errorf("Pinned() = %q, %v; want %q", pinnedRef, err, want)
	}
}

func TestReadLockMissing(t *testing.T) {
	t.Parallel()
	_, err := ReadLock(filepath.Join(t.TempDir(), LockFileName))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadLock of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestParseLockErrors(t *testing.T) {
	t.Parallel()
	d := "sha256:" + strings.Repeat("a", 64)
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{name: "syntax", doc: "{\n  \"apiVersion\": \"gpuattest.dev/v1\",\n  \"kind\": \"Lock\"\n  \"images\": []\n}", want: []string{"gpuattest.lock:4:3: kind: unexpected character '\"': expected ',' or '}'"}},
		{name: "type", doc: "{\"apiVersion\": \"gpuattest.dev/v1\", \"kind\": \"Lock\",\n \"images\": {}}", want: []string{"gpuattest.lock:2:12: images: expected an array, got an object"}},
		{name: "trailing data", doc: "{\"apiVersion\": \"gpuattest.dev/v1\", \"kind\": \"Lock\", \"images\": []}\n\n  {}", want: []string{"gpuattest.lock:3:3: unexpected character '{' after the top-level value"}},
		{name: "unknown field", doc: `{"apiVersion": "gpuattest.dev/v1", "kind": "Lock", "images": [], "pipeline_digest": "x"}`, want: []string{`unknown field "pipeline_digest"`}},
		{name: "every field problem at once", doc: `{"apiVersion": "v2", "kind": "Pipeline", "images": [
			{"name": "a", "reference": "ubuntu:22.04", "manifest_digest": "sha256:abc", "platform": "linux/amd64", "resolved_at": "2026-01-01T00:00:00Z"},
			{"name": "a", "reference": "", "manifest_digest": "` + d + `", "index_digest": "md5:x", "platform": "", "resolved_at": "2026-01-01T00:00:00Z"},
			{"reference": "ubuntu", "manifest_digest": "` + d + `", "platform": "linux/amd64"}]}`,
			want: []string{
				`gpuattest.lock: apiVersion: "v2": expected "gpuattest.dev/v1"`,
				`gpuattest.lock: kind: "Pipeline": expected "Lock"`,
				`gpuattest.lock: images[0].manifest_digest: "sha256:abc": expected sha256:<64 hex digits>`,
				`gpuattest.lock: images[1].name: "a" already locked by images[0]`,
				`gpuattest.lock: images[1].reference: image source "": empty`,
				`gpuattest.lock: images[1].index_digest: "md5:x"`,
				`gpuattest.lock: images[1].platform: missing`,
				`gpuattest.lock:4:4: images[2].name: missing`,
				`gpuattest.lock:4:4: images[2].resolved_at: missing`,
				"hint: regenerate it with `gpuattest lock --update PIPELINE`",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseLock([]byte(tt.doc), LockFileName)
			if err == nil {
				t.Fatal("ParseLock succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
