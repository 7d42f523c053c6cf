package coordinate

import (
	"context"
	"fmt"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
)

// ReleaseDir is where a fleet run directory keeps its released files.
const ReleaseDir = "release"

// Push publishes the collected fleet run in dir to ref: its released
// files (RUNDIR/release) as one OCI artifact whose manifest digest the
// dispatch signs, and the dispatch and every node bundle as referrers of
// it. It refuses a run that was not collected and, unless allowFailed, one
// whose node bundles do not all check against the dispatch.
func Push(ctx context.Context, dir, ref string, allowFailed, allowSimulated bool, opts ...oci.Option) (*oci.PushResult, error) {
	st, err := LoadState(dir)
	if err != nil {
		return nil, err
	}
	if !st.Done {
		return nil, fmt.Errorf("refusing to push %s: the dispatch was not collected\nhint: gpuattest fleet collect %s", dir, dir)
	}
	// The dispatch pushed is the one this run signed, failed or not.
	disp, err := limits.ReadFile(filepath.Join(dir, stagefs.DispatchFile), 64<<20, "dispatch")
	if err != nil {
		return nil, err
	}
	if err := checkDispatch(disp, st, filepath.Join(dir, stagefs.DispatchFile)); err != nil {
		return nil, fmt.Errorf("refusing to push %s: %w", dir, err)
	}
	if !allowFailed {
		r, err := verifyDir(ctx, dir, st, nil, dispatch.Options{AllowSimulated: allowSimulated || st.Simulated})
		if err != nil {
			return nil, err
		}
		if !r.Verified {
			return nil, fmt.Errorf("refusing to push %s: the release failed: %s\nhint: --allow-failed publishes it anyway (its bundles say what failed)", dir, strings.Join(r.Problems, "; "))
		}
	}
	var bundles []oci.Bundle
	var manifest string
	var files []oci.File
	paths := []string{filepath.Join(dir, stagefs.DispatchFile)}
	nodes, err := filepath.Glob(filepath.Join(dir, NodesDir, "*.intoto.jsonl"))
	if err != nil {
		return nil, err
	}
	for i, p := range append(paths, nodes...) {
		data, err := limits.ReadFile(p, 64<<20, "bundle file")
		if err != nil {
			return nil, err
		}
		entries, err := verify.ParseBundles(p, data)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			s, err := sign.UnverifiedStatement(e.Data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Source, err)
			}
			bundles = append(bundles, oci.Bundle{Data: e.Data, PredicateType: s.PredicateType})
			if i > 0 {
				continue
			}
			for _, sub := range s.Subject {
				if sub.Name == oci.ManifestSubjectName {
					manifest = "sha256:" + sub.Digest["sha256"]
					continue
				}
				p := filepath.Join(dir, ReleaseDir, filepath.FromSlash(sub.Name))
				fi, err := os.Stat(p)
				if err != nil {
					return nil, fmt.Errorf("refusing to push %s: released file %s: %w", dir, sub.Name, err)
				}
				files = append(files, oci.File{Name: sub.Name, Path: p, SHA256: sub.Digest["sha256"], Size: fi.Size()})
			}
		}
	}
	rel, err := oci.NewRelease(files)
	if err != nil {
		return nil, err
	}
	if rel.Digest() != manifest {
		return nil, fmt.Errorf("refusing to push %s: its files make the release manifest %s, but the dispatch signs %s", dir, rel.Digest(), manifest)
	}
	return oci.Push(ctx, ref, rel, bundles, opts...)
}
