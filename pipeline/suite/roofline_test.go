package suite

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline/stats"
)

func TestLookupPeak(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"NVIDIA H100 80GB HBM3":             "H100 SXM",
		"NVIDIA H100 PCIe":                  "H100 PCIe",
		"NVIDIA H100 NVL":                   "H100 NVL",
		"NVIDIA H200":                       "H200 SXM",
		"NVIDIA GH200 480GB":                "GH200 96GB HBM3",
		"NVIDIA GH200 144G HBM3e":           "GH200 144GB HBM3e",
		"NVIDIA H800":                       "H800 SXM",
		"NVIDIA H800 PCIe":                  "H800 PCIe",
		"NVIDIA H100 80GB HBM3 MIG 1g.10gb": "",
		"NVIDIA A100-SXM4-40GB MIG 3g.20gb": "",
		"NVIDIA A100-SXM4-80GB":             "A100 SXM 80GB",
		"NVIDIA A100-SXM4-40GB":             "A100 SXM 40GB",
		"NVIDIA A100-PCIE-40GB":             "A100 PCIe 40GB",
		"NVIDIA A100 80GB PCIe":             "A100 PCIe 80GB",
		"NVIDIA L4":                         "L4",
		"NVIDIA L40S":                       "L40S",
		"NVIDIA L40":                        "",
		"NVIDIA GeForce RTX 4090":           "",
		"":                                  "",
	}
	for name, want := range tests {
		p, ok := LookupPeak(name)
		if ok != (want != "") || p.Model != want {
			t.Errorf("LookupPeak(%q) = %q, %v; want %q", name, p.Model, ok, want)
		}
	}
}

func TestRoofline(t *testing.T) {
	t.Parallel()
	// vector add on an H100 SXM: 1 flop per 12 bytes, memory bound.
	// 12 MB in 5 µs = 2.4 TB/s of 3.35 TB/s.
	r := roofline("cuda", "NVIDIA H100 80GB HBM3", false, 1<<20, 12<<20, 5000, nil)
	if r.Bound != "memory" || r.Attained == nil || math.Abs(*r.Attained-float64(12<<20)/5e-6/3.35e12) > 1e-9 {
		t.Errorf("vector add roofline %+v", r)
	}
	// a GEMM at AI 200 in bf16 (ridge 153) is compute bound on an A100.
	r = roofline("cuda", "NVIDIA A100-SXM4-80GB", false, 2e12, 1e10, 1e7, map[string]string{"dtype": "bf16"})
	if r.Bound != "compute" || r.Precision != "bf16" || math.Abs(*r.Attained-2e12/1e-2/312e12) > 1e-9 {
		t.Errorf("gemm roofline %+v", r)
	}
	if r := roofline("cuda", "NVIDIA GeForce RTX 4090", false, 1, 1, 1, nil); r.Attained != nil || !strings.Contains(r.Note, "not in the peak table") {
		t.Errorf("unknown model %+v", r)
	}
	if r := roofline("cuda", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", false, 1, 1, 1, nil); r.Attained != nil || r.PeakFLOPS != 0 || !strings.Contains(r.Note, "is a MIG instance") {
		t.Errorf("MIG slice got the full GPU's peaks: %+v", r)
	}
	if r := roofline("cuda", "NVIDIA H100 80GB HBM3", true, 1, 1, 1, nil); !strings.Contains(r.Note, "simulated") {
		t.Errorf("simulated %+v", r)
	}
}

func TestCompareSets(t *testing.T) {
	t.Parallel()
	mk := func(scale float64, n int) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = scale * (1000 + float64(i%7)*3 + float64(i%3))
		}
		return s
	}
	base := &SampleSet{Kind: "baseline", Hardware: Hardware{Backend: "cpu", Digest: "sha256:a"}, Cases: []SampleCase{
		{Name: "a", SamplesNS: mk(1, 30)}, {Name: "gone", SamplesNS: mk(1, 30)},
	}}
	cand := &SampleSet{Kind: "results", Hardware: Hardware{Backend: "cpu"}, Cases: []SampleCase{
		{Name: "a", SamplesNS: mk(1, 30)}, {Name: "fresh", SamplesNS: mk(1, 30)},
	}}
	rep, err := Compare(base, cand)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]stats.Verdict{}
	for _, c := range rep.Cases {
		got[c.Name] = c.Verdict
	}
	if got["a"] != stats.Same || got["gone"] != stats.Missing || got["fresh"] != stats.New || !rep.Failed {
		t.Errorf("verdicts %v failed=%v", got, rep.Failed)
	}
	// Different hardware: not compared, every case AMBIGUOUS, and the
	// report fails.
	gpu := &SampleSet{Hardware: Hardware{Backend: "cuda"}, Cases: []SampleCase{{Name: "a", SamplesNS: mk(1, 30)}}}
	rep, err = Compare(base, gpu)
	if err != nil || !rep.HardwareRefused || !rep.Failed || !strings.Contains(rep.RefusalMessage(), "backend: cpu vs cuda") {
		t.Fatalf("backend mismatch: %v %+v", err, rep)
	}
	if len(rep.Cases) != 2 || rep.Counts[stats.Ambiguous] != 2 {
		t.Errorf("backend mismatch cases %+v", rep.Cases)
	}
	for _, c := range rep.Cases {
		if c.Verdict != stats.Ambiguous || !strings.Contains(c.Reason, "different hardware (backend: cpu vs cuda") {
			t.Errorf("%s: %s %q", c.Name, c.Verdict, c.Reason)
		}
	}
	if rep, err := Compare(base, gpu, AllowHardwareMismatch()); err != nil || rep.HardwareRefused || len(rep.HardwareMismatch) == 0 {
		t.Errorf("allowed mismatch: %v %+v", err, rep)
	}
	if _, err := Compare(&SampleSet{}, cand); err == nil {
		t.Error("empty baseline accepted")
	}
	if _, err := Compare(base, cand, WithAlpha(0)); err == nil {
		t.Error("alpha 0 accepted")
	}
}

// A case listed twice must not let one copy hide the other (a copy 99 %
// slower was dropped and the gate passed).
func TestDuplicateCaseNamesRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fast := `[1000,1001,999,1000,1002,998,1000,1001,999,1000]`
	slow := `[1990,1991,1989,1990,1992,1988,1990,1991,1989,1990]`
	cand := filepath.Join(dir, "cand.json")
	body := `{"schema":"https://gpuattest.dev/benchmark/v1","hardware":{"backend":"cpu"},"cases":[{"name":"k","samples_ns":` + slow + `},{"name":"k","samples_ns":` + fast + `}]}`
	if err := os.WriteFile(cand, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSampleSet(cand, "candidate")
	if err == nil || !strings.Contains(err.Error(), `cases[1].name: duplicate case name "k" (first at cases[0])`) {
		t.Fatalf("duplicate case accepted: %v", err)
	}
	set := &SampleSet{Kind: "benchmark", Cases: []SampleCase{{Name: "k", SamplesNS: []float64{1990}}, {Name: "k", SamplesNS: []float64{1000}}}}
	base := &SampleSet{Kind: "baseline", Cases: []SampleCase{{Name: "k", SamplesNS: []float64{1000}}}}
	if _, err := Compare(base, set); err == nil || !strings.Contains(err.Error(), "duplicate case name") {
		t.Errorf("Compare accepted a duplicate case: %v", err)
	}
}
