package problem_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/attest/problem"
)

// paths returns the field path of every problem errors.As finds in err,
// the way a program linking attest/ (and nothing of internal/) reads them.
func paths(t *testing.T, err error) []string {
	t.Helper()
	var probs problem.List
	if !errors.As(err, &probs) {
		t.Fatalf("errors.As(%v, *problem.List) = false", err)
	}
	var out []string
	for _, p := range probs {
		if p.Message == "" {
			t.Errorf("problem at %q has no message", p.Path)
		}
		out = append(out, p.Path)
	}
	return out
}

// TestThirdPartyErrorsAs: the errors of attest/'s readers and Validate
// methods are a problem.List that an outside package can name, find
// with errors.As (also through a wrapping fmt.Errorf) and take apart by
// field path, with the same messages the CLI prints.
func TestThirdPartyErrorsAs(t *testing.T) {
	t.Parallel()
	t.Run("Validate", func(t *testing.T) {
		p := &attest.ValidationPredicate{Result: "maybe", PipelineDigest: "sha256:00"}
		got := paths(t, p.Validate())
		if !slices.Contains(got, "result") || !slices.Contains(got, "pipeline_digest") {
			t.Errorf("paths %q: want result and pipeline_digest", got)
		}
	})
	t.Run("hardware.Decode", func(t *testing.T) {
		_, err := hardware.Decode([]byte(`{"digest":"md5:1","gpus":[{"compute_capability":"nine"}]}`))
		got := paths(t, err)
		for _, want := range []string{"digest", "gpus[0].compute_capability"} {
			if !slices.Contains(got, want) {
				t.Errorf("paths %q: want %s", got, want)
			}
		}
	})
	t.Run("dispatch.DecodeNode wrapped", func(t *testing.T) {
		st := &attest.Statement{PredicateType: dispatch.NodePredicateType, Predicate: []byte(`{"job":"a","result":"maybe"}`)}
		_, err := dispatch.DecodeNode(st)
		if !strings.HasPrefix(err.Error(), "decoding the node statement: ") {
			t.Fatalf("err = %v: want it wrapped", err)
		}
		var probs problem.List
		errors.As(err, &probs)
		i := slices.IndexFunc(probs, func(p problem.Problem) bool { return p.Path == "result" })
		if i < 0 || probs[i].Message != `"maybe": expected passed or failed` {
			t.Errorf("problems %v: want result: \"maybe\": expected passed or failed", probs)
		}
	})
	t.Run("policy.Parse", func(t *testing.T) {
		_, err := policy.Parse("p.yaml", []byte("apiVersion: gpuattest.dev/v0\nkind: Policy\nrules: []\n"))
		var probs problem.List
		if !errors.As(err, &probs) || len(probs) == 0 {
			t.Fatalf("errors.As(%v) found no problems", err)
		}
		if p := probs[0]; p.File != "p.yaml" || p.Path != "apiVersion" || p.Line != 1 {
			t.Errorf("first problem %+v: want p.yaml:1 at apiVersion", p)
		}
	})
}

// A program linking attest/ reads a reader's problems by field path.
func ExampleList() {
	_, err := hardware.Decode([]byte(`{"digest":"md5:1","gpus":[]}`))
	var probs problem.List
	if errors.As(err, &probs) {
		for _, p := range probs {
			fmt.Printf("%s: %s\n", p.Path, p.Message)
		}
	}
	// Output:
	// simulated: missing
	// host: missing
	// digest: "md5:1": expected sha256:<64 hex digits>
}
