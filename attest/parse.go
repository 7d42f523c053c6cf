package attest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/internal/jsonstrict"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// DefaultMaxStatementSize is the largest statement (predicate and
// subjects) gpuattest verify accepts by default and gpuattest sign signs
// by default, in bytes.
const DefaultMaxStatementSize = 16 << 20

// MaxStatementDepth is the deepest nesting of objects and arrays a
// statement may have (the predicate's included).
const MaxStatementDepth = 64

// statementFields are a statement's fields, by their exact JSON names.
var statementFields = []string{"_type", "subject", "predicateType", "predicate"}

// subjectFields are the fields of a subject (an in-toto v1 resource
// descriptor), by their exact JSON names.
var subjectFields = map[string]func(json.RawMessage) error{
	"name":             decodeAs[string]("a string"),
	"uri":              decodeAs[string]("a string"),
	"digest":           decodeAs[map[string]string]("an object of strings"),
	"content":          decodeContent,
	"downloadLocation": decodeAs[string]("a string"),
	"mediaType":        decodeAs[string]("a string"),
	"annotations":      decodeAs[map[string]any]("an object"),
}

// ParseStatement decodes and validates an in-toto Statement v1 (or v0.1,
// as cosign attest-blob writes it). It is strict, and it is the one
// parser both signing and verifying use, so that gpuattest never signs
// what it would refuse to verify: well-formed JSON in UTF-8 with no key
// twice in any object (the predicate's included) and no nesting deeper
// than MaxStatementDepth; exactly the fields _type, subject,
// predicateType and predicate, spelled as in-toto spells them (names are
// case-sensitive); subjects with in-toto's resource descriptor fields and
// a digest each; a predicate that is a JSON object. Every problem is
// reported with its field path.
func ParseStatement(b []byte) (*Statement, error) {
	// One scan checks the statement and splits it into its fields.
	top, err := jsonstrict.CheckObject(b, MaxStatementDepth)
	if err != nil {
		return nil, fmt.Errorf("invalid in-toto statement: %w", err)
	}
	if errs := checkStatementFields(top); len(errs) > 0 {
		return nil, fmt.Errorf("invalid in-toto statement: %w", errors.Join(errs...))
	}
	// The fields are checked: fill the statement from them, so that the
	// predicate (almost all of a large statement) is not decoded again.
	s := Statement{Predicate: top["predicate"]}
	for f, dst := range map[string]any{"_type": &s.Type, "subject": &s.Subject, "predicateType": &s.PredicateType} {
		if err := json.Unmarshal(top[f], dst); err != nil {
			return nil, fmt.Errorf("invalid in-toto statement: %s: %w", f, err)
		}
	}
	if err := validateInToto(&s); err != nil {
		return nil, fmt.Errorf("invalid in-toto statement: %w", err)
	}
	return &s, nil
}

// checkStatementFields checks the statement's fields and the subjects',
// their names and types.
func checkStatementFields(top map[string]json.RawMessage) []error {
	errs := unknownFields("", top, statementFields)
	for _, f := range statementFields {
		if _, ok := top[f]; !ok {
			errs = append(errs, fmt.Errorf("%s: missing", f))
		}
	}
	for _, f := range []string{"_type", "predicateType"} {
		if raw, ok := top[f]; ok {
			if err := decodeAs[string]("a string")(raw); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f, err))
			}
		}
	}
	if raw, ok := top["predicate"]; ok {
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
			errs = append(errs, errors.New("predicate: expected a JSON object"))
		}
	}
	if raw, ok := top["subject"]; ok {
		errs = append(errs, checkSubjects(raw)...)
	}
	return errs
}

func checkSubjects(raw json.RawMessage) []error {
	var subjects []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &subjects); err != nil {
		return []error{errors.New("subject: expected an array of objects")}
	}
	names := make([]string, 0, len(subjectFields))
	for k := range subjectFields {
		names = append(names, k)
	}
	var errs []error
	for i, sub := range subjects {
		path := fmt.Sprintf("subject[%d]", i)
		errs = append(errs, unknownFields(path+".", sub, names)...)
		for _, k := range sortedKeys(sub) {
			if decode, ok := subjectFields[k]; ok {
				if err := decode(sub[k]); err != nil {
					errs = append(errs, fmt.Errorf("%s.%s: %w", path, k, err))
				}
			}
		}
	}
	return errs
}

// unknownFields reports the keys of m that are not in known, with a hint
// when one is a known name spelled otherwise.
func unknownFields(prefix string, m map[string]json.RawMessage, known []string) []error {
	var errs []error
	for _, k := range sortedKeys(m) {
		if slices.Contains(known, k) {
			continue
		}
		err := fmt.Errorf("%s%s: unknown field", prefix, k)
		for _, want := range known {
			if strings.EqualFold(strings.ReplaceAll(k, "_", ""), strings.ReplaceAll(want, "_", "")) {
				err = fmt.Errorf("%s%s: unknown field\nhint: in-toto spells it %q (field names are case-sensitive)", prefix, k, want)
			}
		}
		errs = append(errs, err)
	}
	return errs
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeAs returns a check that a value decodes as a T.
func decodeAs[T any](what string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var v T
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || json.Unmarshal(raw, &v) != nil {
			return fmt.Errorf("expected %s", what)
		}
		return nil
	}
}

func decodeContent(raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return errors.New("expected a base64 string")
	}
	if _, err := base64.StdEncoding.DecodeString(s); err != nil {
		return fmt.Errorf("expected a base64 string: %w", err)
	}
	return nil
}

// validateInToto applies in-toto's own rules (statement type, subjects
// with valid digests, predicate type) to s.
func validateInToto(s *Statement) error {
	pb := &intoto.Statement{Type: s.Type, PredicateType: s.PredicateType, Predicate: &structpb.Struct{}}
	for _, sub := range s.Subject {
		pb.Subject = append(pb.Subject, &intoto.ResourceDescriptor{Name: sub.Name, Digest: sub.Digest})
	}
	if err := pb.Validate(); err != nil {
		return err
	}
	if s.Type != StatementType && s.Type != LegacyStatementType {
		return fmt.Errorf("_type %q: expected %q", s.Type, StatementType)
	}
	return nil
}
