package history_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/pipeline/history"
)

const (
	h100 = "NVIDIA H100 80GB HBM3"
	a100 = "NVIDIA A100-SXM4-80GB"
)

// twelve are the fixture's releases: v1.4 ran on other hardware, v1.7 on
// is 20 % slower, v1.9's file is tampered with in the registry's storage.
func twelve() []release {
	var rs []release
	for i := range 12 {
		r := release{tag: fmt.Sprintf("v1.%d", i), gpu: h100, factor: 1}
		if i == 4 {
			r.gpu = a100
		}
		if i >= 7 {
			r.factor = 1.2
		}
		rs = append(rs, r)
	}
	return rs
}

// TestHistory pushes 12 simulated releases to Debian's docker-registry
// and draws their history: the tampered release is left out and named,
// the release on other hardware is a series of its own, the 20 % slower
// release is marked with both digests, every point names its release
// and bundle; the HTML, BMF and CSV say the same, and the page renders
// in headless chromium with no request leaving the file.
func TestHistory(t *testing.T) {
	t.Parallel()
	docker := registrytest.StartDocker(t)
	k := newKeys(t)
	manifests, files := map[string]string{}, map[string]string{}
	for i, r := range twelve() {
		manifests[r.tag], files[r.tag] = publish(t.Context(), t, k, docker.Host, "kernels", i, r)
	}
	// The release's file, changed in storage: verify's subject check
	// fails for v1.9.
	p := docker.BlobPath(files["v1.9"])
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}

	h, err := history.Collect(t.Context(), docker.Host+"/kernels", k.verifier(t), history.WithJobs(4))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Excluded) != 1 || h.Excluded[0].Tag != "v1.9" || !strings.Contains(h.Excluded[0].Reason, "subject") {
		t.Errorf("excluded %+v, want v1.9 named with a subject mismatch", h.Excluded)
	}
	var tags []string
	for _, r := range h.Releases {
		tags = append(tags, r.Tag)
		if r.Manifest != manifests[r.Tag] || !strings.HasPrefix(r.Bundle, "sha256:") {
			t.Errorf("release %+v: want manifest %s and a bundle digest", r, manifests[r.Tag])
		}
	}
	if got, want := strings.Join(tags, " "), "v1.0 v1.1 v1.2 v1.3 v1.4 v1.5 v1.6 v1.7 v1.8 v1.10 v1.11"; got != want {
		t.Errorf("releases drawn %q, want %q (version order, v1.9 left out)", got, want)
	}
	if len(h.Series) != 4 {
		t.Fatalf("%d series, want 4 (2 cases on the H100, 2 on the A100): %+v", len(h.Series), h.Series)
	}
	for _, s := range h.Series {
		if !s.Key.Simulated || s.Key.Driver != "550.54.15" || s.Key.Clocks != history.ClocksUnknown {
			t.Errorf("series %s: key %+v", s.Key, s.Key)
		}
		for _, pt := range s.Points {
			if pt.Manifest != manifests[pt.Tag] || !strings.HasPrefix(pt.Bundle, "sha256:") || pt.Throughput == nil || pt.RooflinePercent == nil {
				t.Errorf("series %s point %+v: want its release's manifest, a bundle digest, throughput and roofline", s.Key, pt)
			}
		}
		switch s.Key.GPU {
		case a100:
			if len(s.Points) != 1 || s.Points[0].Tag != "v1.4" || len(s.Marks) != 0 {
				t.Errorf("A100 series %s: %+v, want v1.4 alone, unmarked", s.Key, s)
			}
		case h100:
			if len(s.Points) != 10 {
				t.Errorf("H100 series %s: %d points, want 10", s.Key, len(s.Points))
			}
			if len(s.Marks) != 1 {
				t.Fatalf("H100 series %s: marks %+v, want the one step to v1.7", s.Key, s.Marks)
			}
			m := s.Marks[0]
			if s.Points[m.From].Tag != "v1.6" || s.Points[m.To].Tag != "v1.7" || math.Abs(m.Delta-0.2) > 0.02 ||
				m.FromManifest != manifests["v1.6"] || m.ToManifest != manifests["v1.7"] || m.Direction() != "slower" {
				t.Errorf("H100 series %s: mark %+v, want v1.6 -> v1.7, about +20 %%, both digests", s.Key, m)
			}
		default:
			t.Errorf("series on %q: no such GPU in the fixture", s.Key.GPU)
		}
	}

	var bmf bytes.Buffer
	if err := h.WriteBMF(&bmf); err != nil {
		t.Fatal(err)
	}
	var docs map[string]map[string]map[string]struct {
		Value      float64  `json:"value"`
		LowerValue *float64 `json:"lower_value"`
		UpperValue *float64 `json:"upper_value"`
	}
	if err := json.Unmarshal(bmf.Bytes(), &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != 11 || len(docs["v1.7"]) != 2 || len(docs["v1.9"]) != 0 {
		t.Errorf("BMF: %d releases (want 11), v1.7 has %d benchmarks (want 2)", len(docs), len(docs["v1.7"]))
	}
	for name, measures := range docs["v1.4"] {
		lat := measures["latency"]
		if !strings.Contains(name, a100) || lat.Value <= 0 || lat.LowerValue == nil || *lat.LowerValue >= lat.Value || measures["roofline-percent"].Value <= 0 {
			t.Errorf("BMF v1.4 %q: %+v", name, measures)
		}
	}
	var csvOut bytes.Buffer
	if err := h.WriteCSV(&csvOut); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&csvOut).ReadAll()
	if err != nil || len(rows) != 1+22 {
		t.Errorf("CSV: %d rows (%v), want a header and 22 points", len(rows), err)
	}
	marked := 0
	for _, r := range rows[1:] {
		if r[len(r)-1] != "" {
			marked++
		}
	}
	if marked != 2 {
		t.Errorf("CSV: %d marked rows, want 2", marked)
	}

	// --since a date (the signed finish time), a tag (version order) and
	// --limit.
	for _, tt := range []struct {
		opt  history.Option
		want string
	}{
		{history.WithSince("2026-02-20"), "v1.8 v1.10 v1.11"},
		{history.WithSince("v1.9"), "v1.10 v1.11"},
		{history.WithLimit(4), "v1.8 v1.10 v1.11"},
	} {
		h2, err := history.Collect(t.Context(), docker.Host+"/kernels", k.verifier(t), tt.opt)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range h2.Releases {
			got = append(got, r.Tag)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("releases %q, want %q", got, tt.want)
		}
	}

	var page bytes.Buffer
	if err := h.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	checkPage(t, page.Bytes(), manifests)
}
