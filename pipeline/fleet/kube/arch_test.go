package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

// TestBuildSelectsArch: a class that names its arch selects the nodes
// the kubelet labels with it; one that names none adds no arch label.
func TestBuildSelectsArch(t *testing.T) {
	for _, tt := range []struct {
		arch string
		want map[string]string
	}{
		{arch: "arm64", want: map[string]string{fleet.ProductLabel: "NVIDIA-A100-SXM4-80GB", "pool": "gpu", ArchLabel: "arm64"}},
		{arch: "", want: map[string]string{fleet.ProductLabel: "NVIDIA-A100-SXM4-80GB", "pool": "gpu"}},
	} {
		req := request()
		req.Selectors.Arch = tt.arch
		m, err := Build(req, Config{Namespace: "gpu", Image: "reg/img@sha256:ab"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, m.Job.Spec.Template.Spec.NodeSelector); diff != "" {
			t.Errorf("arch %q: nodeSelector (-want +got):\n%s", tt.arch, diff)
		}
	}
}

// TestArchLabelIsTheClassArch: the arch label is the class's arch:, not
// one of its nodeLabels.
func TestArchLabelIsTheClassArch(t *testing.T) {
	_, err := fleet.Parse("fleet.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: kubernetes\nkubernetes: {image: i, registry: r.example/s}\n"+
		"classes:\n  - {name: gh, product: NVIDIA-GH200-480GB, gpus: 1, targets: [sm_90], nodeLabels: {kubernetes.io/arch: arm64}}\n"))
	if err == nil || !strings.Contains(err.Error(), "give it as arch:") {
		t.Errorf("nodeLabels with %s: %v, want it refused with a hint to use arch:", ArchLabel, err)
	}
}
