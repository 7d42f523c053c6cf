package coordinate

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Bounds of what is staged.
const (
	maxStagedFiles = 20000
)

// Stage is what Prepare needs.
type Stage struct {
	// Pipeline is the whole pipeline; BuildDir the run directory of its
	// build part (Split), which passed.
	Pipeline *pipeline.Pipeline
	BuildDir string
	// Fleet is the fleet file.
	Fleet *fleet.Spec
	// Binaries are the gpuattest executables the nodes run, by platform
	// (linux/amd64, linux/arm64): each class's nodes run the one of its
	// Class.Platform, which Prepare checks is an ELF executable for that
	// machine and stages, its digest pinned in the dispatch. A fleet
	// whose nodes run their image's gpuattest (staged through a
	// registry) needs none.
	Binaries map[string]string
	// Signer is the release owner's signer.
	Signer *sign.Signer
	// ReleaseDir, when set, receives a copy of every released file
	// (RUNDIR/release/NAME), for Push.
	ReleaseDir string
	// StageDir is where the dispatch directory is made when the fleet
	// has no shared directory (Kubernetes): it is then pushed to the
	// fleet's registry. Registry are the options that reach it.
	StageDir string
	Registry []oci.Option
	// Cluster is the cluster the jobs go to, as the engine describes it;
	// the dispatch names its server and namespace.
	Cluster fleet.Cluster
}

// Prepared is a signed and staged dispatch.
type Prepared struct {
	// Dir is the dispatch directory on the shared filesystem.
	Dir string
	// Dispatch is what was signed; Digest its statement's digest.
	Dispatch *dispatch.Dispatch
	Digest   string
	// Subjects are the build outputs.
	Subjects []attest.Subject
	// Bundle is the signed dispatch (one Sigstore bundle).
	Bundle []byte
	// Release is the staged dispatch in the fleet's registry, by digest
	// (Kubernetes); empty on a shared directory.
	Release string
	// File is the dispatch file as staged (dispatch.intoto.jsonl): the
	// coordinator keeps this copy and never reads the shared one back.
	File []byte
	// JobScript is the job script's digest.
	JobScript string

	// keys are the job keys (PEM) by job name, registry the options
	// that reach the staging registry, transport the staging's.
	keys      map[string][]byte
	registry  []oci.Option
	transport transport
}

// Key is job's private key (PEM), which the dispatch delegates the job's
// node statement to: for an engine that delivers the keys itself
// (Kubernetes: a Secret per class), which gets it in its Request.
func (p *Prepared) Key(job string) []byte { return p.keys[job] }

// CheckStaging checks, before anything is built, where Prepare will
// stage the dispatch: a shared directory that already exists must pass
// CheckSharedDir (Prepare checks it again, after making it if it did
// not exist). A registry (Kubernetes) needs nothing here.
func CheckStaging(spec *fleet.Spec) error {
	t, err := transportFor(spec)
	if err != nil {
		return err
	}
	return t.check()
}

// Prepare stages the work tree, the build outputs, the job script, the
// binary and one key per job in a new directory under the fleet's shared
// directory, then signs the dispatch and writes it there. On an error the
// directory is removed.
func Prepare(ctx context.Context, s Stage) (*Prepared, error) {
	id := time.Now().UTC().Format("20060102-150405") + "-" + randomHex(4)
	t, err := transportFor(s.Fleet)
	if err != nil {
		return nil, err
	}
	parent, err := t.place(s.StageDir)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, id)
	// Mkdir, not MkdirAll: the directory is new, made here, 0755 at most
	// (the umask can only take bits away).
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the dispatch directory: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("creating the dispatch directory: %w", err)
	}
	prep, err := prepare(ctx, s, t, id, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return prep, nil
}

