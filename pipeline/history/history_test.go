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

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

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

// TestHistoryTrustsNoTag (issue 30, items 7 and 8): the registry's tags
// decide nothing the signed statements say. v2 was validated on an H100
// and an A100 (two signed runs, one tag): both are drawn, each in its
// hardware's series. v3, a real 50 % regression, was re-pointed at v1's
// manifest: v1's release is drawn once, under both tags, flagged, and
// nothing is drawn as v3. v0.9, whose run was signed last, is drawn last
// and flagged. Each release shows its signed run id and finish time.
func TestHistoryTrustsNoTag(t *testing.T) {
	t.Parallel()
	host := registrytest.StartInProcess(t, nil)
	k := newKeys(t)
	manifests := map[string]string{}
	for i, r := range []release{
		{tag: "v1", gpu: h100, factor: 1},
		{tag: "v2", gpu: h100, also: []string{a100}, factor: 1},
		{tag: "v3", gpu: h100, factor: 1.5},
		{tag: "v0.9", gpu: h100, factor: 1},
	} {
		manifests[r.tag], _ = publish(t.Context(), t, k, host, "kernels", i, r)
	}
	// A registry writer re-points v3 at v1's manifest.
	v1, err := remote.Get(mustRef(t, host+"/kernels:v1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Tag(mustRef(t, host+"/kernels:v3").(name.Tag), v1); err != nil {
		t.Fatal(err)
	}

	h, err := history.Collect(t.Context(), host+"/kernels", k.verifier(t))
	if err != nil {
		t.Fatal(err)
	}
	type rel struct {
		Tags     []string
		Manifest string
		RunIDs   []string
		Hardware []string
		Flagged  []string
	}
	var got []rel
	for _, r := range h.Releases {
		g := rel{Tags: r.Tags, Manifest: r.Manifest}
		for _, run := range r.Runs {
			g.RunIDs = append(g.RunIDs, run.RunID)
			g.Hardware = append(g.Hardware, run.Hardware)
			if !strings.HasPrefix(run.Bundle, "sha256:") || run.FinishedAt.IsZero() {
				t.Errorf("release %s run %+v: want its bundle digest and signed finish time", r.Tag, run)
			}
		}
		if r.RunID != r.Runs[0].RunID || !r.FinishedAt.Equal(r.Runs[0].FinishedAt) || r.Bundle != r.Runs[0].Bundle {
			t.Errorf("release %s: identity %s %s %s, want its first run's", r.Tag, r.RunID, r.FinishedAt, r.Bundle)
		}
		for _, f := range r.Flags {
			switch {
			case strings.Contains(f, "is tagged v1, v3"):
				g.Flagged = append(g.Flagged, "several tags")
			case strings.Contains(f, "tag v0.9 sorts before v2"):
				g.Flagged = append(g.Flagged, "tag order")
			default:
				g.Flagged = append(g.Flagged, f)
			}
		}
		got = append(got, g)
	}
	sim := func(gpu string) string { return gpu + ", SIMULATED" }
	want := []rel{
		{Tags: []string{"v1", "v3"}, Manifest: manifests["v1"], RunIDs: []string{"run-v1"}, Hardware: []string{sim(h100)}, Flagged: []string{"several tags"}},
		{Tags: []string{"v2"}, Manifest: manifests["v2"], RunIDs: []string{"run-v2", "run-v2-1"}, Hardware: []string{sim(h100), sim(a100)}},
		{Tags: []string{"v0.9"}, Manifest: manifests["v0.9"], RunIDs: []string{"run-v0.9"}, Hardware: []string{sim(h100)}, Flagged: []string{"tag order"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("releases (-want +got):\n%s", diff)
	}
	// The BMF documents come in the same, signed, order.
	var bmf bytes.Buffer
	if err := h.WriteBMF(&bmf); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&bmf)
	var keys []string
	for depth := 0; ; {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '{' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 {
				keys = append(keys, tok)
			}
		}
	}
	if diff := cmp.Diff([]string{"v1", "v2", "v0.9"}, keys); diff != "" {
		t.Errorf("BMF keys (-want +got):\n%s\n%s", diff, bmf.String())
	}
	if len(h.Series) != 4 {
		t.Fatalf("%d series, want 4 (2 cases on the H100, 2 on the A100)", len(h.Series))
	}
	for _, s := range h.Series {
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, p.Tag+"/"+p.RunID)
			if p.Manifest == manifests["v3"] || p.MedianNS > baseMedians[s.Key.Case]*1.1 {
				t.Errorf("series %s: point %+v is v3's own release, which no tag names any more", s.Key, p)
			}
		}
		wantPts := map[string][]string{h100: {"v1/run-v1", "v2/run-v2", "v0.9/run-v0.9"}, a100: {"v2/run-v2-1"}}[s.Key.GPU]
		if diff := cmp.Diff(wantPts, pts); diff != "" {
			t.Errorf("series %s points (-want +got):\n%s", s.Key, diff)
		}
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
