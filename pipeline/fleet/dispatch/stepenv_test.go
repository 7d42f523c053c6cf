package dispatch

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestStepEnv: the steps' environment names neither the keys' directory
// nor the job's, and HOME moves into the job's directory when the keys
// lie under it (a shared home directory).
func TestStepEnv(t *testing.T) {
	root := t.TempDir()
	keys := filepath.Join(root, "shared", "d1", KeysDir)
	jdir := filepath.Join(root, "shared", "d1", "jobs", "a100-0")
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{name: "home elsewhere", env: []string{"HOME=/home/other", "PATH=/usr/bin"}, want: []string{"HOME=/home/other", "PATH=/usr/bin"}},
		{name: "shared home", env: []string{"HOME=" + root, "PATH=/usr/bin"}, want: []string{"HOME=" + filepath.Join(jdir, "home"), "PATH=/usr/bin"}},
		{name: "variables naming the keys or the job", env: []string{"KEYS=" + keys + "/a100-0.key", "JOB=" + jdir, "X=1"}, want: []string{"X=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stepEnv(tt.env, keys, jdir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("stepEnv = %q, want %q", got, tt.want)
			}
		})
	}
}
