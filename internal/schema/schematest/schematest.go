// Package schematest checks in tests that a generated file is up to date.
package schematest

import (
	"bytes"
	"os"
	"testing"
)

// CheckGenerated fails t when the checked-in file at path differs from what
// gen produces now; the message names the go generate command that mends it.
func CheckGenerated(t testing.TB, path string, gen func() ([]byte, error), generate string) {
	t.Helper()
	want, err := gen()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\nhint: run go generate %s", err, generate)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale\nhint: run go generate %s", path, generate)
	}
}
