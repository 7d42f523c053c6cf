package collect_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/internal/tinyimage"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// TestFileImageNamedByDigest runs a locked pipeline whose image is an OCI
// layout directory, under bwrap and under docker, and checks that neither
// the provenance nor the validation predicate holds a local path: the
// image is named by its digests (pkg:oci/NAME@sha256%3A...), with the
// lock's config digest and platform.
func TestFileImageNamedByDigest(t *testing.T) {
	base := t.TempDir()
	img := tinyimage.Image(t)
	if _, err := layout.Write(filepath.Join(base, "images", "tiny"), mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img})); err != nil {
		t.Fatal(err)
	}
	manifest, _ := img.Digest()
	config, _ := img.ConfigName()
	hw := &hardware.Record{GPUs: []hardware.GPU{}, Reason: "no GPU in this test"}
	if err := hw.Seal(); err != nil {
		t.Fatal(err)
	}

	for _, kind := range []string{"bwrap", "docker"} {
		t.Run(kind, func(t *testing.T) {
			var r runner.Runner
			switch kind {
			case "bwrap":
				testenv.RequireTool(t, "bwrap")
				b, err := runner.NewBwrap(runner.WithBwrapCacheDir(t.TempDir()))
				if err != nil {
					t.Fatal(err)
				}
				r = b
			case "docker":
				testenv.RequireDocker(t)
				d, err := runner.NewDocker(runner.WithDockerNamePrefix("gpuattest-collect-test-"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = exec.Command("docker", "rmi", config.String()).Run() })
				r = d
			}
			dir := filepath.Join(base, kind)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "p.yaml")
			yaml := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: offline\nrelease: true\nrunner: " + kind + "\n" +
				"images:\n  tiny: oci-layout:../images/tiny\n" +
				"steps:\n  - {id: hello, image: tiny, run: 'echo hello > out.txt', outputs: [out.txt]}\n"
			if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := pipeline.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			lock, _, err := image.LockImages(t.Context(), p.Images, nil, false, image.WithBaseDir(p.Dir))
			if err != nil {
				t.Fatal(err)
			}
			pinner, err := image.NewPinner(t.Context(), p.Images, lock, image.WithLocked(), image.WithBaseDir(p.Dir))
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "run")
			res, err := engine.Run(t.Context(), p, engine.WithOutDir(out), engine.WithoutCache(), engine.WithRunner(r),
				engine.WithImageResolver(pinner.Pin), engine.WithHardware(hw))
			if err != nil || !res.Passed() {
				t.Fatalf("run: %v %+v", err, res.Record.Step("hello"))
			}
			run, err := collect.FromRunDir(out, p)
			if err != nil {
				t.Fatal(err)
			}
			if run.PipelinePath != "p.yaml" {
				t.Errorf("pipeline path %q, want p.yaml (relative to the pipeline's root)", run.PipelinePath)
			}
			want := []attest.Image{{
				Name: "tiny", URI: "pkg:oci/tiny@sha256%3A" + manifest.Hex, Digest: manifest.String(),
				ConfigDigest: config.String(), Platform: "linux/amd64",
			}}
			if diff := cmp.Diff(want, run.Images); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
			prov, err := attest.ProvenanceFor(run)
			if err != nil {
				t.Fatal(err)
			}
			pred, err := attest.ValidationPredicateFor(run)
			if err != nil {
				t.Fatal(err)
			}
			for what, v := range map[string]any{"provenance": prov, "validation predicate": pred} {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				for _, leak := range []string{base, "oci-layout:", "/images/tiny"} {
					if strings.Contains(string(b), leak) {
						t.Errorf("the %s holds %q:\n%s", what, leak, b)
					}
				}
			}
			var img *attest.ResourceDescriptor
			for i, d := range prov.BuildDefinition.ResolvedDependencies {
				if d.Name == "tiny" {
					img = &prov.BuildDefinition.ResolvedDependencies[i]
				}
			}
			wantDesc := &attest.ResourceDescriptor{
				Name: "tiny", URI: "pkg:oci/tiny@sha256%3A" + manifest.Hex, Digest: map[string]string{"sha256": manifest.Hex},
				Annotations: map[string]string{"config_digest": config.String(), "platform": "linux/amd64"},
			}
			if diff := cmp.Diff(wantDesc, img); diff != "" {
				t.Errorf("the image's resolved dependency (-want +got):\n%s", diff)
			}
		})
	}
}
