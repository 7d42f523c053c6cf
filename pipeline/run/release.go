package run

import (
	"context"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"os"
	"path"
	"runtime"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"golang.org/x/sync/errgroup"
)

// releaseOf is the OCI release (attest/oci) of the run's artifacts, made
// from the copies the run directory keeps, each hashed again and checked
// against its recorded digest. A run whose artifacts are not all copied
// (a step that failed after building them) has none: ok is false.
func releaseOf(ctx context.Context, rd *rundir.Run, arts []attest.FileDigest) (rel *oci.Release, ok bool, err error) {
	files, missing, err := releaseFiles(ctx, rd, arts, true)
	if err != nil || missing != "" {
		return nil, false, err
	}
	rel, err = oci.NewRelease(files)
	return rel, err == nil, err
}

// manifestSubject is the subject that names rel's manifest.
func manifestSubject(rel *oci.Release) attest.FileDigest {
	return attest.FileDigest{Path: oci.ManifestSubjectName, SHA256: strings.TrimPrefix(rel.Digest(), "sha256:"), Kind: "oci-manifest"}
}

// releaseFiles finds the run-directory copy of every artifact: the
// outputs/ copy of the step that reported it (a.Step, or any step when
// empty) with the same digest, whose path the subject name ends with.
// With rehash it hashes each copy again (a changed copy is an error);
// without, it only takes their sizes (Push: the upload hashes them). It
// returns, in missing, the first artifact without a copy.
func releaseFiles(ctx context.Context, rd *rundir.Run, arts []attest.FileDigest, rehash bool) ([]oci.File, string, error) {
	files := make([]oci.File, len(arts))
	for i, a := range arts {
		p := copyOf(rd, a)
		if p == "" {
			return nil, a.Path, nil
		}
		files[i] = oci.File{Name: a.Path, Path: p, SHA256: a.SHA256}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for i := range files {
		g.Go(func() error {
			f := &files[i]
			fi, err := os.Lstat(f.Path)
			if err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("artifact %s: the run directory's copy %s is not a regular file", f.Name, f.Path)
			}
			if !rehash {
				f.Size = fi.Size()
				return nil
			}
			sum, n, err := digest.FileContext(gctx, f.Path)
			if err != nil {
				return fmt.Errorf("artifact %s: %w", f.Name, err)
			}
			if sum != f.SHA256 {
				return fmt.Errorf("artifact %s: the run directory's copy %s has sha256 %s, not the %s recorded\nhint: the run directory changed after the run; run it again", f.Name, f.Path, sum, f.SHA256)
			}
			f.Size = n
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	return files, "", nil
}

// copyOf is the path of a's copy in the run directory, or "".
func copyOf(rd *rundir.Run, a attest.FileDigest) string {
	for _, st := range rd.Steps {
		if a.Step != "" && st.ID != a.Step || !plainName(st.ID) {
			continue
		}
		for _, f := range st.Artifacts {
			fp := path.Clean(f.Path)
			if f.SHA256 != a.SHA256 || f.Link != "" || path.IsAbs(fp) || fp == ".." || strings.HasPrefix(fp, "../") {
				continue
			}
			if a.Path == fp || strings.HasSuffix(a.Path, "/"+fp) {
				p := runlayout.Output(rd.StepDir(st.ID), fp)
				if _, err := os.Lstat(p); err == nil {
					return p
				}
			}
		}
	}
	return ""
}

// plainName reports whether id is one path element (a run.json edited
// to climb out of the run directory is not followed).
func plainName(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, "/\\\x00")
}