func prepare(ctx context.Context, s Stage, t transport, id, dir string) (*Prepared, error) {
	base, err := treeBase(s.Pipeline)
	if err != nil {
		return nil, err
	}
	st := &stager{dir: dir, skip: []string{filepath.Dir(dir), s.BuildDir}}
	if err := st.tree(ctx, base, "work"); err != nil {
		return nil, err
	}
	subjects, err := st.outputs(s.Pipeline, s.BuildDir, base)
	if err != nil {
		return nil, err
	}
	if len(subjects) == 0 {
		return nil, errors.New("the build released no outputs, so there is nothing to dispatch\nhint: the steps without gpu: true declare outputs (fatbins, the harness) that the GPU steps use")
	}
	// The statements also name the release manifest of the outputs, as a
	// single run's do, so that registry tools verify what Push publishes.
	release, err := releaseOf(dir, subjects, s.ReleaseDir)
	if err != nil {
		return nil, err
	}
	subjects = append(subjects, attest.Subject{Name: oci.ManifestSubjectName, Digest: map[string]string{"sha256": strings.TrimPrefix(release.Digest(), "sha256:")}})
	if t.stagesBinary() {
		if err := st.binaries(s.Fleet, s.Binaries); err != nil {
			return nil, err
		}
	}
	rel, err := filepath.Rel(base, s.Pipeline.Path)
	if err != nil || !filepath.IsLocal(rel) {
		abs, _ := filepath.Abs(s.Pipeline.Path)
		if rel, err = filepath.Rel(base, abs); err != nil || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("the pipeline file %s is outside its work tree %s", s.Pipeline.Path, base)
		}
	}
	for _, c := range s.Fleet.Classes {
		for _, t := range c.Targets {
			if !slices.Contains(s.Pipeline.Targets, t) {
				return nil, fmt.Errorf("%s: class %s covers %s, which the pipeline %s does not pin (its targets: %s)", s.Fleet.Path, c.Name, t, s.Pipeline.Path, strings.Join(s.Pipeline.Targets, ", "))
			}
		}
	}
	d := &dispatch.Dispatch{
		ID:        id,
		Targets:   s.Pipeline.Targets,
		CreatedAt: time.Now().UTC(),
		Pipeline:  dispatch.Ref{Name: s.Pipeline.Name, Path: filepath.ToSlash(rel), Digest: s.Pipeline.Digest},
		Source:    st.source,
		Fleet:     dispatch.Fleet{Digest: s.Fleet.Digest, Engine: s.Fleet.Engine, Server: s.Cluster.Server, Namespace: s.Cluster.Namespace},
		Staged:    st.files,
	}
	s.Fleet.Config.Record(&d.Fleet)
	var keys map[string][]byte
	if d.Jobs, keys, err = jobKeys(dir, s.Fleet); err != nil {
		return nil, err
	}
	if err := t.beforeSigning(dir, d, keys); err != nil {
		return nil, err
	}
	digest, b, file, err := signDispatch(ctx, s.Signer, dir, d, subjects)
	if err != nil {
		return nil, err
	}
	prep := &Prepared{Dir: dir, Dispatch: d, Digest: digest, Subjects: subjects, Bundle: b, File: file, JobScript: d.JobScript,
		keys: keys, registry: s.Registry, transport: t}
	if err := t.afterSigning(ctx, st, prep); err != nil {
		return nil, err
	}
	return prep, nil
}

// signDispatch signs d's statement naming subjects, writes it to dir's
// dispatch file and reads the file back: its sha256 is what the job
// script pins, and the coordinator keeps it. It returns the statement's
// digest, the signed bundle and the file as written.
func signDispatch(ctx context.Context, signer *sign.Signer, dir string, d *dispatch.Dispatch, subjects []attest.Subject) (digest string, b, file []byte, err error) {
	stmt, err := d.Statement(subjects)
	if err != nil {
		return "", nil, nil, err
	}
	digest, err = dispatch.Digest(stmt)
	if err != nil {
		return "", nil, nil, err
	}
	b, err = signer.Sign(ctx, stmt)
	if err != nil {
		return "", nil, nil, fmt.Errorf("signing the dispatch: %w", err)
	}
	if err := sign.WriteJSONL(filepath.Join(dir, stagefs.DispatchFile), [][]byte{b}); err != nil {
		return "", nil, nil, err
	}
	// The file as written, checked to be the statement signed: its
	// sha256 is what the job script pins, and the coordinator keeps it.
	file, err = limits.ReadFile(filepath.Join(dir, stagefs.DispatchFile), 64<<20, "dispatch")
	if err != nil {
		return "", nil, nil, err
	}
	if back, err := sign.UnverifiedStatement(bytes.TrimSpace(file)); err != nil {
		return "", nil, nil, fmt.Errorf("reading back the dispatch: %w", err)
	} else if got, err := dispatch.Digest(back); err != nil || got != digest {
		return "", nil, nil, fmt.Errorf("the dispatch read back from %s is not the one signed: it changed on the shared directory", dir)
	}
	return digest, b, file, nil
}

