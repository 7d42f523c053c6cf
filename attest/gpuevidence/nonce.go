package gpuevidence

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// Nonce is the 32-byte nonce a GPU signs in its SPDM report.
type Nonce [nonceSize]byte

// String is the nonce in lowercase hex, as NVIDIA's tools write it.
func (n Nonce) String() string { return fmt.Sprintf("%x", n[:]) }

// nonceDomain separates gpuattest's nonces from any other use of the
// same inputs.
const nonceDomain = "gpuattest.dev/gpu-evidence/v1"

// derive hashes the domain, a kind and fields, each length-prefixed so
// that no two field lists encode alike.
func derive(kind string, fields ...string) Nonce {
	h := sha256.New()
	var l [4]byte
	for _, f := range append([]string{nonceDomain, kind}, fields...) {
		binary.BigEndian.PutUint32(l[:], uint32(len(f)))
		h.Write(l[:])
		h.Write([]byte(f))
	}
	var n Nonce
	h.Sum(n[:0])
	return n
}

// FleetNonce is the nonce a fleet node asks its GPUs to sign: it binds
// the evidence to the signed dispatch (its digest, "sha256:..."), the
// job, and, when each GPU is asked on its own, the GPU's UUID ("" when
// one nonce serves all GPUs of the job). A GPU that signs it answered
// after the owner signed the dispatch.
func FleetNonce(dispatchDigest, job, gpuUUID string) Nonce {
	return derive("fleet", dispatchDigest, job, gpuUUID)
}

// RunNonce is the nonce a single-machine run asks its GPUs to sign: it
// binds the evidence to the run's ID and to the digests of the artifacts
// built before the GPU steps ("sha256:..."), in any order (they are
// sorted; a digest given twice counts once). A GPU that signs it answered
// after those artifacts existed.
func RunNonce(runID string, artifactDigests []string) Nonce {
	d := slices.Clone(artifactDigests)
	slices.Sort(d)
	d = slices.Compact(d)
	return derive("run", append([]string{runID}, d...)...)
}
