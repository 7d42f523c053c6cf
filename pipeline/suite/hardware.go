package suite

import (
	"fmt"
	"github.com/gpuattest/gpuattest/attest/hardware"
)

// Hardware identifies the machine a set of samples was taken on.
type Hardware struct {
	// Digest is the hardware record's digest ("sha256:..."); empty when
	// unknown (a bare results file).
	Digest string `json:"digest,omitempty"`
	// GPUModel is the first GPU's name; empty when there is none.
	GPUModel string `json:"gpu_model,omitempty"`
	// Backend is the harness backend the samples come from: cuda or cpu.
	Backend string `json:"backend,omitempty"`
	// Simulated is true when the GPU came from a simulated source.
	Simulated bool `json:"simulated,omitempty"`
}

// HardwareFromRecord takes the digest, GPU model and simulated flag from
// a hardware record. A nil record gives a zero Hardware.
func HardwareFromRecord(r *hardware.Record) Hardware {
	if r == nil {
		return Hardware{}
	}
	return Hardware{Digest: r.Digest, Simulated: r.Simulated, GPUModel: r.Model()}
}

// Differences lists how h and o differ, field by field; fields unknown on
// either side are not compared.
func (h Hardware) Differences(o Hardware) []string {
	var d []string
	cmp := func(what, a, b string) {
		if a != "" && b != "" && a != b {
			d = append(d, fmt.Sprintf("%s: %s vs %s", what, a, b))
		}
	}
	cmp("backend", h.Backend, o.Backend)
	cmp("gpu model", h.GPUModel, o.GPUModel)
	cmp("hardware digest", h.Digest, o.Digest)
	if h.Simulated != o.Simulated {
		d = append(d, fmt.Sprintf("simulated: %v vs %v", h.Simulated, o.Simulated))
	}
	return d
}

// String describes h in one line.
func (h Hardware) String() string {
	s := h.Backend
	if s == "" {
		s = "unknown backend"
	}
	if h.GPUModel != "" {
		s += ", " + h.GPUModel
	}
	if h.Simulated {
		s += " (simulated)"
	}
	if h.Digest != "" {
		d := h.Digest
		if len(d) > 19 {
			d = d[:19] + "…"
		}
		s += ", " + d
	}
	return s
}
