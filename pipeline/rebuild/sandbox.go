package rebuild

import (
	"slices"
	"strings"
)

// sandboxEnvKeep names the variables of this process's environment that
// sandboxed build steps get: what finds and runs the host's toolchain.
// The rest (tokens, credentials, agent sockets, NVCC_APPEND_FLAGS) stays
// out, so a hostile build can neither copy a secret into what it writes
// (rebuilt files and their differences are printed) nor be steered by
// this host's settings.
var sandboxEnvKeep = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"}

// sandboxEnv returns the entries of env that sandboxEnvKeep names, and
// the LC_* locale settings.
func sandboxEnv(env []string) []string {
	out := []string{}
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if ok && (slices.Contains(sandboxEnvKeep, k) || strings.HasPrefix(k, "LC_")) {
			out = append(out, kv)
		}
	}
	return out
}
