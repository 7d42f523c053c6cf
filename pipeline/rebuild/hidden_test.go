package rebuild

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// A checkout at the recorded commit whose edit is hidden from git status
// (skip-worktree, assume-unchanged) is refused, naming the file.
func TestCheckSourceHiddenEdit(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	for _, flag := range []string{"--skip-worktree", "--assume-unchanged"} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			git := func(args ...string) string {
				cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false"}, args...)...)
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			git("init", "-q")
			if err := os.WriteFile(filepath.Join(dir, "k.cu"), []byte("x += 1;\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			git("add", "-A")
			git("commit", "-q", "-m", "c")
			git("update-index", flag, "k.cu")
			if err := os.WriteFile(filepath.Join(dir, "k.cu"), []byte("x -= 1;\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			prov := &attest.Provenance{BuildDefinition: attest.BuildDefinition{ExternalParameters: attest.ExternalParameters{Source: &attest.Source{Commit: git("rev-parse", "HEAD")}}}}
			if _, err := CheckSource(t.Context(), prov, dir); !errors.Is(err, ErrSourceMismatch) || !strings.Contains(err.Error(), "k.cu") {
				t.Fatalf("a hidden edit: %v, want ErrSourceMismatch naming k.cu", err)
			}
		})
	}
}
