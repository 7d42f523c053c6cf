package fleet_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/engines"
	"github.com/gpuattest/gpuattest/pipeline/fleet/kube"
	"github.com/gpuattest/gpuattest/pipeline/fleet/slurm"
)

func TestLoad(t *testing.T) {
	s, err := fleet.Load("testdata/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, ok := s.Config.(*slurm.Config)
	if s.Engine != "slurm" || !ok || s.PollInterval.D != 5*time.Second {
		t.Fatalf("header = %+v", s)
	}
	if want := (slurm.Config{Partition: "gpu", SharedDir: "/shared/gpuattest", HostSteps: slurm.HostStepsSandboxed}); *cfg != want {
		t.Errorf("slurm settings %+v, want %+v (hostSteps defaulted)", *cfg, want)
	}
	if !strings.HasPrefix(s.Digest, "sha256:") || s.Jobs() != 3 {
		t.Errorf("digest %q, jobs %d; want a sha256 digest and 3 jobs", s.Digest, s.Jobs())
	}
	want := []fleet.Selectors{
		{GPUType: "a100", GPUs: 8, Distinct: true, Placement: slurm.Placement{Constraint: "sm_80"}},
		{GPUType: "h100", GPUs: 8, Placement: slurm.Placement{Constraint: "sm_90"}},
	}
	var got []fleet.Selectors
	for _, c := range s.Classes {
		got = append(got, c.Selectors)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selectors (-want +got):\n%s", diff)
	}
	a, h := s.Classes[0], s.Classes[1]
	if a.Nodes != 2 || h.Nodes != 1 || a.TimeLimit.D != 2*time.Hour || !h.TimeLimit.IsZero() {
		t.Errorf("nodes %d, %d and time limits %v, %v; want 2, 1 (default), 2h, none", a.Nodes, h.Nodes, a.TimeLimit.D, h.TimeLimit.D)
	}
	if a.ComputeCapability() != "8.0" || h.ComputeCapability() != "9.0" || a.Model() != "a100" || h.Model() != "H100" {
		t.Errorf("a100: cc %q model %q; h100: cc %q model %q", a.ComputeCapability(), a.Model(), h.ComputeCapability(), h.Model())
	}
}

// TestSameFileBothEngines: one fleet file names the fields of both
// engines; its engine field picks which are checked and used, and the
// classes' selectors and models are the same either way.
func TestSameFileBothEngines(t *testing.T) {
	const classes = "sharedDir: /shared\nkubernetes:\n  namespace: gpu\n  image: reg.example/gpuattest@sha256:" + "0000000000000000000000000000000000000000000000000000000000000000" + "\n  registry: reg.example/team/staging\n" +
		"classes:\n  - name: a100\n    gres: gpu:a100:8\n    product: NVIDIA-A100-SXM4-80GB\n    nodes: 2\n    targets: [sm_80]\n" +
		"  - name: h100\n    product: NVIDIA-H100-80GB-HBM3\n    gpus: 8\n    gres: gpu:h100:8\n    targets: [sm_90]\n"
	var got [][]fleet.Selectors
	for _, engine := range []string{"slurm", "kubernetes"} {
		s, err := fleet.Parse("fleet.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: "+engine+"\n"+classes))
		if err != nil {
			t.Fatalf("engine %s: %v", engine, err)
		}
		var sel []fleet.Selectors
		for _, c := range s.Classes {
			sel = append(sel, c.Selectors)
		}
		got = append(got, sel)
		if s.Classes[0].Model() != "a100" || s.Classes[1].Model() != "h100" {
			t.Errorf("engine %s: models %q, %q", engine, s.Classes[0].Model(), s.Classes[1].Model())
		}
	}
	if diff := cmp.Diff(got[0], got[1], cmpopts.IgnoreFields(fleet.Selectors{}, "Placement")); diff != "" {
		t.Errorf("selectors differ between engines (-slurm +kubernetes):\n%s", diff)
	}
	if diff := cmp.Diff(slurm.Placement{}, got[0][0].Placement); diff != "" {
		t.Errorf("slurm's a100 placement (-want +got):\n%s", diff)
	}
	want := fleet.Selectors{GPUType: "a100", GPUs: 8, Distinct: true, Placement: kube.Placement{Product: "NVIDIA-A100-SXM4-80GB"}}
	if diff := cmp.Diff(want, got[1][0]); diff != "" {
		t.Errorf("a100 selectors (-want +got):\n%s", diff)
	}
	k, err := fleet.Parse("f.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: kubernetes\nkubernetes: {image: i, registry: r.example/s}\n"+
		"classes:\n  - {name: h, product: NVIDIA-H100-80GB-HBM3, gpus: 2, targets: [sm_90]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := k.Classes[0]; c.Model() != "H100" || c.Selectors.GPUs != 2 {
		t.Errorf("product-only class: model %q, gpus %d; want H100, 2", c.Model(), c.Selectors.GPUs)
	}
	kc, ok := k.Config.(*kube.FleetConfig)
	if !ok || kc.Kubernetes.Registry != "r.example/s" || kc.Kubernetes.ScheduleTimeout.D != kube.DefaultScheduleTimeout {
		t.Errorf("kubernetes settings %+v, want registry r.example/s and the default schedule timeout", kc)
	}
}

