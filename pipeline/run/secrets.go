package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
)

// CheckSigningFiles refuses signing material (a key file, an identity
// token file) inside the pipeline's root: every step can read the root,
// sandboxed steps included, so a key there is a key any build step can
// take. Paths are checked as given and with symlinks resolved. Call it
// before unlocking the key. The error wraps ErrInvalid.
func CheckSigningFiles(p *pipeline.Pipeline, files map[string]string) error {
	for flag, file := range files {
		if file == "" || p.Root == "" {
			continue
		}
		if inside(p.Root, file) {
			return fmt.Errorf("%w: %s %s is inside the pipeline's root %s: every step could read it\nhint: keep the key outside the pipeline's root (its workdir), e.g. in ~/.config/gpuattest/, and pass that path", ErrInvalid, flag, file, p.Root)
		}
	}
	return nil
}

// inside reports whether file is in dir, by their absolute names or with
// symlinks resolved.
func inside(dir, file string) bool {
	in := func(d, p string) bool {
		rel, err := filepath.Rel(d, p)
		return err == nil && (rel == "." || filepath.IsLocal(rel))
	}
	ad, err1 := filepath.Abs(dir)
	af, err2 := filepath.Abs(file)
	if err1 == nil && err2 == nil && in(ad, af) {
		return true
	}
	rd, err1 := filepath.EvalSymlinks(dir)
	rf, err2 := filepath.EvalSymlinks(file)
	return err1 == nil && err2 == nil && in(rd, rf)
}

// DropSigningSecrets removes the signing secrets (key passwords, OIDC
// tokens; pipeline.SigningSecret) from this process's environment, so that
// nothing started later inherits them, and overwrites their values in the
// process's initial environment block, which a step could otherwise read
// from /proc/$PPID/environ (found by bench/adversarial). Call it once the
// signer holds what it needs; the engine also keeps them out of every
// step's environment. The error says the block could not be scrubbed;
// the variables are unset all the same.
func DropSigningSecrets() error {
	for _, kv := range os.Environ() {
		if k, _, ok := strings.Cut(kv, "="); ok && pipeline.SigningSecret(k) {
			os.Unsetenv(k)
		}
	}
	return scrubEnviron()
}

// withoutPath returns env without the variables whose value names file
// (as given, absolute or resolved).
func withoutPath(env []string, file string) []string {
	names := []string{file}
	if a, err := filepath.Abs(file); err == nil {
		names = append(names, a)
	}
	if r, err := filepath.EvalSymlinks(file); err == nil {
		names = append(names, r)
	}
	out := env[:0:0]
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			if n != "" && strings.Contains(v, n) {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// hostStepsWarning is the warning for a signed release pipeline with
// steps on the host runner, which is no security boundary: such a step (a
// build step above all) can read anything the user can, the key file
// included. Empty when there is nothing to warn about.
func hostStepsWarning(p *pipeline.Pipeline) string {
	if !p.Release {
		return ""
	}
	var ids []string
	for _, s := range p.Steps {
		if s.Runner == "host" {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return fmt.Sprintf("release pipeline %s is signed but runs steps on the host runner (%s): the host runner is not a security boundary, so those steps can read anything you can, the signing key file included\n    hint: give build steps runner: bwrap or runner: docker (and an image): a sandboxed step sees only the pipeline's root", p.Name, strings.Join(ids, ", "))
}
