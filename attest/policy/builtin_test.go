package policy_test

import (
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/pipeline"
)

// TestBuiltinNamesAgreeWithTheSpec: lint accepts the built-in policy
// names pipeline.BuiltinPolicies lists for a benchmark's reference.policy;
// each must be one Builtin opens, and Builtin's own hint must name them
// all, so lint and the run never disagree on a name.
func TestBuiltinNamesAgreeWithTheSpec(t *testing.T) {
	t.Parallel()
	want := []string{policy.BuiltinDefault, policy.BuiltinCPUTier}
	if strings.Join(pipeline.BuiltinPolicies, ",") != strings.Join(want, ",") {
		t.Fatalf("pipeline.BuiltinPolicies = %q, attest/policy has %q", pipeline.BuiltinPolicies, want)
	}
	for _, name := range pipeline.BuiltinPolicies {
		if _, err := policy.Builtin(policy.BuiltinPrefix+name, false); err != nil {
			t.Errorf("builtin:%s: %v", name, err)
		}
	}
	_, err := policy.Builtin(policy.BuiltinPrefix+"no-such", false)
	if err == nil {
		t.Fatal("builtin:no-such opened")
	}
	for _, name := range pipeline.BuiltinPolicies {
		if !strings.Contains(err.Error(), policy.BuiltinPrefix+name) {
			t.Errorf("the unknown-name hint does not name builtin:%s: %v", name, err)
		}
	}
}
