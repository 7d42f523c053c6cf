package attest

import (
	"encoding/json"

	"github.com/gpuattest/gpuattest/internal/jsonstrict"
)

// predicateSchema is the published JSON Schema of the predicate.
const predicateSchema = "https://gpuattest.dev/schemas/predicate.schema.json"

// CheckPredicate checks a predicate of type ValidationPredicateType the
// way gpuattest reads every document (strictly, then Validate), so that
// gpuattest never signs a predicate that does not match its published
// schema (schemas/predicate.schema.json); predicates of other types are
// not checked. The error is a problem.List naming every field at fault.
func CheckPredicate(predicateType string, predicate json.RawMessage) error {
	if predicateType != ValidationPredicateType {
		return nil
	}
	var p ValidationPredicate
	probs := jsonstrict.Read("predicate", predicate, MaxStatementDepth, &p)
	if len(probs) > 0 {
		probs[len(probs)-1].Hint = "the predicate's format is " + predicateSchema
	}
	return probs.Err()
}
