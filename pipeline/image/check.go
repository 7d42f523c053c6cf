package image

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// ProblemsError joins problems into one error (nil when there are none).
func ProblemsError(ps []runtypes.LockProblem) error {
	if len(ps) == 0 {
		return nil
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// WithPipelineFile names the pipeline file in CheckLock's hints
// (`gpuattest lock FILE`).
func WithPipelineFile(path string) Option {
	return func(o *options) error {
		o.pipelineFile = path
		return nil
	}
}

// WithoutSourceCheckUnsafe makes CheckLock skip asking the sources whether
// they still serve the locked digests and whether tags moved: only the
// lock's agreement with the pipeline is checked. For offline linting, never
// for a release run.
func WithoutSourceCheckUnsafe() Option {
	return func(o *options) error {
		o.skipSources = true
		return nil
	}
}

// CheckLock is the release-mode gate (release: true, or run --locked). It
// returns every reason to refuse, sorted by image name; none means the
// pipeline may run with the lock's digests. It refuses:
//
//   - a floating reference (a tag, or a file path without @sha256) with no
//     lock entry, and, when a lock exists, any image it does not cover;
//   - a lock entry whose reference or platform differs from the pipeline's,
//     or that contradicts a digest the pipeline pins;
//   - a lock entry for an image the pipeline no longer has (a stale lock);
//   - a locked digest the source no longer serves;
//   - a tag (or file) that now points somewhere else than the lock says.
//
// lock is nil when the pipeline has no lock file. opts take Resolve's
// options (keychain, transport, platform, base directory) and
// WithPipelineFile.
func CheckLock(ctx context.Context, images map[string]string, lock *Lock, opts ...Option) []runtypes.LockProblem {
	o, err := applyOptions(opts)
	if err != nil {
		return []runtypes.LockProblem{{Image: "*", Message: err.Error()}}
	}
	c := struct {
		pipelineFile string
		skipSources  bool
	}{o.pipelineFile, o.skipSources}
	if c.pipelineFile == "" {
		c.pipelineFile = "FILE"
	}
	lockCmd := "run `gpuattest lock " + c.pipelineFile + "` and commit " + LockFileName
	updateCmd := "if the change is intended, run `gpuattest lock --update " + c.pipelineFile + "`, review the new digests and commit " + LockFileName
	var ps []runtypes.LockProblem
	add := func(name, ref, hint, format string, args ...any) {
		ps = append(ps, runtypes.LockProblem{Image: name, Reference: ref, Message: fmt.Sprintf(format, args...), Hint: hint})
	}
	for _, name := range sortedKeys(images) {
		ref := images[name]
		src, err := ParseSource(ref)
		if err != nil {
			add(name, ref, "", "%v", err)
			continue
		}
		e, ok := lock.Entry(name)
		if !ok {
			switch {
			case lock == nil && src.Floating():
				add(name, ref, lockCmd, "%s is not pinned to a digest and there is no %s", floatingWhat(src), LockFileName)
			case lock != nil:
				add(name, ref, lockCmd, "%s has no entry for this image (the lock is stale)", LockFileName)
			default:
				// Pinned by digest with no lock: the source must still serve it.
				if !c.skipSources {
					if _, err := Resolve(ctx, ref, opts...); err != nil {
						add(name, ref, servedHint(err, updateCmd), "the pinned digest cannot be fetched: %v", err)
					}
				}
			}
			continue
		}
		if e.Reference != ref {
			add(name, ref, lockCmd, "%s records reference %q, but the pipeline says %q", LockFileName, e.Reference, ref)
			continue
		}
		if e.Platform != o.platform.String() {
			add(name, ref, "run `gpuattest lock --update "+c.pipelineFile+"`", "%s was resolved for %s, not %s", LockFileName, e.Platform, o.platform.String())
			continue
		}
		if src.Digest != "" && src.Digest != e.ManifestDigest && src.Digest != e.IndexDigest {
			add(name, ref, "run `gpuattest lock --update "+c.pipelineFile+"`", "the pipeline pins %s but %s records %s", src.Digest, LockFileName, lockedWhat(e))
			continue
		}
		if c.skipSources {
			continue
		}
		ps = append(ps, checkServed(ctx, name, src, e, opts, updateCmd)...)
	}
	if lock != nil {
		for _, e := range lock.Images {
			if _, ok := images[e.Name]; !ok {
				add(e.Name, "", lockCmd, "%s has an entry for %q (%s), which the pipeline does not define (the lock is stale)", LockFileName, e.Name, e.Reference)
			}
		}
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Image < ps[j].Image })
	return ps
}

// checkServed asks the source for the locked digest and, for a floating
// reference, where it points now.
func checkServed(ctx context.Context, name string, src Source, e LockEntry, opts []Option, updateCmd string) []runtypes.LockProblem {
	var ps []runtypes.LockProblem
	top := e.ManifestDigest
	if e.IndexDigest != "" {
		top = e.IndexDigest
	}
	byDigest := pinned(src, top)
	if src.Kind == DockerArchive {
		byDigest = pinned(src, e.ManifestDigest)
	}
	got, err := Resolve(ctx, byDigest, opts...)
	switch {
	case err != nil:
		ps = append(ps, runtypes.LockProblem{Image: name, Reference: src.Raw,
			Message: fmt.Sprintf("the locked digest %s is no longer served: %v", top, err),
			Hint:    servedHint(err, updateCmd)})
		return ps
	case got.ManifestDigest != e.ManifestDigest:
		ps = append(ps, runtypes.LockProblem{Image: name, Reference: src.Raw,
			Message: fmt.Sprintf("the locked index %s now resolves to manifest %s, not the locked %s", shortDigest(top), got.ManifestDigest, e.ManifestDigest),
			Hint:    updateCmd})
		return ps
	}
	if !src.Floating() || src.Kind == DockerArchive {
		return ps // a docker archive was checked by its image ID above
	}
	now, err := Resolve(ctx, src.Raw, opts...)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			// The tag is gone but the locked digest is served: runs use the
			// digest, so this is no reason to refuse.
			return ps
		}
		ps = append(ps, runtypes.LockProblem{Image: name, Reference: src.Raw,
			Message: fmt.Sprintf("cannot check where %s points now: %v", floatingWhat(src), err),
			Hint:    "check the network and registry credentials (docker login), then retry"})
		return ps
	}
	nowTop, lockedTop := now.ManifestDigest, e.ManifestDigest
	if e.IndexDigest != "" || now.IndexDigest != "" {
		nowTop, lockedTop = now.IndexDigest, e.IndexDigest
	}
	if nowTop != lockedTop || now.ManifestDigest != e.ManifestDigest {
		ps = append(ps, runtypes.LockProblem{Image: name, Reference: src.Raw,
			Message: fmt.Sprintf("%s moved after locking: it now points to %s, the lock says %s (locked %s)", floatingWhat(src), orManifest(now.IndexDigest, now.ManifestDigest), lockedWhat(e), e.ResolvedAt.Format("2006-01-02T15:04:05Z07:00")),
			Hint:    updateCmd})
	}
	return ps
}

func orManifest(index, manifest string) string {
	if index != "" {
		return "index " + index
	}
	return "manifest " + manifest
}

func lockedWhat(e LockEntry) string { return orManifest(e.IndexDigest, e.ManifestDigest) }

func floatingWhat(s Source) string {
	switch s.Kind {
	case Registry:
		return fmt.Sprintf("tag %q", s.Tag)
	default:
		return fmt.Sprintf("%s path %q", s.Kind, s.Path)
	}
}

func servedHint(err error, updateCmd string) string {
	if errors.Is(err, ErrNotFound) {
		return "the image was deleted from its source or replaced; " + updateCmd
	}
	return "check the network and registry credentials (docker login), then retry"
}
