package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const header = "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: demo\n"

// where is a problem's position and the start of its message.
type where struct {
	Line, Col int
	Msg       string
}

func problemsOf(t *testing.T, src string) []where {
	t.Helper()
	_, err := Parse("p.yaml", []byte(src))
	if err == nil {
		return nil
	}
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("error is %T, want Problems: %v", err, err)
	}
	out := make([]where, len(probs))
	for i, p := range probs {
		msg := p.Message
		if len(msg) > 40 {
			msg = msg[:40]
		}
		out[i] = where{p.Line, p.Col, msg}
	}
	return out
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []where
	}{
		{
			name: "valid",
			src:  header + "steps:\n  - id: a\n    run: echo a\n",
		},
		{
			name: "missing header fields",
			src:  "steps:\n  - id: a\n    run: echo a\n",
			want: []where{{1, 1, "missing required field apiVersion"}, {1, 1, "missing required field kind"}, {1, 1, "missing required field name"}},
		},
		{
			name: "unknown field and unknown target and bad duration",
			src:  header + "targets: [sm_80, sm_91]\nsteps:\n  - id: a\n    run: echo\n    timeout: 5x\n    nedds: [b]\n",
			want: []where{{4, 18, `unknown CUDA target "sm_91": expected a `}, {8, 14, `unparsable duration "5x"`}, {9, 5, `unknown field "nedds" in step`}},
		},
		{
			name: "needs unknown, self, duplicate id",
			src:  header + "steps:\n  - id: a\n    run: x\n    needs: [a, q]\n  - id: a\n    run: y\n",
			want: []where{{7, 13, `step "a" needs itself`}, {7, 16, `step "a" needs unknown step "q"`}, {8, 9, `duplicate step id "a"`}},
		},
		{
			name: "cycle",
			src:  header + "steps:\n  - {id: a, run: x, needs: [b]}\n  - {id: b, run: x, needs: [a]}\n",
			want: []where{{6, 29, "dependency cycle: a -> b -> a"}},
		},
		{
			name: "image rules",
			src:  header + "images:\n  cuda: nvidia/cuda:12.4.1-devel-ubuntu22.04\nsteps:\n  - {id: a, run: x, image: cdua, runner: docker}\n  - {id: b, run: x, runner: bwrap}\n  - {id: c, run: x, image: cuda}\n",
			want: []where{{7, 28, `step "a" names undeclared image "cdua"`}, {8, 5, `step "b" runs on the bwrap runner but na`}, {9, 21, `step "c" names an image but runs on the `}},
		},
		{
			name: "benchmark sampling and reference rules",
			src: header + "steps:\n" +
				"  - {id: a, kind: benchmark, run: x, results: r.json, rounds: 10, precision: 2%}\n" +
				"  - {id: b, kind: benchmark, run: x, results: r.json, reference: {run: y, results: r.json}, rounds: 6, gate: {alpha: 0.01}}\n" +
				"  - {id: c, kind: benchmark, run: x, results: r.json, reference: {results: q.json}, repeats: auto, precision: 150%, maxTime: 2}\n" +
				"  - {id: d, kind: burnin, run: x, results: r.json, duration: 1m, repeats: auto}\n" +
				"  - {id: e, kind: benchmark, run: x, results: r.json, gate: {threshold: 5%}}\n" +
				"  - {id: f, kind: benchmark, run: x, results: r.json, repeats: sometimes}\n" +
				"  - {id: g, kind: test, run: x, results: r.json, rounds: 3}\n",
			want: []where{
				{5, 55, "rounds applies to a benchmark with a ref"},
				{5, 67, "precision applies to repeats: auto"},
				{6, 84, `step "b": reference and candidate write `},
				{6, 101, "rounds 6 cannot reach significance at al"},
				{7, 66, `step "c": reference needs run`},
				{7, 111, `precision "150%" must be above 0% and be`},
				{7, 126, `unparsable duration 2`},
				{8, 75, "repeats: auto applies to benchmarks"},
				{9, 55, `step "e" has a gate but neither a refere`},
				{10, 64, "steps[5].repeats: expected a positive in"},
				{11, 50, `field "rounds" is not valid for kind tes`},
			},
		},
		{
			name: "rounds auto and onAmbiguous rules",
			src: header + "steps:\n" +
				"  - {id: a, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json}, rounds: 10, maxRounds: 50}\n" +
				"  - {id: b, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json}, maxRounds: 1, gate: {onAmbiguous: pass}}\n" +
				"  - {id: c, kind: benchmark, run: x, results: r.json, roundsTime: 5m}\n" +
				"  - {id: d, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json}, rounds: auto, maxRounds: 40, roundsTime: 5m, gate: {onAmbiguous: warn}}\n",
			want: []where{
				{5, 105, "maxRounds applies to rounds: auto"},
				{6, 104, "maxRounds 1: expected 2 to 2000 pairs"},
				{6, 127, `onAmbiguous "pass": expected fail or war`},
				{7, 55, "roundsTime applies to a benchmark with a"},
			},
		},
		{
			name: "benchmark reference release rules",
			src: header + "steps:\n" +
				"  - {id: a, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, release: ghcr.io/acme/kernels:v1}}\n" +
				"  - {id: b, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, key: k.pub, policy: p.yaml}}\n" +
				"  - {id: c, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, release: 'oci-layout:', key: k.pub}}\n" +
				"  - {id: d, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, release: not a ref, key: k.pub}}\n" +
				"  - {id: e, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, release: ghcr.io/acme/kernels:v1, key: k.pub}}\n" +
				"  - {id: f, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, release: ghcr.io/acme/kernels:v1, key: k.pub, policy: 'builtin:gpu-only'}}\n" +
				"  - {id: g, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, release: ghcr.io/acme/kernels:v1, key: k.pub, policy: 'builtin:cpu-tier'}}\n",
			want: []where{
				{5, 66, `step "a": reference.release needs key: n`},
				{6, 92, `step "b": reference.key applies to a ref`},
				{6, 104, `step "b": reference.policy applies to a `},
				{7, 101, `release "oci-layout:" names no directory`},
				{8, 101, `release "not a ref" is not a registry re`},
				{10, 146, `step "f": reference.policy "builtin:gpu-`},
			},
		},
		{
			name: "a release pipeline pins its reference release",
			src: header + "release: true\nsteps:\n" +
				"  - {id: a, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, release: ghcr.io/acme/kernels:v1, key: k.pub}}\n" +
				"  - {id: b, kind: benchmark, run: x, results: r.json, reference: {run: y, results: q.json, release: 'ghcr.io/acme/kernels@sha256:" + strings.Repeat("0", 64) + "', key: k.pub}}\n",
			want: []where{{6, 101, `release "ghcr.io/acme/kernels:v1" floats`}},
		},
		{
			name: "burn-in duty cycle",
			src: header + "steps:\n" +
				"  - {id: a, kind: burnin, run: x, results: r.json, duration: 1m, minDutyCycle: 150%}\n" +
				"  - {id: b, kind: burnin, run: x, results: r.json, duration: 1m, minDutyCycle: 90%}\n" +
				"  - {id: c, kind: benchmark, run: x, results: r.json, minDutyCycle: 90%}\n",
			want: []where{
				{5, 80, `minDutyCycle "150%": expected a percenta`},
				{7, 55, `field "minDutyCycle" is not valid for ki`},
			},
		},
		{
			name: "kind rules",
			src: header + "targets: [sm_90]\nsteps:\n  - {id: a, kind: exec, run: x, sources: [k.cu]}\n  - {id: b, kind: cuda-build, run: make}\n" +
				"  - {id: c, kind: test, run: x}\n  - {id: d, kind: burnin, run: x, results: r.json}\n  - {id: e, kind: banana, run: x}\n",
			want: []where{
				{6, 33, `field "sources" is not valid for kind ex`},
				{7, 5, `step "b": missing required field sources`},
				{7, 31, `field "run" is not valid for kind cuda-b`},
				{8, 5, `step "c": missing required field results`},
				{9, 5, "missing required field duration"},
				{10, 19, `unknown step kind "banana": expected one`},
			},
		},
		{
			name: "wrong types are all reported",
			src:  header + "steps:\n  - id: a\n    run: {x: 1}\n    gpu: maybe\n    needs: b\n    repeats: many\n",
			want: []where{{6, 10, "steps[0].run: expected a shell string or"}, {7, 10, "steps[0].gpu: expected true or false, go"}, {8, 12, "steps[0].needs: expected a list, got a s"}, {9, 14, "steps[0].repeats: expected a positive in"}},
		},
		{
			name: "release refuses debug flags and native arch",
			src:  header + "release: true\ntargets: [sm_80]\nsteps:\n  - {id: b, kind: cuda-build, sources: [k.cu], flags: [-G, -arch=native]}\n",
			want: []where{{7, 56, `flag "-G" is not allowed in a release bu`}, {7, 60, `flag "-arch=native" builds for whatever `}},
		},
		{
			name: "exec reproducible needs outputs and a known value; hostOnly only on exec",
			src:  header + "steps:\n  - {id: a, run: make, reproducible: check}\n  - {id: b, run: make, outputs: [x], reproducible: twice}\n  - {id: c, kind: test, run: t, results: r.json, hostOnly: true}\n",
			want: []where{{5, 38, "step \"a\": reproducible: check needs outp"}, {6, 52, `unknown value "twice": expected check or`}, {7, 50, `field "hostOnly" is not valid for kind t`}},
		},
		{
			name: "syntax error",
			src:  header + "steps:\n  - id: a\n   run: [x\n",
			want: []where{{6, 8, ""}},
		},
		{
			name: "empty file",
			src:  "   \n",
			want: []where{{1, 1, "empty file: expected a pipeline document"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.src)
			if tt.name == "syntax error" {
				if len(got) != 1 {
					t.Fatalf("got %v, want one syntax problem", got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProblemRendering(t *testing.T) {
	_, err := Parse("p.yaml", []byte(header+"steps:\n  - id: a\n    rnu: echo\n"))
	if err == nil {
		t.Fatal("want an error")
	}
	want := `p.yaml:6:5: unknown field "rnu" in step
    6 |     rnu: echo
      |     ^
    hint: did you mean "run"?`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("rendering:\n%s\nwant it to contain:\n%s", err, want)
	}
}

func TestDefaultsAndCommand(t *testing.T) {
	p, err := Parse("dir/p.yaml", []byte(header+"targets: [sm_80, sm_90]\nsteps:\n  - {id: b, kind: cuda-build, sources: [k.cu]}\n  - {id: t, kind: test, run: [./h, --x], results: r.json, needs: [b]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, tst := p.Steps[0], p.Steps[1]
	if b.Runner != "host" || b.Output != "fatbin" || b.OutDir != "build" || b.PTX == nil || !*b.PTX || b.Reproducible != "off" {
		t.Errorf("cuda-build defaults not applied: %+v", b)
	}
	if !b.Cacheable() || tst.Cacheable() {
		t.Errorf("cacheable: build %v test %v, want true false", b.Cacheable(), tst.Cacheable())
	}
	if diff := cmp.Diff([]string{"./h", "--x"}, tst.Run.Args()); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(p.Digest, "sha256:") || !strings.HasSuffix(p.Dir, "/dir") {
		t.Errorf("digest %q dir %q", p.Digest, p.Dir)
	}
}

func TestParseSizeAndPercent(t *testing.T) {
	for in, want := range map[string]uint64{"8GiB": 8 << 30, "512MiB": 512 << 20, "1.5GB": 1500000000, "4096": 4096} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseSize("lots"); err == nil {
		t.Error("ParseSize(lots) succeeded")
	}
	if got, err := ParsePercent("3%"); err != nil || got != 0.03 {
		t.Errorf("ParsePercent(3%%) = %v, %v", got, err)
	}
}

// Sizes, percentages and durations are parsed when the pipeline is
// decoded: a bad one is a problem with its position, and executors get
// the parsed value.
func TestTypedValuesParsedAtDecode(t *testing.T) {
	got := problemsOf(t, header+"steps:\n  - {id: a, run: x, gpu: true, memory: lots, timeout: soon}\n  - {id: b, kind: burnin, run: x, results: r.json, duration: 1m, leakTolerance: 2 gigs}\n  - {id: c, kind: benchmark, run: x, results: r.json, baseline: b.json, gate: {threshold: much}}\n")
	want := []where{
		{5, 40, `invalid size "lots": expected a number w`},
		{5, 55, `unparsable duration "soon"`},
		{6, 81, `invalid size "2 gigs": expected a number`},
		{7, 91, `invalid percentage "much": expected a nu`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	p, err := Parse("p.yaml", []byte(header+"steps:\n  - {id: a, run: x, gpu: true, memory: 8GiB, timeout: 90s}\n  - {id: c, kind: benchmark, run: x, results: r.json, baseline: b.json, gate: {threshold: 5%}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Steps[0]; a.Memory.Bytes != 8<<30 || a.Memory.String() != "8GiB" || a.Timeout.Value() != 90*time.Second {
		t.Errorf("step a: memory %+v timeout %v", a.Memory, a.Timeout)
	}
	if g := p.Steps[1].Gate; g.Threshold.Fraction != 0.05 || g.Threshold.String() != "5%" {
		t.Errorf("threshold %+v", g.Threshold)
	}
}

// FuzzParse checks that no input makes Parse panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(header + "steps:\n  - id: a\n    run: echo a\n"))
	f.Add([]byte(header + "steps:\n  - {id: a, run: x, needs: [b]}\n  - {id: b, run: x, needs: [a]}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Parse("f.yaml", data)
	})
}

// Hostile pipelines are refused before the parser sees them: 50 000 nested
// flow sequences drove lint to 3.8 GB, nested flow mappings to a crash.
func TestHostileNestingRefused(t *testing.T) {
	t.Parallel()
	for _, open := range []string{"[", "{a: "} {
		src := header + "steps: " + strings.Repeat(open, 50000) + "\n"
		_, err := Parse("p.yaml", []byte(src))
		var probs Problems
		if !errors.As(err, &probs) || len(probs) != 1 || probs[0].Line != 4 || !strings.Contains(probs[0].Message, "nested deeper than 64") {
			t.Errorf("%q x 50000: %v", open, err)
		}
	}
	big := header + "description: " + strings.Repeat("x", 2<<20) + "\nsteps: [{id: a, run: x}]\n"
	if _, err := Parse("p.yaml", []byte(big)); err == nil || !strings.Contains(err.Error(), "pipeline larger than 1 MiB") {
		t.Errorf("2 MiB pipeline: %v", err)
	}
}

func TestParseSizeUnits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{in: "8GiB", want: 8 << 30},
		{in: "512MiB", want: 512 << 20},
		{in: "1.5GiB", want: 3 << 29},
		{in: "2GB", want: 2e9},
		{in: "1048576", want: 1 << 20},
		{in: "64kib", want: 64 << 10},
		{in: "1 TiB", want: 1 << 40},
		{in: "0", want: 0},
		{in: "", wantErr: true},
		{in: "GiB", wantErr: true},
		{in: "8 gigs", wantErr: true},
		{in: "-1GiB", wantErr: true},
		{in: "1e30TiB", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	for n, want := range map[uint64]string{81920 << 20: "80 GiB", 40<<30 - 3<<20: "39.99 GiB", 1536: "1.5 KiB", 512: "512 B", 3 << 40: "3 TiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
