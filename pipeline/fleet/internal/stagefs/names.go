package stagefs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/internal/limits"
)

// File names in a dispatch directory.
const (
	DispatchFile = "dispatch.intoto.jsonl"
	NodeFile     = "node.intoto.jsonl"
	JobScript    = "job.sh"
	// KeysDir holds the job keys, KEYS/<job>.key (see KeyPath).
	KeysDir  = "keys"
	StepFile = "step"
)

// BinaryPath is where the gpuattest the linux/amd64 nodes run is
// staged, relative to the dispatch directory (BinaryPathFor).
const BinaryPath = "bin/gpuattest"

// BinaryPathFor is where the gpuattest of platform (linux/arm64) is
// staged: BinaryPath for linux/amd64, bin/gpuattest-linux-arm64 for
// linux/arm64.
func BinaryPathFor(platform string) string {
	if platform == "linux/amd64" {
		return BinaryPath
	}
	return BinaryPath + "-" + strings.ReplaceAll(platform, "/", "-")
}

// KeyPath is where job's private key is staged in the dispatch
// directory dir: KEYS/<job>.key, beside the jobs' directories rather than
// in them, so that no step finds it next to its work tree (../job.key).
func KeyPath(dir, job string) string { return filepath.Join(dir, KeysDir, job+".key") }

// Staging through a registry (Kubernetes). The coordinator pushes the
// dispatch directory (the signed dispatch, the job script and every
// staged file; never the keys) as one OCI release, and each job gets its
// reference by digest in ReleaseEnv. The node container pulls it,
// checks every file against the dispatch as a Slurm node does, runs the
// GPU steps and writes its report (ReportFile); the sign container, the
// only one with the job key, signs the report and pushes the node bundle
// back under NodeTag.

// ReleaseEnv carries the staged dispatch's reference by digest.
const ReleaseEnv = "GPUATTEST_FLEET_RELEASE"

// ReportFile is the node's unsigned report in fleet.ReportMount.
const ReportFile = "node.json"

// ErrRegistry is wrapped by node.Sign's error when the registry could not
// be read or written: another attempt may pass.
var ErrRegistry = errors.New("the staging registry failed")

// NodeTag is the tag of job's node bundle in the staging Repository:
// the dispatch's ID and the job's name, so that neither the referrers
// API nor its tag fallback is needed.
func NodeTag(dispatch, job string) string {
	t := "node-" + dispatch + "-" + job
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// Repository is ref without its tag or digest.
func Repository(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// SimulateEnv, set to 1 in a job's environment, makes the node simulate
// its GPUs from the class's gres type (GPUATTEST_FAKE_GPU), labelled
// simulated like every simulated GPU.
const SimulateEnv = "GPUATTEST_FLEET_SIMULATE"

// DigestOf is "sha256:<hex>" of b.
func DigestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// CopyFile copies the regular file src to dst (replacing it) with mode,
// reading at most limit bytes, and returns the hex sha256 and size of
// what it copied.
func CopyFile(src, dst string, mode fs.FileMode, limit int64) (string, int64, error) {
	// limits.Open: a FIFO in src's place is refused, never waited on.
	in, err := limits.Open(src, "the file to stage")
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", 0, err
	}
	_ = os.Remove(dst)
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm()|0o200)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(in, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("more than %d GiB staged in all", limit>>30)
	}
	if err == nil {
		err = os.Chmod(dst, mode.Perm())
	}
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// MaxStagedBytes bounds what a dispatch stages, and what a node copies
// of it.
const MaxStagedBytes = 8 << 30
