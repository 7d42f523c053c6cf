package suite

import (
	"encoding/json"
	"fmt"
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

// hardwareRecord is the part of pipeline/gpu's Record that suites need.
type hardwareRecord struct {
	Simulated bool        `json:"simulated"`
	Digest    string      `json:"digest"`
	GPUs      []recordGPU `json:"gpus"`
}

// recordGPU is one GPU of a hardware record.
type recordGPU struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	UUID     string `json:"uuid"`
	PCIBusID string `json:"pci_bus_id"`
}

// decodeRecord decodes a hardware record's JSON; empty input gives an
// empty record.
func decodeRecord(raw []byte) (*hardwareRecord, error) {
	var r hardwareRecord
	if len(raw) == 0 {
		return &r, nil
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decoding the hardware record: %w", err)
	}
	return &r, nil
}

// HardwareFromRecord extracts the digest, GPU model and simulated flag
// from a hardware record's JSON (see pipeline/gpu). Empty input gives a
// zero Hardware.
func HardwareFromRecord(raw []byte) (Hardware, error) {
	if len(raw) == 0 {
		return Hardware{}, nil
	}
	r, err := decodeRecord(raw)
	if err != nil {
		return Hardware{}, err
	}
	h := Hardware{Digest: r.Digest, Simulated: r.Simulated}
	if len(r.GPUs) > 0 {
		h.GPUModel = r.GPUs[0].Name
	}
	return h, nil
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
