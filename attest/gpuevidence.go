package attest

import (
	"fmt"
	"time"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
)

// GPUEvidenceFile is the run directory's copy of the GPUs' evidence in
// NVIDIA's serialized form (the JSON array of {arch, nonce, evidence,
// certificate} that NVIDIA's tools read); GPUEvidence.File names it with
// its digest.
const GPUEvidenceFile = "gpu-evidence.json"

// GPUEvidenceCollateralDir is the run directory's folder of collateral
// (RIMs as <RIM ID>.xml, OCSP answers as *.ocsp), copied from --rim-store
// so that verify needs no network.
const GPUEvidenceCollateralDir = "gpu-evidence"

// MaxEvidenceArtifacts bounds the artifact digests a run nonce covers.
const MaxEvidenceArtifacts = 4096

// How a GPUEvidence's nonce was derived (GPUEvidence.NonceFrom).
const (
	// NonceFromRun: gpuevidence.RunNonce of the run's ID and Artifacts,
	// one nonce for every GPU (a single-machine run).
	NonceFromRun = "run"
	// NonceFromFleet: gpuevidence.FleetNonce of the signed dispatch's
	// digest, the job and each GPU's UUID (a fleet node).
	NonceFromFleet = "fleet"
)

// GPUEvidence is what every GPU of the hardware record signed over the
// run's nonce, or why it signed nothing. The nonce is never stored: a
// verifier derives it from what the statement is about (the run's ID and
// Artifacts; in a fleet, the dispatch it verified and the job).
type GPUEvidence struct {
	// NonceFrom says how the nonce was derived: NonceFromRun (or empty)
	// or NonceFromFleet. A verifier derives it its own way whatever
	// this says; it is for readers.
	NonceFrom string `json:"nonce_from,omitempty"`
	// Artifacts are the digests ("sha256:<hex>") of the artifacts built
	// before the first GPU step (or, in a run without GPU steps, before
	// collection at its end): the nonce's inputs besides the run's ID.
	Artifacts []string `json:"artifacts"`
	// CollectedAt is when the GPUs were asked: the time their
	// certificates, RIMs and OCSP answers are judged at.
	CollectedAt time.Time `json:"collected_at"`
	// Required is true when the pipeline says requireGPUEvidence: an
	// unattested GPU (or none at all) then failed the run.
	Required bool `json:"required,omitempty"`
	// Reason says why no GPU was asked ("no GPU: ..."); empty when GPUs
	// lists any.
	Reason string `json:"reason,omitempty"`
	// GPUs is one entry per GPU, in NVML order: its evidence in NVIDIA's
	// serialized form, or why it has none.
	GPUs []gpuevidence.Collected `json:"gpus"`
	// File is GPUEvidenceFile with its digest: the attested GPUs'
	// evidence, for NVIDIA's tools; absent when no GPU is attested.
	File *FileDigest `json:"file,omitempty"`
	// Collateral are the RIMs and OCSP answers stored beside the
	// evidence (paths relative to the run directory).
	Collateral []FileDigest `json:"collateral,omitempty"`
}

// Nonce is the nonce every GPU of a run with ID runID was asked to sign.
func (g *GPUEvidence) Nonce(runID string) gpuevidence.Nonce {
	return gpuevidence.RunNonce(runID, g.Artifacts)
}

// Validate checks the record's shape (sizes, digests); it verifies no
// signature: that is attest/verify's.
func (g *GPUEvidence) Validate() []error {
	var errs []error
	if len(g.Artifacts) > MaxEvidenceArtifacts {
		errs = append(errs, fmt.Errorf("gpu_evidence.artifacts: %d digests, more than %d", len(g.Artifacts), MaxEvidenceArtifacts))
	}
	for i, a := range g.Artifacts {
		if !prefixSHA256.MatchString(a) {
			errs = append(errs, fmt.Errorf("gpu_evidence.artifacts[%d] %q: expected sha256:<64 hex digits>", i, a))
		}
	}
	if len(g.GPUs) > gpuevidence.MaxItems {
		errs = append(errs, fmt.Errorf("gpu_evidence.gpus: %d GPUs, more than %d", len(g.GPUs), gpuevidence.MaxItems))
	}
	if g.CollectedAt.IsZero() {
		errs = append(errs, fmt.Errorf("gpu_evidence.collected_at: required"))
	}
	for i, c := range g.GPUs {
		if (c.Evidence == nil) == (c.Reason == "") {
			errs = append(errs, fmt.Errorf("gpu_evidence.gpus[%d]: expected either evidence or a reason", i))
		}
	}
	return errs
}
