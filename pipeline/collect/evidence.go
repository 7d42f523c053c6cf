package collect

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
)

// gpuEvidence decodes run.json's GPU evidence record (nil: none was
// collected) into the run, after checking that the files it names (the
// evidence in NVIDIA's form, the collateral) are in the run directory
// with the digests it records and that the file holds the very evidence
// the record carries.
func (c *collector) gpuEvidence(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var g attest.GPUEvidence
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return fmt.Errorf("%s: gpu_evidence: %w", runlayout.Record(c.dir), err)
	}
	if errs := g.Validate(); len(errs) > 0 {
		return fmt.Errorf("%s: %w", runlayout.Record(c.dir), errors.Join(errs...))
	}
	if g.File != nil {
		data, err := c.evidenceFile(*g.File, gpuevidence.MaxFileBytes)
		if err != nil {
			return err
		}
		items, err := gpuevidence.ParseFile(g.File.Path, data)
		if err != nil {
			return err
		}
		want := gpuevidence.Items(g.GPUs)
		if len(items) != len(want) {
			return fmt.Errorf("%s holds %d GPUs' evidence, run.json records %d", g.File.Path, len(items), len(want))
		}
		for i := range items {
			if items[i] != want[i] {
				return fmt.Errorf("%s: GPU %d's evidence differs from run.json's", g.File.Path, i)
			}
		}
	}
	for _, f := range g.Collateral {
		if _, err := c.evidenceFile(f, gpuevidence.MaxRIMBytes); err != nil {
			return err
		}
	}
	c.run.GPUEvidence = &g
	return nil
}

// evidenceFile reads a file of the GPU evidence from the run directory
// and checks its digest.
func (c *collector) evidenceFile(f attest.FileDigest, max int64) ([]byte, error) {
	if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
		return nil, fmt.Errorf("gpu_evidence: file %q: expected a path inside the run directory", f.Path)
	}
	data, err := limits.ReadFile(filepath.Join(c.dir, filepath.FromSlash(f.Path)), max, "GPU evidence file")
	if err != nil {
		return nil, fmt.Errorf("gpu_evidence: %w", err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != f.SHA256 {
		return nil, fmt.Errorf("gpu_evidence: %s has sha256 %s, run.json records %s\nhint: the file changed after the run recorded it", f.Path, got, f.SHA256)
	}
	return data, nil
}