// slurmScript is the job script of a dispatch on a shared directory.
// sbatch keeps its own copy of it, which no one on the shared directory
// can change, and it pins what the node runs: it copies the staged
// gpuattest of the job's class (bin, relative to dir, with the sha256
// binSHA256 in hex; cases, a case on the class ($1), picks another for
// the classes of another platform) into a new private directory on the
// node (mktemp -d under /tmp: 0700, the job's user's), checks the copy's
// sha256 and only then runs the copy, which refuses a dispatch file
// whose digest is not dispatchDigest.
func slurmScript(id, dir, bin, binSHA256, cases, dispatchDigest string) string {
	return fmt.Sprintf(`#!/bin/sh
# gpuattest fleet job of dispatch %[1]s. sbatch keeps this copy of the
# script. It copies gpuattest from the shared directory into a private
# directory on this node, checks the copy's sha256 there, and only then runs
# it; the node refuses a dispatch file whose sha256 is not the one below,
# runs the GPU steps and signs the node's bundle with the job's key.
dir=%[2]s
bin=%[5]s
bin_sha256=%[3]s
dispatch_digest=%[4]s
%[6]sumask 077
priv=$(mktemp -d /tmp/gpuattest-node.XXXXXXXXXX) || exit 1
trap 'rm -rf "$priv"' EXIT
trap 'exit 143' HUP INT TERM
cp "$dir/$bin" "$priv/gpuattest" || exit 1
chmod 0500 "$priv/gpuattest" || exit 1
sum=$(sha256sum "$priv/gpuattest") || exit 1
if [ "${sum%%%% *}" != "$bin_sha256" ]; then
	echo "gpuattest fleet job: refusing to run $dir/$bin: it is sha256:${sum%%%% *}, the dispatch names sha256:$bin_sha256" >&2
	exit 1
fi
"$priv/gpuattest" fleet node --dispatch-digest "$dispatch_digest" "$dir" "$1"
`, id, shellQuote(dir), binSHA256, dispatchDigest, bin, cases)
}

// releaseOf is the OCI release of the staged outputs; with copyTo set it
// copies each one there first, checking its digest.
func releaseOf(dir string, subjects []attest.Subject, copyTo string) (*oci.Release, error) {
	files := make([]oci.File, 0, len(subjects))
	for _, sub := range subjects {
		src := filepath.Join(dir, "work", filepath.FromSlash(sub.Name))
		if copyTo != "" {
			dst := filepath.Join(copyTo, filepath.FromSlash(sub.Name))
			sum, _, err := stagefs.CopyFile(src, dst, 0o444, stagefs.MaxStagedBytes)
			if err != nil {
				return nil, fmt.Errorf("copying %s into the run directory: %w", sub.Name, err)
			}
			if sum != sub.Digest["sha256"] {
				return nil, fmt.Errorf("%s changed while it was staged", sub.Name)
			}
			src = dst
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		files = append(files, oci.File{Name: sub.Name, Path: src, SHA256: sub.Digest["sha256"], Size: fi.Size()})
	}
	return oci.NewRelease(files)
}

// treeBase is the directory staged as the work tree: the pipeline's root,
// or its file's directory when that is above the root.
func treeBase(p *pipeline.Pipeline) (string, error) {
	root, dir := p.Root, p.Dir
	if root == "" {
		root = dir
	}
	if rel, err := filepath.Rel(root, dir); err == nil && filepath.IsLocal(rel) || rel == "." {
		return root, nil
	}
	if rel, err := filepath.Rel(dir, root); err == nil && filepath.IsLocal(rel) {
		return dir, nil
	}
	return "", fmt.Errorf("the pipeline's directory %s and its root %s do not nest: cannot stage one work tree", dir, root)
}

// jobKeys makes one key pair and nonce per job of the fleet, and a
// private directory jobs/<job>/ for each, and returns the jobs and their
// private keys (PEM) by job name: the transport puts each where its
// node's signer finds it.
func jobKeys(dir string, spec *fleet.Spec) ([]dispatch.Job, map[string][]byte, error) {
	var jobs []dispatch.Job
	keys := map[string][]byte{}
	for _, c := range spec.Classes {
		for i := range c.Nodes {
			name := fmt.Sprintf("%s-%d", c.Name, i)
			priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return nil, nil, err
			}
			der, err := x509.MarshalPKCS8PrivateKey(priv)
			if err != nil {
				return nil, nil, err
			}
			pub, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
			if err != nil {
				return nil, nil, err
			}
			if err := os.MkdirAll(filepath.Join(dir, "jobs", name), 0o700); err != nil {
				return nil, nil, err
			}
			keys[name] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
			jobs = append(jobs, dispatch.Job{
				Name: name, Class: c.Name, Index: i,
				Gres: c.Gres, Constraint: c.Constraint, Product: c.Product, Distinct: c.Selectors.Distinct,
				Targets: c.Targets, GPUModel: c.Model(), ComputeCapability: c.ComputeCapability(), GPUs: c.Selectors.GPUs,
				Arch: c.Architecture(), Nonce: randomHex(32), PublicKey: string(pub),
			})
		}
	}
	return jobs, keys, nil
}

