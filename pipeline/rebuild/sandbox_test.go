package rebuild

import (
	"slices"
	"testing"
)

// Sandboxed build steps get the toolchain's variables, never a token or
// a flag injected through the environment.
func TestSandboxEnv(t *testing.T) {
	t.Parallel()
	got := sandboxEnv([]string{"PATH=/usr/bin", "GITHUB_TOKEN=s3cret", "HOME=/root", "LC_ALL=C", "SSH_AUTH_SOCK=/tmp/a", "NVCC_APPEND_FLAGS=-DX", "CUDA_HOME=/usr/local/cuda", "AWS_SECRET_ACCESS_KEY=k"})
	want := []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "CUDA_HOME=/usr/local/cuda"}
	if !slices.Equal(got, want) {
		t.Fatalf("sandboxEnv = %q, want %q", got, want)
	}
}
