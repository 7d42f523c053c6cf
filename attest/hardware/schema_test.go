package hardware

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeChecksDigest(t *testing.T) {
	t.Parallel()
	rec := &Record{Host: Host{CPUModel: "test cpu", CPUCores: 2}, GPUs: []GPU{}, Reason: "no NVIDIA driver"}
	d, err := ComputeDigest(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Digest = d
	raw, _ := json.Marshal(rec)
	got, err := Decode(raw)
	if err != nil || got.Digest != d || got.Host.CPUModel != "test cpu" {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	edited := strings.Replace(string(raw), "test cpu", "other cpu", 1)
	if _, err := Decode([]byte(edited)); err == nil || !strings.Contains(err.Error(), "does not match its content") {
		t.Errorf("an edited record decoded: %v", err)
	}
	if _, err := Decode([]byte(`{"simulated": false}`)); err == nil {
		t.Error("a record without host, gpus and digest decoded")
	}
}
