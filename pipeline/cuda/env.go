package cuda

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// clearedVars are nvcc environment variables that would add flags behind
// the pipeline's back.
var clearedVars = []string{"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"}

// nvccEnv returns the environment nvcc runs with for step s (its own with
// clearedVars emptied) and what those variables held, in the step's
// environment or in its image's. An image's variables are read once per
// image and environment in a run: the cache key's facts and the build
// itself ask for them, and each read starts a container.
func (b *Build) nvccEnv(ctx context.Context, s *step.Context) ([]string, map[string]string, error) {
	env, cleared := clearEnv(s.Env)
	if s.Image.IsZero() {
		return env, cleared, nil
	}
	// The image's own ENV counts too: record it (the explicit empty
	// values in env override it).
	fromImage, err := b.imageEnv(ctx, s)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the image's nvcc environment: %w", err)
	}
	for k, v := range fromImage {
		if _, set := cleared[k]; !set {
			if cleared == nil {
				cleared = map[string]string{}
			}
			cleared[k] = v
		}
	}
	return env, cleared, nil
}

// imageEnv is imageNVCCEnv for s, read once per image and environment.
func (b *Build) imageEnv(ctx context.Context, s *step.Context) (map[string]string, error) {
	key := fmt.Sprintf("%T\x00%s\x00%s", s.Runner, s.Image.ManifestDigest(), strings.Join(s.Env, "\x00"))
	b.mu.Lock()
	defer b.mu.Unlock()
	if m, ok := b.imageEnvs[key]; ok {
		return m, nil
	}
	m, err := imageNVCCEnv(ctx, s.Runner, s.Image, s.WorkDir, s.Env)
	if err != nil {
		return nil, err
	}
	if b.imageEnvs == nil {
		b.imageEnvs = map[string]map[string]string{}
	}
	b.imageEnvs[key] = m
	return m, nil
}

// clearEnv removes the variables in clearedVars from env, then sets each
// to the empty string (so an image's own ENV cannot inject flags either),
// and returns what env held.
func clearEnv(env []string) ([]string, map[string]string) {
	var out []string
	var cleared map[string]string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(clearedVars, k) {
			if cleared == nil {
				cleared = map[string]string{}
			}
			cleared[k] = v
			continue
		}
		out = append(out, kv)
	}
	for _, k := range clearedVars {
		out = append(out, k+"=")
	}
	return out, cleared
}

// imageNVCCEnv reads the clearedVars an image's own environment sets, by
// running sh in it with env minus those variables.
func imageNVCCEnv(ctx context.Context, r runner.Runner, img image.Pinned, dir string, env []string) (map[string]string, error) {
	var base []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(clearedVars, k) {
			base = append(base, kv)
		}
	}
	script := ""
	for _, k := range clearedVars {
		script += fmt.Sprintf(`if [ -n "${%[1]s+set}" ]; then printf '%%s=%%s\0' %[1]s "$%[1]s"; fi; `, k)
	}
	var out, errb bytes.Buffer
	res, err := r.Run(ctx, &runner.Command{Args: []string{"sh", "-c", script}, Dir: dir, Env: base, Stdout: &out, Stderr: &errb, Image: img})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("sh exited %d: %s", res.ExitCode, strings.TrimSpace(errb.String()))
	}
	m := map[string]string{}
	for _, kv := range strings.Split(out.String(), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m, nil
}
