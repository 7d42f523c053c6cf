package collect

import (
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// ranOn is what a suite step's details say about where its cases ran.
type ranOn struct {
	backend, deviceUUID, visible string
	counts                       *suite.Counts
	failed                       []string
}

// where fills v's backend, devices, case counts and failed cases from the
// step's facts and the hardware record.
func (c *collector) where(s *pipeline.Step, sr *rundir.Step, v *attest.StepVerdict) {
	v.GPU = s.GPU
	r := ranOnOf(sr)
	if r.backend == attest.BackendCUDA || r.backend == attest.BackendCPU {
		v.Backend = r.backend
	}
	if r.counts != nil {
		v.Cases = &attest.CaseCounts{Total: r.counts.Total, Passed: r.counts.Passed, Failed: r.counts.Failed, Skipped: r.counts.Skipped, Errored: r.counts.Errored}
	}
	v.FailedCases = r.failed
	visible := r.visible
	if visible == "" {
		visible = sr.CUDAVisibleDevices
	}
	v.Devices = devices(c.rd.Hardware, s.GPU, r.deviceUUID, visible)
}

// ranOnOf reads a test's, benchmark's or burn-in's facts.
func ranOnOf(sr *rundir.Step) ranOn {
	switch {
	case sr.Test != nil:
		d := sr.Test
		r := ranOn{backend: d.Backend, deviceUUID: d.DeviceUUID, visible: d.CUDAVisibleDevices, counts: &d.Counts}
		for _, f := range d.Failures {
			r.failed = append(r.failed, f.Name)
		}
		return r
	case sr.Benchmark != nil:
		d := sr.Benchmark
		r := ranOn{backend: d.Backend, deviceUUID: d.DeviceUUID, visible: d.CUDAVisibleDevices, counts: &d.Counts}
		for _, bc := range d.Cases {
			if bc.Status == suite.StatusFailed || bc.Status == suite.StatusError {
				r.failed = append(r.failed, bc.Name)
			}
		}
		return r
	case sr.Burnin != nil:
		d := sr.Burnin
		return ranOn{backend: d.Backend, deviceUUID: d.DeviceUUID, visible: d.CUDAVisibleDevices, counts: burninCounts(d)}
	}
	return ranOn{}
}

// burninCounts tallies a burn-in's cases (per iteration) when every
// iteration passed them all; nil when one failed, as the details do not
// say which of its cases did.
func burninCounts(d *suite.BurninDetails) *suite.Counts {
	if d.Cases == 0 || d.FailedIteration > 0 || len(d.Mismatches) > 0 {
		return nil
	}
	return &suite.Counts{Total: d.Cases, Passed: d.Cases}
}

// devices returns the GPUs of rec a step ran on: the one its results name
// by UUID; else, for a gpu: true step, those visible (CUDA_VISIBLE_DEVICES,
// all when unset, none when it names no GPU of the record). A step that is
// not gpu: true and whose results name no GPU used none.
func devices(rec *hardware.Record, gpuStep bool, uuid, visible string) []attest.Device {
	out := []attest.Device{}
	if rec == nil {
		return out
	}
	if uuid != "" {
		for _, g := range rec.GPUs {
			if strings.EqualFold(g.UUID, uuid) {
				return append(out, device(rec, g))
			}
		}
		// The results name a GPU the record does not hold: no device of
		// the record can be said to have run the step.
		return out
	}
	if !gpuStep {
		return out
	}
	// The same rule as preflight, telemetry and the device lock
	// (hardware.Record.Visible). The details record CUDA_VISIBLE_DEVICES's
	// value ("" when unset) but not CUDA_DEVICE_ORDER: an index on a
	// machine of mixed models names no GPU for certain, and a list whose
	// first entry names none leaves no device to name.
	pos, err := rec.Visible(func(k string) (string, bool) {
		if k == hardware.CUDAVisibleDevices {
			return visible, visible != ""
		}
		return "", false
	})
	if err != nil {
		return out
	}
	for _, i := range pos {
		out = append(out, device(rec, rec.GPUs[i]))
	}
	return out
}

func device(rec *hardware.Record, g hardware.GPU) attest.Device {
	return attest.Device{UUID: g.UUID, Name: g.Name, ComputeCapability: g.ComputeCapability, Simulated: rec.Simulated}
}

// stepTelemetry is telemetry's verdict on one step, with the throttled
// fraction the step computed for its GPU when it did.
func stepTelemetry(s *gpu.Summary, throttled *float64) *attest.StepTelemetry {
	t := &attest.StepTelemetry{Verdict: string(s.Verdict.Status), Reasons: s.Verdict.Reasons,
		XidEvents: len(s.XidEvents), ThrottledFraction: s.ThrottleShare, Samples: s.Samples, Simulated: s.Simulated}
	if t.Verdict == "" {
		t.Verdict = string(gpu.VerdictPassed)
	}
	if throttled != nil {
		t.ThrottledFraction = *throttled
	}
	for _, x := range s.XidEvents {
		if x.Fatal {
			t.FatalXidEvents++
		}
	}
	for _, g := range s.GPUs {
		if g.DoubleBitBefore != nil && g.DoubleBitAfter != nil && *g.DoubleBitAfter > *g.DoubleBitBefore {
			t.ECCErrorsDelta += int64(*g.DoubleBitAfter - *g.DoubleBitBefore)
		}
	}
	return t
}