// stager copies files into the dispatch directory and records their
// digests.
type stager struct {
	dir    string
	source *dispatch.Source
	skip   []string
	files  []dispatch.File
	bytes  int64
}

// tree copies every regular file under base (but .git, .gpuattest and
// the skipped directories) to the dispatch directory's sub.
func (st *stager) tree(ctx context.Context, base, sub string) error {
	return filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if path != base && (d.Name() == ".git" || d.Name() == ".gpuattest" || st.skipped(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(base, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return st.file(path, filepath.ToSlash(filepath.Join(sub, rel)), info.Mode().Perm())
	})
}

// index is the position of rel in st.files, or -1.
func (st *stager) index(rel string) int {
	for i := range st.files {
		if st.files[i].Path == rel {
			return i
		}
	}
	return -1
}

func (st *stager) skipped(path string) bool {
	for _, s := range st.skip {
		if s != "" && (path == s || strings.HasPrefix(path, s+string(filepath.Separator))) {
			return true
		}
	}
	return false
}

// outputs stages the build's outputs over the work tree, each at its
// path relative to base, and returns them as the subjects.
func (st *stager) outputs(p *pipeline.Pipeline, buildDir, base string) ([]attest.Subject, error) {
	rec, err := engine.ReadRecord(buildDir)
	if err != nil {
		return nil, err
	}
	if src := rec.Source; src != nil {
		st.source = &dispatch.Source{Repository: src.URI, Commit: src.Commit, Dirty: src.Dirty}
	}
	workdirs := map[string]string{}
	for _, s := range p.Steps {
		workdirs[s.ID] = filepath.Join(p.Root, s.Workdir)
	}
	var subjects []attest.Subject
	for _, sr := range rec.Steps {
		if sr.State != runtypes.Passed {
			return nil, fmt.Errorf("build step %s %s: only a build that passed is dispatched", sr.ID, sr.State)
		}
		for _, f := range sr.Outputs {
			if f.Link != "" {
				continue
			}
			rel, err := filepath.Rel(base, filepath.Join(workdirs[sr.ID], filepath.FromSlash(f.Path)))
			if err != nil || !filepath.IsLocal(rel) {
				return nil, fmt.Errorf("output %s of step %s is outside the work tree", f.Path, sr.ID)
			}
			src := runlayout.Output(runlayout.StepDir(buildDir, sr.ID), f.Path)
			staged := filepath.ToSlash(filepath.Join("work", rel))
			if err := st.file(src, staged, fs.FileMode(f.Mode)|0o400); err != nil {
				return nil, err
			}
			if got := st.files[st.index(staged)].SHA256; got != f.SHA256 {
				return nil, fmt.Errorf("output %s of step %s is sha256 %s in %s, but its run record says %s: refusing to dispatch a changed build", f.Path, sr.ID, got, buildDir, f.SHA256)
			}
			subjects = append(subjects, attest.Subject{Name: filepath.ToSlash(rel), Digest: map[string]string{"sha256": f.SHA256}})
		}
	}
	sort.Slice(subjects, func(i, j int) bool { return subjects[i].Name < subjects[j].Name })
	return subjects, nil
}

// file copies src to the dispatch directory's rel with mode, hashing it
// on the way, and records it (replacing an earlier record of rel).
func (st *stager) file(src, rel string, mode fs.FileMode) error {
	sum, n, err := stagefs.CopyFile(src, filepath.Join(st.dir, filepath.FromSlash(rel)), mode, stagefs.MaxStagedBytes-st.bytes)
	if err != nil {
		return fmt.Errorf("staging %s: %w", rel, err)
	}
	st.bytes += n
	for i := range st.files {
		if st.files[i].Path == rel {
			st.files[i] = dispatch.File{Path: rel, SHA256: sum, Mode: uint32(mode.Perm())}
			return nil
		}
	}
	if len(st.files) >= maxStagedFiles {
		return fmt.Errorf("more than %d files to stage\nhint: the work tree is staged whole; keep large data out of the pipeline's root", maxStagedFiles)
	}
	st.files = append(st.files, dispatch.File{Path: rel, SHA256: sum, Mode: uint32(mode.Perm())})
	return nil
}

// shellQuote quotes s for sh: in single quotes, each single quote in s
// closing the quotes, escaped, and reopening them.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
