package pipeline

import "strings"

// signingSecrets are the environment variables that carry signing
// secrets: key passwords and OIDC identity tokens (Sigstore's, and the
// GitHub Actions variables that fetch one).
var (
	signingSecrets        = []string{"GPUATTEST_PASSWORD", "COSIGN_PASSWORD", "SIGSTORE_ID_TOKEN"}
	signingSecretPrefixes = []string{"ACTIONS_ID_TOKEN_REQUEST_"}
)

// SigningSecret reports whether the environment variable name carries a
// signing secret (GPUATTEST_PASSWORD, COSIGN_PASSWORD, SIGSTORE_ID_TOKEN,
// ACTIONS_ID_TOKEN_REQUEST_*). No step ever sees one: the engine drops
// them from every step's environment and lint refuses them in passEnv.
func SigningSecret(name string) bool {
	for _, s := range signingSecrets {
		if name == s {
			return true
		}
	}
	for _, p := range signingSecretPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
