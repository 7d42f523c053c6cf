//go:build linux && cgo

package gpu

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/hardware"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	sim, err := Collect(t.Context(), WithFakeGPU("h100:2"))
	if err != nil {
		t.Fatal(err)
	}
	none, err := Collect(t.Context(), WithSource(NVML(t.TempDir()+"/nope.so")))
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*hardware.Record{sim, none} {
		raw, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := hardware.Decode(raw)
		if err != nil {
			t.Fatalf("hardware.Decode(%s): %v", raw, err)
		}
		if got.Digest != rec.Digest {
			t.Errorf("digest %s, want %s", got.Digest, rec.Digest)
		}
	}

	raw, _ := json.Marshal(sim)
	tests := []struct {
		name    string
		edit    func(string) string
		wantErr string
	}{
		{"tampered", func(s string) string {
			return strings.Replace(s, `"power_limit_watts":700`, `"power_limit_watts":500`, 1)
		}, "does not match its content"},
		{"bad digest", func(s string) string { return strings.Replace(s, `"digest":"sha256:`, `"digest":"md5:`, 1) }, "digest: "},
		{"unknown field", func(s string) string { return strings.Replace(s, `"simulated":true`, `"simulated":true,"extra":1`, 1) }, "extra"},
		{"zero as string", func(s string) string { return strings.Replace(s, `"index":0`, `"index":"0"`, 1) }, "gpus[0].index"},
		{"not json", func(string) string { return "{" }, "hardware record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := tt.edit(string(raw))
			if edited == string(raw) {
				t.Fatal("edit changed nothing")
			}
			_, err := hardware.Decode([]byte(edited))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}
