package coordinate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
)

// pushStaged pushes the dispatch directory dir as a release to repo,
// tagged with the dispatch's ID, and returns its reference by digest.
func pushStaged(ctx context.Context, dir, repo string, d *dispatch.Dispatch, opts []oci.Option) (string, error) {
	files := make([]oci.File, 0, len(d.Staged)+2)
	add := func(rel, sha string) error {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		files = append(files, oci.File{Name: rel, Path: filepath.Join(dir, filepath.FromSlash(rel)), SHA256: sha, Size: fi.Size()})
		return nil
	}
	for _, f := range d.Staged {
		if err := add(f.Path, f.SHA256); err != nil {
			return "", err
		}
	}
	for _, name := range []string{stagefs.DispatchFile, stagefs.JobScript} {
		b, err := limits.ReadFile(filepath.Join(dir, name), 64<<20, name)
		if err != nil {
			return "", err
		}
		if err := add(name, strings.TrimPrefix(stagefs.DigestOf(b), "sha256:")); err != nil {
			return "", err
		}
	}
	rel, err := oci.NewRelease(files)
	if err != nil {
		return "", err
	}
	res, err := oci.Push(ctx, repo+":dispatch-"+d.ID, rel, nil, opts...)
	if err != nil {
		return "", fmt.Errorf("staging the dispatch in %s: %w\nhint: the fleet's kubernetes.registry must be writable from here and readable from the pods", repo, err)
	}
	return res.Ref, nil
}

// fetchNode fetches job's node bundle from the staging Repository, or
// returns an error saying why there is none.
func fetchNode(ctx context.Context, s *State, job string, opts []oci.Option) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "gpuattest-node-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "b")
	id := strings.TrimSuffix(filepath.Base(s.Dispatch), string(filepath.Separator))
	if _, err := oci.PullFiles(ctx, stagefs.Repository(s.Release)+":"+stagefs.NodeTag(id, job), dir, []string{stagefs.NodeFile}, opts...); err != nil {
		return nil, err
	}
	return limits.ReadFile(filepath.Join(dir, stagefs.NodeFile), 64<<20, "node bundle")
}

// kubeCommands are the node and sign containers' commands for class on
// Kubernetes: the job script, run by sh with the class as its argument,
// and gpuattest fleet sign.
func kubeCommands(script, class string) (node, signCmd []string) {
	return []string{"/bin/sh", "-c", script, "job.sh", class}, []string{"gpuattest", "fleet", "sign", class}
}

// kubeScript is the job script of a dispatch on Kubernetes: what the
// node container runs.
func kubeScript(id string) string {
	return fmt.Sprintf("#!/bin/sh\n# gpuattest fleet job of dispatch %s (Kubernetes): the node container pulls\n# the staged dispatch by digest ($%s), checks it and runs the GPU steps;\n# the sign container signs its report with the job key.\nexec gpuattest fleet node --release \"$%s\" \"$1\"\n", id, stagefs.ReleaseEnv, stagefs.ReleaseEnv)
}
