package coordinate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
)

// TestLoadStateIsStrict: fleet.json is read strictly: an unknown field,
// a duplicate key, a value of the wrong type or a job without a name is
// refused, naming the field. (Its size bound, limits.RecordBytes, is
// 256 MiB: too much to write here.)
func TestLoadStateIsStrict(t *testing.T) {
	t.Parallel()
	good := `{"dispatch":"/s/d","dispatchDigest":"sha256:aa","cluster":{"engine":"slurm","name":"c"},"jobScript":"sha256:bb",` +
		`"submittedAt":"2026-01-01T00:00:00Z","jobs":[{"name":"a-0","class":"a","index":0,"id":"1","status":{"id":"1","state":"RUNNING"}}],"done":false}`
	write := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, coordinate.StateFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if st, err := coordinate.LoadState(write(good)); err != nil || len(st.Jobs) != 1 || st.Jobs[0].Name != "a-0" {
		t.Fatalf("a well-formed record: %+v, %v", st, err)
	}
	for name, c := range map[string]struct{ body, want string }{
		"unknown field": {strings.Replace(good, `"done":false`, `"done":false,"extra":1`, 1), "extra"},
		"duplicate key": {strings.Replace(good, `"done":false`, `"done":false,"done":true`, 1), "appears twice"},
		"wrong type":    {strings.Replace(good, `"done":false`, `"done":"no"`, 1), "done"},
		"nameless job":  {strings.Replace(good, `"name":"a-0"`, `"name":""`, 1), "jobs[0]"},
	} {
		if _, err := coordinate.LoadState(write(c.body)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", name, err, c.want)
		}
	}
}
