package main

import (
	"encoding/json"
	"testing"

	"github.com/gpuattest/gpuattest/attest/verify"
)

// TestVerifyExit checks that the CLI, not the library, maps each kind of
// verification failure to README's exit code.
func TestVerifyExit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		failure verify.Failure
		want    int
	}{
		{verify.FailureNone, 0},
		{verify.FailureError, 1},
		{verify.FailureSignature, 10},
		{verify.FailureSubject, 11},
		{verify.FailurePolicy, 12},
	}
	for _, tt := range tests {
		if got := verifyExit(tt.failure); got != tt.want {
			t.Errorf("verifyExit(%s) = %d, want %d", tt.failure, got, tt.want)
		}
	}
}

// TestVerifyOutputJSON checks that -o json carries the failure kind and
// the exit code next to each other.
func TestVerifyOutputJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(verifyOutput{Report: &verify.Report{Failure: verify.FailureSubject}, ExitCode: 11})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Failure  string `json:"failure"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Failure != "subject" || got.ExitCode != 11 {
		t.Errorf("json = %s", b)
	}
}
