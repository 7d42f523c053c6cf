package collect

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/attest/hardware"
)

// TestDevicesVisible: the GPUs a step is said to have run on follow the
// one CUDA_VISIBLE_DEVICES rule of preflight, telemetry and the device
// lock (hardware.Record.Visible). The details keep no CUDA_DEVICE_ORDER,
// so on a machine of mixed models an index names no GPU for certain: no
// device is named rather than NVML's.
func TestDevicesVisible(t *testing.T) {
	same := &hardware.Record{GPUs: []hardware.GPU{{Index: 0, Name: "H100", UUID: "GPU-aaaa-1"}, {Index: 1, Name: "H100", UUID: "GPU-bbbb-2"}, {Index: 2, Name: "H100", UUID: "GPU-aaab-3"}}}
	mixed := &hardware.Record{GPUs: []hardware.GPU{{Index: 0, Name: "H100", UUID: "GPU-aaaa-1"}, {Index: 1, Name: "A100", UUID: "GPU-bbbb-2"}}}
	for _, tc := range []struct {
		name          string
		rec           *hardware.Record
		gpuStep       bool
		uuid, visible string
		want          []int
	}{
		{"unset: every GPU", same, true, "", "", []int{0, 1, 2}},
		{"indices, in CUDA's order", same, true, "", "2,0", []int{2, 0}},
		{"the list ends at the first unknown entry", same, true, "", "1, 5, 0", []int{1}},
		{"a repeated entry ends it too", same, true, "", "0,0,1", []int{0}},
		{"uuid prefix", same, true, "", "GPU-bbbb", []int{1}},
		{"ambiguous prefix", same, true, "", "GPU-aaa", []int{}},
		{"MIG instance", same, true, "", "MIG-GPU-aaaa-1/0/0", []int{}},
		{"not an index", same, true, "", "-1", []int{}},
		{"mixed models: an index is not certain", mixed, true, "", "1", []int{}},
		{"mixed models: a uuid is", mixed, true, "", "GPU-bbbb-2", []int{1}},
		{"the results' uuid wins", same, true, "GPU-bbbb-2", "0", []int{1}},
		{"not a GPU step", same, false, "", "0", []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []int{}
			for _, d := range devices(tc.rec, tc.gpuStep, tc.uuid, tc.visible) {
				for _, g := range tc.rec.GPUs {
					if g.UUID == d.UUID {
						got = append(got, g.Index)
					}
				}
			}
			if !cmp.Equal(got, tc.want) {
				t.Errorf("devices = %v, want %v", got, tc.want)
			}
		})
	}
}