func TestParseProblems(t *testing.T) {
	const head = "apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: slurm\nsharedDir: /shared\n"
	tests := []struct {
		name string
		in   string
		want []string // "line:col path: message fragment"
	}{
		{
			name: "every problem at once",
			in: "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nengine: nomad\nsharedDir: shared/dir\nclasses:\n" +
				"  - name: H100\n    gres: gpu:8\n    targets: [sm_9]\n" +
				"  - name: a100\n    gres: gpu:a100:0\n    nodes: 0\n    targets: []\n    timeLimit: 30s\n",
			want: []string{
				"2:7 kind: kind \"Pipeline\": expected Fleet",
				"3:9 engine: unknown engine \"nomad\"",
				"6:11 classes[0].name: expected [a-z0-9][a-z0-9-]*",
				"7:11 classes[0].gres: expected gpu:TYPE:COUNT",
				"8:15 classes[0].targets[0]: expected sm_<compute capability>",
				"10:11 classes[1].gres: count 0, expected 1 to 64",
				"11:12 classes[1].nodes: nodes 0: expected at least 1",
				"12:14 classes[1].targets: class a100 covers no targets",
				"13:16 classes[1].timeLimit: expected at least 1m",
			},
		},
		{
			name: "unknown field, wrong type, duplicate class",
			in: head + "classes:\n  - name: a\n    gres: gpu:a100:1\n    targets: [sm_80]\n    node: 2\n" +
				"  - name: a\n    gres: gpu:a100:1\n    targets: [sm_80]\n    nodes: two\n",
			want: []string{
				"9:5 classes[0].node: unknown field \"node\" in class",
				"10:11 classes[1].name: duplicate class name \"a\" (also classes[0])",
				"13:12 classes[1].nodes: expected an integer, got a string",
			},
		},
		{
			name: "missing fields",
			in:   "kind: Fleet\n",
			want: []string{
				"1:1 apiVersion: missing apiVersion",
				"1:1 engine: missing engine",
				"1:1 classes: a fleet needs at least one class",
			},
		},
		{
			name: "slurm needs its fields",
			in:   "apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: slurm\nclasses:\n  - name: a\n    product: NVIDIA-A100-SXM4-80GB\n    gpus: 8\n    targets: [sm_80]\n",
			want: []string{
				"1:1 sharedDir: missing sharedDir",
				"5:9 classes[0].gres: missing classes[0].gres",
			},
		},
		{
			name: "hostSteps",
			in:   head + "hostSteps: off\nclasses:\n  - name: a\n    gres: gpu:a100:1\n    targets: [sm_80]\n",
			want: []string{"5:12 hostSteps: hostSteps \"off\": expected sandboxed or unsandboxed"},
		},
		{
			name: "kubernetes block missing",
			in:   "apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: kubernetes\nclasses:\n  - name: a\n    gres: gpu:a100:8\n    targets: [sm_80]\n",
			want: []string{
				"1:1 kubernetes: engine: kubernetes needs a kubernetes: block",
				"5:9 classes[0].product: missing classes[0].product",
			},
		},
		{
			name: "kubernetes problems",
			in: "apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: kubernetes\nkubernetes:\n  namespace: Bad_NS\n  registry: reg.example/x:tag\n  scheduleTimeout: 1s\n" +
				"classes:\n  - name: a\n    product: has space\n    gres: gpu:a100:8\n    gpus: 4\n    nodeLabels: {nvidia.com/gpu.product: x, bad/key/x: y}\n    targets: [sm_80]\n" +
				"  - name: b\n    product: NVIDIA-H100-80GB-HBM3\n    targets: [sm_90]\n",
			want: []string{
				"4:1 kubernetes.image: missing kubernetes.image",
				"5:14 kubernetes.namespace: expected a DNS label",
				"6:13 kubernetes.registry: expected REGISTRY/REPOSITORY",
				"7:20 kubernetes.scheduleTimeout: expected at least 10s",
				"10:14 classes[0].product: expected a label value",
				"12:11 classes[0].gpus: but gres",
				"13:42 classes[0].nodeLabels.nvidia.com/gpu.product: is the class's product",
				"13:56 classes[0].nodeLabels.bad/key/x: expected a Kubernetes label key",
				"15:9 classes[1].gpus: gives no GPU count",
			},
		},
		{name: "tag", in: head + "classes: !!str x\n", want: []string{"5:10 : YAML tag !!str"}},
		{name: "empty", in: "\n", want: []string{"1:1 : empty file: expected a fleet file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fleet.Parse("fleet.yaml", []byte(tt.in))
			var probs pipeline.Problems
			if !errors.As(err, &probs) {
				t.Fatalf("err = %v, want pipeline.Problems", err)
			}
			if len(probs) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%v", len(probs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if i >= len(probs) {
					break
				}
				p := probs[i]
				got := fmt.Sprintf("%d:%d %s: %s", p.Line, p.Col, p.Path, p.Message)
				pos, rest, _ := strings.Cut(w, " ")
				path, frag, _ := strings.Cut(rest, " ")
				if !strings.HasPrefix(got, pos+" "+path+" ") || !strings.Contains(p.Message, frag) {
					t.Errorf("problem %d = %q, want %q", i, got, w)
				}
			}
		})
	}
}
