package collect_test

import (
	"encoding/json"
	"fmt"
	"slices"

	trpb "github.com/in-toto/attestation/go/predicates/test_result/v0"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gpuattest/gpuattest/attest"
)

// testResultFields are the fields of the test-result v0.1 predicate, as
// the spec lists them (in-toto/attestation spec/predicates/test-result.md).
var testResultFields = []string{"result", "configuration", "url", "passedTests", "warnedTests", "failedTests"}

// checkTestResultSpec checks a test-result statement against the spec:
// its statement and predicate types, only the spec's fields (decoded by
// in-toto's own Go binding, which refuses unknown fields), the required
// result (an enum) and configuration (resource descriptors, each with a
// name and a digest, valid as in-toto's ResourceDescriptor).
func checkTestResultSpec(st *attest.Statement) error {
	if st.Type != attest.StatementType || st.PredicateType != "https://in-toto.io/attestation/test-result/v0.1" {
		return fmt.Errorf("statement type %s, predicate type %s", st.Type, st.PredicateType)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(st.Predicate, &fields); err != nil {
		return err
	}
	for k := range fields {
		if !slices.Contains(testResultFields, k) {
			return fmt.Errorf("predicate field %q: not a field of test-result v0.1 (%v)", k, testResultFields)
		}
	}
	var pb trpb.TestResult
	if err := protojson.Unmarshal(st.Predicate, &pb); err != nil {
		return fmt.Errorf("in-toto's test-result binding refuses the predicate: %w", err)
	}
	if !slices.Contains([]string{"PASSED", "WARNED", "FAILED"}, pb.GetResult()) {
		return fmt.Errorf("result %q: expected PASSED, WARNED or FAILED", pb.GetResult())
	}
	if len(pb.GetConfiguration()) == 0 {
		return fmt.Errorf("configuration: required, empty")
	}
	for i, rd := range pb.GetConfiguration() {
		if err := rd.Validate(); err != nil {
			return fmt.Errorf("configuration[%d]: %w", i, err)
		}
		if rd.GetName() == "" || rd.GetDigest()["sha256"] == "" {
			return fmt.Errorf("configuration[%d]: expected a name and a sha256 digest", i)
		}
	}
	if pb.GetResult() == "FAILED" && len(pb.GetFailedTests()) == 0 {
		return fmt.Errorf("result FAILED names no failed test")
	}
	return nil
}
