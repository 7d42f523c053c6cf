package coordinate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
)

// transport is how a dispatch reaches the nodes and how their bundles
// come back: the coordinator's side of the staging the fleet's engine
// chose (fleet.SharedStaging: sharedTransport; fleet.RegistryStaging:
// registryTransport). Everything else about a dispatch (the work tree
// and outputs staged, the jobs and their keys, the signature) is the
// same for every engine.
type transport interface {
	// check checks, before anything is built, where the dispatch will
	// be staged.
	check() error
	// place checks where the dispatch is staged and returns the
	// directory a new dispatch directory is made in; stageDir is the
	// run directory's staging directory.
	place(stageDir string) (string, error)
	// stagesBinary says whether the nodes run the gpuattest staged with
	// the dispatch (else their image's).
	stagesBinary() bool
	// beforeSigning adds to the dispatch in dir what the transport
	// knows before it is signed, and keeps the job keys (job name: PEM)
	// where its nodes' signers find them.
	beforeSigning(dir string, d *dispatch.Dispatch, keys map[string][]byte) error
	// afterSigning finishes prep once the dispatch is signed: the job
	// script that pins it, or the push of the staged dispatch.
	afterSigning(ctx context.Context, st *stager, prep *Prepared) error
	// request fills in a class's request what its jobs run and how they
	// get their keys.
	request(prep *Prepared, c *fleet.Class, req *fleet.Request) error
	// bundles returns a reader of each job's node bundle and a func to
	// call when done. An error the reader returns that is an
	// *unreadable says why in the job's missing line.
	bundles(ctx context.Context, s *State, opts []oci.Option) (func(job string) ([]byte, error), func())
	// removeKeys deletes what is left of the jobs' keys once their jobs
	// ended.
	removeKeys(s *State)
}

// unreadable is a node bundle the transport could not read for a reason
// the missing line names (a dispatch directory another user could swap).
type unreadable struct{ err error }

func (u *unreadable) Error() string { return u.err.Error() }
func (u *unreadable) Unwrap() error { return u.err }

// transportFor is the transport of the fleet's engine.
func transportFor(spec *fleet.Spec) (transport, error) {
	switch cfg := spec.Config.(type) {
	case fleet.SharedStaging:
		return sharedTransport{root: cfg.SharedDirectory()}, nil
	case fleet.RegistryStaging:
		return registryTransport{repo: cfg.StagingRepository()}, nil
	}
	return nil, fmt.Errorf("staging the dispatch: engine %s stages neither in a shared directory nor through a registry", spec.Engine)
}

// recordTransport is the transport of a dispatch the coordinator
// recorded: the staging of the engine it went to (the settings its
// factory recovers from the record's cluster), at the place the record
// names (the dispatch directory's parent; the staged release's
// repository).
func recordTransport(s *State) (transport, error) {
	f, ok := fleet.Lookup(s.Cluster.Engine)
	if !ok {
		return nil, fmt.Errorf("%s names engine %q, which this gpuattest does not have (it has: %s)", StateFile, s.Cluster.Engine, strings.Join(fleet.EngineNames(), ", "))
	}
	switch f.Recorded(s.Cluster).(type) {
	case fleet.SharedStaging:
		return sharedTransport{root: filepath.Dir(s.Dispatch)}, nil
	case fleet.RegistryStaging:
		return registryTransport{repo: stagefs.Repository(s.Release)}, nil
	}
	return nil, fmt.Errorf("collecting the dispatch: engine %s stages neither in a shared directory nor through a registry", s.Cluster.Engine)
}

// sharedTransport stages in a directory every node and the coordinator
// share (Slurm): the nodes run the staged gpuattest, which the job
// script pins, read their keys from the dispatch directory and write
// their bundles there.
type sharedTransport struct{ root string }

func (t sharedTransport) check() error {
	if _, err := os.Stat(t.root); err != nil {
		return nil
	}
	_, err := stagefs.CheckSharedDir(t.root)
	return err
}

func (t sharedTransport) place(string) (string, error) {
	if err := os.MkdirAll(t.root, 0o755); err != nil {
		return "", fmt.Errorf("creating the dispatch directory: %w\nhint: sharedDir must be writable here and on every node", err)
	}
	// No co-tenant may be able to swap the dispatch directory.
	if _, err := stagefs.CheckSharedDir(t.root); err != nil {
		return "", err
	}
	return t.root, nil
}

func (sharedTransport) stagesBinary() bool { return true }

