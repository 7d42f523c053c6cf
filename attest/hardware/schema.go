package hardware

import (
	"fmt"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/jsonstrict"
	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

// maxDepth is the deepest nesting a hardware record may have; it needs
// four.
const maxDepth = 16

var (
	digestRE = lazyregexp.New(`^sha256:[0-9a-f]{64}$`)
	ccRE     = lazyregexp.New(`^[0-9]+\.[0-9]$`)
)

// Decode parses a hardware record's JSON the way gpuattest reads every
// document (strictly, then Validate) and checks its digest. Problems name
// the field (schemas/hardware.schema.json publishes the format).
func Decode(raw []byte) (*Record, error) {
	var r Record
	probs := jsonstrict.Read("hardware record", raw, maxDepth, &r)
	if len(probs) > 0 {
		return nil, probs
	}
	if err := r.Verify(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate returns every problem of a decoded record beyond its shape,
// each with its field path.
func (r *Record) Validate() problem.List {
	var l problem.List
	if !digestRE.MatchString(r.Digest) {
		l.Add("digest", "", "%q: expected sha256:<64 hex digits>", r.Digest)
	}
	for i, g := range r.GPUs {
		if g.ComputeCapability != "" && !ccRE.MatchString(g.ComputeCapability) {
			l.Add(fmt.Sprintf("gpus[%d].compute_capability", i), "", "%q: expected MAJOR.MINOR such as 9.0", g.ComputeCapability)
		}
	}
	return l
}
