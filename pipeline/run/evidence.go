package run

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
)

// evidenceCollector asks the run's GPUs to sign the run's nonce
// (engine.EvidenceCollector): NVML's CC calls, then nvattest, else the
// GPU is unattested with the reason.
type evidenceCollector struct {
	src      gpu.Source
	hw       *hardware.Record
	required bool
	rimStore string
	now      func() time.Time
	// fleet, when set, derives each GPU's nonce from the dispatch and
	// the job (WithFleetNonce) instead of the run.
	fleet *fleetNonce
}

// fleetNonce is a fleet job's dispatch digest and name.
type fleetNonce struct{ dispatch, job string }

var _ engine.EvidenceCollector = (*evidenceCollector)(nil)

// Collect implements engine.EvidenceCollector: it writes
// attest.GPUEvidenceFile (NVIDIA's serialized form, when a GPU is
// attested) and the collateral (attest.GPUEvidenceCollateralDir) into
// dir, and returns the attest.GPUEvidence record.
func (c *evidenceCollector) Collect(ctx context.Context, dir, runID string, artifacts []string) (json.RawMessage, error) {
	rec := &attest.GPUEvidence{Artifacts: artifacts, CollectedAt: c.now().UTC().Truncate(time.Second), Required: c.required, GPUs: []gpuevidence.Collected{}}
	if rec.Artifacts == nil {
		rec.Artifacts = []string{}
	}
	nonce, opts := rec.Nonce(runID), []gpu.EvidenceOption(nil)
	rec.NonceFrom = attest.NonceFromRun
	if f := c.fleet; f != nil {
		rec.NonceFrom, rec.Artifacts = attest.NonceFromFleet, []string{}
		opts = append(opts, gpu.WithNoncePerGPU(func(uuid string) gpuevidence.Nonce { return gpuevidence.FleetNonce(f.dispatch, f.job, uuid) }))
	}
	got, err := gpu.CollectEvidence(ctx, c.src, nonce, opts...)
	if err != nil {
		return nil, fmt.Errorf("collecting GPU evidence: %w", err)
	}
	rec.GPUs = c.ofRecord(got)
	if len(rec.GPUs) == 0 {
		why := c.hw.Reason
		if why == "" {
			why = "NVML lists none"
		}
		rec.Reason = "no GPU: " + why
	}
	if err := c.store(dir, rec); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding the GPU evidence record: %w", err)
	}
	return raw, c.judge(rec)
}

// ofRecord keeps the GPUs of the hardware record (CUDA_VISIBLE_DEVICES
// may have left some out), in NVML order.
func (c *evidenceCollector) ofRecord(got []gpuevidence.Collected) []gpuevidence.Collected {
	in := map[string]bool{}
	for _, g := range c.hw.GPUs {
		in[g.UUID] = true
	}
	out := []gpuevidence.Collected{}
	for _, g := range got {
		if len(in) == 0 || in[g.UUID] {
			out = append(out, g)
		}
	}
	return out
}

// judge fails a run that requires GPU evidence on an unattested GPU, or
// on none.
func (c *evidenceCollector) judge(rec *attest.GPUEvidence) error {
	if !c.required {
		return nil
	}
	if len(rec.GPUs) == 0 {
		return fmt.Errorf("requireGPUEvidence: %s\nhint: run it on a GPU that signs its evidence (Hopper in CC mode, Blackwell with nvattest), or drop requireGPUEvidence", rec.Reason)
	}
	var why []string
	for _, g := range rec.GPUs {
		if g.Evidence == nil {
			why = append(why, fmt.Sprintf("GPU %d (%s) unattested: %s", g.Index, g.UUID, g.Reason))
		}
	}
	if len(why) > 0 {
		return fmt.Errorf("requireGPUEvidence: %s\nhint: see docs/gpu-evidence.md for the GPUs and modes that give evidence", strings.Join(why, "; "))
	}
	return nil
}

// store writes the evidence in NVIDIA's serialized form and copies the
// collateral of --rim-store beside it, naming both, with their digests,
// in rec.
func (c *evidenceCollector) store(dir string, rec *attest.GPUEvidence) error {
	items := gpuevidence.Items(rec.GPUs)
	if len(items) == 0 {
		return nil
	}
	data, err := gpuevidence.Marshal(items)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, attest.GPUEvidenceFile), data, 0o644); err != nil {
		return err
	}
	rec.File = &attest.FileDigest{Path: attest.GPUEvidenceFile, SHA256: sha256Hex(data), Kind: "gpu-evidence"}
	if c.rimStore == "" {
		return nil
	}
	col, err := gpuevidence.LoadCollateral(c.rimStore)
	if err != nil {
		return fmt.Errorf("--rim-store: %w", err)
	}
	out := filepath.Join(dir, attest.GPUEvidenceCollateralDir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	files := map[string][]byte{}
	for id, b := range col.RIMs {
		files[id+gpuevidence.RIMExt] = b
	}
	for _, b := range col.OCSP {
		files[sha256Hex(b)[:16]+gpuevidence.OCSPExt] = b
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := atomicfile.Write(filepath.Join(out, n), files[n], 0o644); err != nil {
			return err
		}
		kind := "rim"
		if strings.HasSuffix(n, gpuevidence.OCSPExt) {
			kind = "ocsp"
		}
		rec.Collateral = append(rec.Collateral, attest.FileDigest{Path: path.Join(attest.GPUEvidenceCollateralDir, n), SHA256: sha256Hex(files[n]), Kind: kind})
	}
	return nil
}
