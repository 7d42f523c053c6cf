package gpuevidence

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestScratchRIM(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*/*.xml")
	f2, _ := filepath.Glob("testdata/*/*/*/*.xml")
	f3, _ := filepath.Glob("testdata/nvtrust/*.swidtag")
	files = append(append(files, f2...), f3...)
	for _, f := range files {
		b, _ := os.ReadFile(f)
		r, err := ParseRIM(filepath.Base(f), b)
		if err != nil {
			t.Log(f, err)
			continue
		}
		errs := r.Verify(NVIDIARIMRoot(), time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
		t.Log(f, r.Version, len(r.Measurements), errs)
	}
}
