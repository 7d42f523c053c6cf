package run_test

import (
	"errors"
	"testing"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// TestFleetRefusesBeforeSigning: a pipeline with nothing to dispatch, or
// without a signer, is refused as input, before the signer is asked
// (a keyless login) and before anything runs.
func TestFleetRefusesBeforeSigning(t *testing.T) {
	t.Parallel()
	spec, err := fleet.Load("../fleet/testdata/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	load := func(body string) *pipeline.Pipeline {
		p, err := pipeline.Load(write(t, body))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	asked := false
	signer := run.WithFleetSigner(func() (*sign.Signer, error) { asked = true; return nil, errors.New("no signer here") })
	for name, c := range map[string]struct {
		p    *pipeline.Pipeline
		opts []run.FleetOption
	}{
		"no gpu step":   {load("steps:\n  - {id: a, run: echo hi}\n"), []run.FleetOption{signer}},
		"no build step": {load("steps:\n  - {id: a, run: echo hi, gpu: true}\n"), []run.FleetOption{signer}},
		"no signer":     {load("steps:\n  - {id: a, run: echo hi}\n  - {id: b, run: echo hi, gpu: true, needs: [a]}\n"), nil},
	} {
		res, err := run.Fleet(t.Context(), c.p, spec, append(c.opts, run.WithFleetDir(t.TempDir()))...)
		if !errors.Is(err, run.ErrFleetInput) || res != nil {
			t.Errorf("%s: got %v, %v; want an ErrFleetInput and no result", name, res, err)
		}
	}
	if asked {
		t.Error("the signer was asked for a fleet that was refused")
	}
}

// TestCollectFleetRefusesANonDispatch: a directory without the
// coordinator's record is input that cannot be collected.
func TestCollectFleetRefusesANonDispatch(t *testing.T) {
	t.Parallel()
	if _, err := run.CollectFleet(t.Context(), t.TempDir()); !errors.Is(err, run.ErrFleetInput) {
		t.Errorf("got %v, want an ErrFleetInput", err)
	}
}
