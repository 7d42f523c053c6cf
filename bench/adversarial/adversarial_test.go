package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(spawnerEnv) == "1" {
		if err := serveSpawner(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "spawner: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCampaign runs the short campaign (the CI mode) with the fixed seed
// against gpuattest built from this tree: every category must answer
// every case right, within the goals where they apply.
func TestCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gpuattest a few hundred times")
	}
	bin, err := buildGpuattest(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tables, err := campaign(t.Context(), config{seed: 14, bin: bin}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != len(categories()) {
		t.Fatalf("%d categories ran, want %d", len(tables), len(categories()))
	}
	for _, r := range tables {
		if r.wrong > 0 {
			t.Errorf("%s: %d of %d cases wrong", r.category, r.wrong, r.cases)
		}
	}
}
