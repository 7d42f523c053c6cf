package floors_test

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline/floors"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// Every floor of every model is checked against the model's published
// peak: one outside 30-95 % of it is a unit slip (or a floor that can
// never fail), and fails here. The peaks agree with the roofline's peak
// table (pipeline/suite), the other place gpuattest keeps them.
func TestFloorsAgainstPeaks(t *testing.T) {
	t.Parallel()
	want := []string{"A100 SXM 40GB", "A100 SXM 80GB", "A100 PCIe 40GB", "A100 PCIe 80GB", "H100 SXM", "H100 PCIe", "H100 NVL", "H200 SXM", "H200 NVL", "B200"}
	models := floors.Models()
	if len(models) != len(want) {
		t.Fatalf("%d models, want %d (%v)", len(models), len(want), want)
	}
	for i, m := range models {
		if m.Name != want[i] {
			t.Errorf("model %d is %q, want %q", i, m.Name, want[i])
		}
		for _, p := range floors.Check(m) {
			t.Error(p)
		}
		peak, ok := suite.LookupPeak(m.Name)
		if !ok {
			t.Errorf("%s: not in the roofline's peak table", m.Name)
			continue
		}
		for _, c := range []struct {
			what      string
			got, want float64
		}{
			{"fp16 tensor peak", float64(m.TensorFP16.Peak), peak.FP16},
			{"memory bandwidth peak", float64(m.MemoryBandwidth.Peak), peak.MemBW},
		} {
			if math.Abs(c.got/c.want-1) > 1e-3 {
				t.Errorf("%s: %s %g here, %g in the roofline's table", m.Name, c.what, c.got, c.want)
			}
		}
	}
}

// The check catches the slips it is for. DCGM 4.6.0's H200 SXM memory
// bandwidth floor is 2333 where the unit is MB/s (beside H100's
// 1,905,000): typed into a floor whose unit is bytes/s it is 7e-8 % of
// the peak, and a floor equal to the peak could never pass.
func TestCheckCatchesAUnitSlip(t *testing.T) {
	t.Parallel()
	h200, ok := floors.Lookup("NVIDIA H200")
	if !ok {
		t.Fatal("no H200 in the table")
	}
	tests := []struct {
		name string
		edit func(*floors.Model)
		want string
	}{
		{"DCGM's H200 floor, MB/s as bytes/s", func(m *floors.Model) { m.MemoryBandwidth.Min = 2333 }, "a unit slip"},
		{"TFLOP/s as flop/s", func(m *floors.Model) { m.TensorFP16.Min = 396 }, "a unit slip"},
		{"a floor at the peak", func(m *floors.Model) { m.TensorFP16.Min = m.TensorFP16.Peak }, "100 % of the peak"},
		{"a percent, not a share", func(m *floors.Model) { m.Power.Min = 85 }, "a unit slip"},
		{"no source", func(m *floors.Model) { m.MemoryBandwidth.Source = floors.Source{} }, "needs a name and an https URL"},
		{"no floor", func(m *floors.Model) { m.TensorFP16 = floors.Floor[floors.FLOPS]{} }, "no floor"},
	}
	for _, tt := range tests {
		m := h200
		tt.edit(&m)
		if got := strings.Join(floors.Check(m), "\n"); !strings.Contains(got, tt.want) {
			t.Errorf("%s: Check says %q, want %q", tt.name, got, tt.want)
		}
	}
	if p := floors.Check(h200); len(p) != 0 {
		t.Errorf("the table's H200 SXM: %v", p)
	}
}

// NVML names, as the hardware record holds them, find their model; MIG
// instances, other models and an empty name find none (not judged).
func TestLookup(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"NVIDIA H100 80GB HBM3":            "H100 SXM",
		"NVIDIA H100 PCIe":                 "H100 PCIe",
		"NVIDIA H100 NVL":                  "H100 NVL",
		"NVIDIA H200":                      "H200 SXM",
		"NVIDIA H200 141GB HBM3e":          "H200 SXM",
		"NVIDIA H200 NVL":                  "H200 NVL",
		"NVIDIA A100-SXM4-40GB":            "A100 SXM 40GB",
		"NVIDIA A100-SXM4-80GB":            "A100 SXM 80GB",
		"NVIDIA A100-PCIE-40GB":            "A100 PCIe 40GB",
		"NVIDIA A100 80GB PCIe":            "A100 PCIe 80GB",
		"NVIDIA B200":                      "B200",
		"NVIDIA A100-SXM4-40GB MIG 1g.5gb": "",
		"NVIDIA GH200 480GB":               "",
		"NVIDIA GB200":                     "",
		"NVIDIA L40S":                      "",
		"NVIDIA GeForce RTX 4090":          "",
		"":                                 "",
	} {
		m, ok := floors.Lookup(name)
		if ok != (want != "") || m.Name != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", name, m.Name, ok, want)
		}
	}
}

func TestUnitsFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ got, want string }{
		{floors.Share(0.85).String(), "85 %"},
		{floors.BytesPerSecond(2.345e12).String(), "2345 GB/s"},
		{floors.FLOPS(396e12).String(), "396 TFLOP/s"},
		{floors.Share(0).Unit() + "|" + floors.BytesPerSecond(0).Unit() + "|" + floors.FLOPS(0).Unit(), "share of the enforced power limit|bytes/s|flop/s"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

// docRow is a model's row in docs/gpu-check.md's floors table.
func docRow(m floors.Model) string {
	return fmt.Sprintf("| %s | %v | %v of %v | %v of %v | %s |", m.Name, m.Power.Min, m.MemoryBandwidth.Min, m.MemoryBandwidth.Peak,
		m.TensorFP16.Min, m.TensorFP16.Peak, "["+m.TensorFP16.Source.Name+"]("+m.TensorFP16.Source.URL+")")
}

// docs/gpu-check.md shows the table as it is.
func TestFloorsDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/gpu-check.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range floors.Models() {
		if row := docRow(m); !strings.Contains(string(b), row+"\n") {
			t.Errorf("docs/gpu-check.md lacks the row\n%s", row)
		}
	}
}