// beforeSigning writes each job's key 0600 in KEYS/<job>.key, for the
// node that runs the job.
func (sharedTransport) beforeSigning(dir string, d *dispatch.Dispatch, keys map[string][]byte) error {
	if err := os.MkdirAll(filepath.Join(dir, stagefs.KeysDir), 0o700); err != nil {
		return err
	}
	for _, j := range d.Jobs {
		if err := atomicfile.WriteNew(stagefs.KeyPath(dir, j.Name), keys[j.Name], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// afterSigning writes the job script, which pins the staged binary and
// the signed dispatch file.
func (sharedTransport) afterSigning(_ context.Context, st *stager, prep *Prepared) error {
	bin, sum, cases := binarySelection(prep.Dispatch.Jobs, st.files)
	script := slurmScript(prep.Dispatch.ID, prep.Dir, bin, sum, cases, stagefs.DigestOf(prep.File))
	if err := os.WriteFile(filepath.Join(prep.Dir, stagefs.JobScript), []byte(script), 0o755); err != nil {
		return err
	}
	prep.JobScript = stagefs.DigestOf([]byte(script))
	return nil
}

func (sharedTransport) request(prep *Prepared, c *fleet.Class, req *fleet.Request) error {
	req.Job = fleet.ScriptJob{Script: filepath.Join(prep.Dir, stagefs.JobScript), Args: []string{c.Name}, LogDir: filepath.Join(prep.Dir, "logs")}
	return nil
}

// bundles reads the node bundles as the nodes wrote them: through the
// dispatch directory, checked as a node checks it.
func (sharedTransport) bundles(_ context.Context, s *State, _ []oci.Option) (func(string) ([]byte, error), func()) {
	td, err := stagefs.OpenTrusted(s.Dispatch)
	if err != nil {
		return func(string) ([]byte, error) { return nil, &unreadable{err} }, func() {}
	}
	return func(job string) ([]byte, error) {
		b, _, err := td.ReadFile("jobs/"+job+"/"+stagefs.NodeFile, 64<<20, "node bundle", 0o022)
		if errors.Is(err, stagefs.ErrUnsafePath) {
			err = &unreadable{err}
		}
		return b, err
	}, func() { td.Close() }
}

// removeKeys deletes the keys only through the dispatch directory as
// the node checks it (no link followed, nothing another user could have
// replaced): a directory swapped by someone else is left alone.
func (sharedTransport) removeKeys(s *State) {
	td, err := stagefs.OpenTrusted(s.Dispatch)
	if err != nil {
		return
	}
	defer td.Close()
	if td.Dir(stagefs.KeysDir, 0o077) != nil {
		return
	}
	for _, j := range s.Jobs {
		_ = td.Remove(stagefs.KeysDir + "/" + j.Name + ".key")
	}
}

// registryTransport stages through an OCI Repository (Kubernetes): the
// coordinator pushes the dispatch directory, the pods pull it by digest,
// the engine delivers the job keys (a Secret per class; they never touch
// the coordinator's disk) and the nodes push their bundles back under
// NodeTag.
type registryTransport struct{ repo string }

func (registryTransport) check() error { return nil }

func (registryTransport) place(stageDir string) (string, error) {
	if stageDir == "" {
		return "", errors.New("staging through a registry: no staging directory")
	}
	if err := os.MkdirAll(stageDir, 0o755); err != nil {
		return "", fmt.Errorf("creating the dispatch directory: %w", err)
	}
	return stageDir, nil
}

func (registryTransport) stagesBinary() bool { return false }

// beforeSigning writes the job script: the pods' image holds gpuattest,
// so the script names no digest and the dispatch can name the script's.
// The keys stay in memory, for the engine's request.
func (t registryTransport) beforeSigning(dir string, d *dispatch.Dispatch, _ map[string][]byte) error {
	script := kubeScript(d.ID)
	if err := os.WriteFile(filepath.Join(dir, stagefs.JobScript), []byte(script), 0o755); err != nil {
		return err
	}
	d.JobScript = stagefs.DigestOf([]byte(script))
	return nil
}

// afterSigning pushes the staged dispatch.
func (t registryTransport) afterSigning(ctx context.Context, _ *stager, prep *Prepared) error {
	var err error
	prep.Release, err = pushStaged(ctx, prep.Dir, t.repo, prep.Dispatch, prep.registry)
	return err
}

// request gives the class's jobs the node and sign commands, the staged
// dispatch's reference and their keys, by index.
func (registryTransport) request(prep *Prepared, c *fleet.Class, req *fleet.Request) error {
	script, err := limits.ReadFile(filepath.Join(prep.Dir, stagefs.JobScript), 64<<10, "job script")
	if err != nil {
		return err
	}
	req.Env[stagefs.ReleaseEnv] = prep.Release
	var job fleet.ImageJob
	job.Command, job.SignCommand = kubeCommands(string(script), c.Name)
	for i := range c.Nodes {
		key := prep.Key(fmt.Sprintf("%s-%d", c.Name, i))
		if key == nil {
			return fmt.Errorf("no key for job %s-%d", c.Name, i)
		}
		job.Keys = append(job.Keys, key)
	}
	req.Job = job
	return nil
}

func (t registryTransport) bundles(ctx context.Context, s *State, opts []oci.Option) (func(string) ([]byte, error), func()) {
	return func(job string) ([]byte, error) { return fetchNode(ctx, s, job, opts) }, func() {}
}

// removeKeys deletes keys an older gpuattest left in the staging
// directory (this one keeps them in memory only).
func (registryTransport) removeKeys(s *State) {
	for _, j := range s.Jobs {
		_ = os.Remove(stagefs.KeyPath(s.Dispatch, j.Name))
	}
}
