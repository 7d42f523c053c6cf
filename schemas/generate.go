package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/engines"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/suite"

	"github.com/invopop/jsonschema"
)

// IDs of the published schemas.
const (
	PipelineID  = "https://gpuattest.dev/schemas/pipeline.schema.json"
	LockID      = "https://gpuattest.dev/schemas/lock.schema.json"
	ResultsID   = "https://gpuattest.dev/schemas/results.schema.json"
	HardwareID  = "https://gpuattest.dev/schemas/hardware.schema.json"
	PredicateID = "https://gpuattest.dev/schemas/predicate.schema.json"
	PolicyID    = "https://gpuattest.dev/schemas/policy.schema.json"
	FleetID     = "https://gpuattest.dev/schemas/fleet.schema.json"
)

// Generators maps each schema's file name in this folder to the function
// that generates its bytes.
var Generators = map[string]func() ([]byte, error){
	"pipeline.schema.json":  Pipeline,
	"lock.schema.json":      Lock,
	"results.schema.json":   Results,
	"hardware.schema.json":  Hardware,
	"predicate.schema.json": Predicate,
	"policy.schema.json":    Policy,
	"fleet.schema.json":     Fleet,
}

// Fleet generates the schema of a fleet file (YAML field names): the
// common fields, then each registered engine's settings as that engine
// declares them (their text and defaults are the engine's), each class's
// targets pinned to the known architectures, its gres to a typed GPU
// gres.
func Fleet() ([]byte, error) {
	r := &jsonschema.Reflector{FieldNameTag: "yaml", ExpandedStruct: true, Mapper: specScalarRef, Namer: engineTypeName}
	s := r.Reflect(&fleet.Spec{})
	var engines, polls []string
	for _, f := range fleet.Factories() {
		engines = append(engines, f.Name())
		polls = append(polls, fmt.Sprintf("%s on %s", fleet.FormatDuration(f.DefaultPollInterval()), f.Name()))
		es := r.ReflectFromType(fleet.ConfigTypes()[f.Name()])
		if d, ok := f.Config().(fleet.DocumentedDefaults); ok {
			for path, def := range d.Defaults() {
				p := schemaAt(es, path)
				if p == nil {
					return nil, fmt.Errorf("engine %s documents a default for %s, which its settings lack", f.Name(), path)
				}
				p.Description += " (" + def + " when omitted)"
			}
		}
		for k, v := range es.Properties.FromOldest() {
			s.Properties.Set(k, v)
			if err := s.Properties.MoveBefore(k, "pollInterval"); err != nil {
				return nil, err
			}
		}
		for k, v := range es.Definitions {
			s.Definitions[k] = v
		}
	}
	if e, ok := s.Properties.Get("engine"); ok {
		for _, n := range engines {
			e.Enum = append(e.Enum, n)
		}
	}
	if p, ok := s.Properties.Get("pollInterval"); ok {
		p.Description = "least time between two polls of the scheduler (" + strings.Join(polls, ", ") + " when omitted; 1s at least)"
	}
	for _, t := range specScalars {
		if ref, _ := json.Marshal(s); bytes.Contains(ref, []byte(`"#/$defs/`+t.Name()+`"`)) {
			s.Definitions[t.Name()] = specScalar(t)
		}
	}
	s.ID = FleetID
	s.Title = "gpuattest fleet"
	s.Description = "Where a pipeline's GPU steps run: the engine, its settings and one entry per node class (apiVersion " + pipeline.APIVersion + ")."
	if c, ok := s.Definitions["Class"]; ok {
		if t, ok := c.Properties.Get("targets"); ok {
			enum := make([]any, len(pipeline.Architectures))
			for i, a := range pipeline.Architectures {
				enum[i] = a
			}
			t.Items = &jsonschema.Schema{Type: "string", Enum: enum}
			t.UniqueItems = true
		}
		if g, ok := c.Properties.Get("gres"); ok {
			g.Pattern = fleet.GresPattern
		}
	}
	return marshal(s)
}

// schemaAt is the schema of the field at the dotted path in s, following
// $refs to s's definitions; nil when there is none.
func schemaAt(s *jsonschema.Schema, path string) *jsonschema.Schema {
	cur := s
	for part := range strings.SplitSeq(path, ".") {
		if ref, ok := strings.CutPrefix(cur.Ref, "#/$defs/"); ok {
			cur = s.Definitions[ref]
		}
		if cur == nil || cur.Properties == nil {
			return nil
		}
		next, ok := cur.Properties.Get(part)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// engineTypeName names a schema definition: an engine's own types carry
// their package's name (KubeSettings), so two engines' types never
// share one.
func engineTypeName(t reflect.Type) string {
	pkg := t.PkgPath()
	if i := strings.LastIndex(pkg, "/pipeline/fleet/"); i >= 0 {
		name := pkg[i+len("/pipeline/fleet/"):]
		return strings.ToUpper(name[:1]) + name[1:] + t.Name()
	}
	return t.Name()
}

// Pipeline generates the schema of a pipeline file (YAML field names).
func Pipeline() ([]byte, error) {
	r := &jsonschema.Reflector{FieldNameTag: "yaml", ExpandedStruct: true, Mapper: specScalarRef}
	s := r.Reflect(&pipeline.Pipeline{})
	for _, t := range specScalars {
		s.Definitions[t.Name()] = specScalar(t)
	}
	s.ID = PipelineID
	s.Title = "gpuattest pipeline"
	s.Description = "A gpuattest pipeline: pinned CUDA targets, images and a DAG of steps (apiVersion " + pipeline.APIVersion + ")."
	if t, ok := s.Properties.Get("targets"); ok {
		enum := make([]any, len(pipeline.Architectures))
		for i, a := range pipeline.Architectures {
			enum[i] = a
		}
		t.Items = &jsonschema.Schema{Type: "string", Enum: enum}
		t.UniqueItems = true
	}
	if im, ok := s.Properties.Get("images"); ok {
		im.AdditionalProperties = &jsonschema.Schema{Type: "string", MinLength: ptr(uint64(1))}
	}
	applyFields(s, "Pipeline", pipelineFields)
	return marshal(s)
}

// specScalars are the spec's types with YAML forms of their own.
var specScalars = []reflect.Type{
	reflect.TypeFor[pipeline.Size](), reflect.TypeFor[pipeline.Percent](), reflect.TypeFor[pipeline.Duration](),
	reflect.TypeFor[pipeline.Command](), reflect.TypeFor[pipeline.Repeats](), reflect.TypeFor[pipeline.Rounds](),
}

// specScalarRef refers a field of one of specScalars to its definition.
func specScalarRef(t reflect.Type) *jsonschema.Schema {
	if slices.Contains(specScalars, t) {
		return &jsonschema.Schema{Ref: "#/$defs/" + t.Name()}
	}
	return nil
}

// specScalar maps the spec's typed scalars, which have YAML forms of
// their own, to their schemas.
func specScalar(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[pipeline.Size]():
		return &jsonschema.Schema{
			Description: "a byte size such as 8GiB, 512MiB or 2GB (units are case-insensitive), or a byte count",
			OneOf: []*jsonschema.Schema{
				{Type: "string", Pattern: `^\s*[0-9]+(\.[0-9]+)?\s*([kKmMgGtT][iI]?[bB]?|[bB])?\s*$`},
				{Type: "integer", Minimum: json.Number("0")},
			},
		}
	case reflect.TypeFor[pipeline.Percent]():
		return &jsonschema.Schema{
			Description: "a percentage such as 3% or a fraction such as 0.03",
			OneOf: []*jsonschema.Schema{
				{Type: "string", Pattern: `^\s*[0-9]+(\.[0-9]+)?%?\s*$`},
				{Type: "number", Minimum: json.Number("0")},
			},
		}
	case reflect.TypeFor[pipeline.Duration]():
		return &jsonschema.Schema{
			Type:        "string",
			Pattern:     `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`,
			Description: "a duration such as 90s, 10m or 1h30m",
		}
	case reflect.TypeFor[pipeline.Command]():
		return &jsonschema.Schema{
			Description: "a shell string (run by /bin/sh -ec) or an argv list",
			OneOf: []*jsonschema.Schema{
				{Type: "string", MinLength: ptr(uint64(1))},
				{Type: "array", MinItems: ptr(uint64(1)), Items: &jsonschema.Schema{Type: "string"}},
			},
		}
	case reflect.TypeFor[pipeline.Repeats]():
		return &jsonschema.Schema{
			Description: "timed iterations per case: a count, or auto to stop each case once its median is known to precision (or at maxTime)",
			OneOf: []*jsonschema.Schema{
				{Type: "integer", Minimum: json.Number("1")},
				{Type: "string", Enum: []any{pipeline.RepeatsAuto}},
			},
		}
	case reflect.TypeFor[pipeline.Rounds]():
		return &jsonschema.Schema{
			Description: "pairs of reference and candidate invocations: auto (the default) adds pairs until the gate decides every case or maxRounds or roundsTime runs out, a count runs that many and judges once",
			OneOf: []*jsonschema.Schema{
				{Type: "integer", Minimum: json.Number("2"), Maximum: json.Number("2000")},
				{Type: "string", Enum: []any{pipeline.RoundsAuto}},
			},
		}
	}
	return nil
}

// Lock generates the schema of gpuattest.lock.
func Lock() ([]byte, error) {
	r := &jsonschema.Reflector{ExpandedStruct: true}
	s := r.Reflect(&image.Lock{})
	applyFields(s, "Lock", lockFields)
	s.ID = LockID
	s.Title = "gpuattest lock"
	s.Description = "gpuattest.lock: every image of a pipeline, by name, resolved to digests (apiVersion " + image.LockAPIVersion + ")."
	return marshal(s)
}

// Results generates the schema of a results file.
func Results() ([]byte, error) {
	s := (&jsonschema.Reflector{}).Reflect(&suite.Results{})
	applyFields(s, "Results", resultsFields)
	s.ID = ResultsID
	s.Title = "gpuattest results"
	s.Description = "Test and benchmark results written by the gpuattest kernel harness (or any suite) and judged by gpuattest."
	return marshal(s)
}

// Hardware generates the schema of a hardware record.
func Hardware() ([]byte, error) {
	s := (&jsonschema.Reflector{}).Reflect(&hardware.Record{})
	applyFields(s, "Record", map[string]field{
		"Record.digest":          {Pattern: `^sha256:[0-9a-f]{64}$`},
		"GPU.compute_capability": {Pattern: `^[0-9]+\.[0-9]$`},
	})
	s.ID = HardwareID
	s.Title = "gpuattest hardware record"
	s.Description = "The host, NVIDIA driver and GPUs a run used, as NVML reports them (simulated: true when they come from GPUATTEST_FAKE_GPU). A metric a GPU does not report is absent, never zero."
	return marshal(s)
}

// Predicate generates the schema of the validation predicate.
func Predicate() ([]byte, error) {
	s := (&jsonschema.Reflector{Anonymous: true}).Reflect(&attest.ValidationPredicate{})
	applyFields(s, "ValidationPredicate", predicateFields)
	s.ID = PredicateID
	s.Title = "gpuattest GPU validation predicate (" + attest.ValidationPredicateType + ")"
	return marshalNoEscape(s)
}

// Policy generates the schema of a policy file.
func Policy() ([]byte, error) {
	s := (&jsonschema.Reflector{Anonymous: true}).Reflect(&policy.Policy{})
	applyFields(s, "Policy", policyFields)
	s.ID = PolicyID
	s.Title = "gpuattest verification policy"
	return marshalNoEscape(s)
}

// marshal renders s as indented JSON with a final newline.
func marshal(s *jsonschema.Schema) ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// marshalNoEscape is marshal without HTML escaping (<, >, &).
func marshalNoEscape(s *jsonschema.Schema) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func ptr[T any](v T) *T { return &v }

// field is what the generator adds to a field's reflected schema.
type field struct {
	Type             string
	Description      string
	Enum             []any
	Pattern          string
	MinLength        uint64
	Minimum          json.Number
	ExclusiveMinimum json.Number
	Maximum          json.Number
	MinItems         uint64
}

// applyFields adds fields (keyed "GoType.name") to the properties of
// root (an expanded struct of type rootType) and of its definitions; a key that names no property panics, so a
// renamed field cannot drop its constraints silently.
func applyFields(root *jsonschema.Schema, rootType string, fields map[string]field) {
	for key, f := range fields {
		typ, name, _ := strings.Cut(key, ".")
		s := root.Definitions[typ]
		if typ == rootType && root.Properties != nil {
			s = root // an expanded struct
		}
		var p *jsonschema.Schema
		if s != nil && s.Properties != nil {
			p, _ = s.Properties.Get(name)
		}
		if p == nil {
			panic("schemas: no property " + key)
		}
		if f.Description != "" {
			p.Description = f.Description
		}
		target := p
		if p.Type == "array" && p.Items != nil && (f.Enum != nil || f.Pattern != "" || f.Minimum != "" || f.Maximum != "" || f.MinLength > 0) {
			target = p.Items
		}
		if f.Enum != nil {
			target.Enum = f.Enum
		}
		if f.Pattern != "" {
			target.Pattern = f.Pattern
		}
		if f.Type != "" {
			p.Type = f.Type
		}
		if f.MinLength > 0 {
			target.MinLength = ptr(f.MinLength)
		}
		if f.Minimum != "" {
			target.Minimum = f.Minimum
		}
		if f.ExclusiveMinimum != "" {
			target.ExclusiveMinimum = f.ExclusiveMinimum
		}
		if f.Maximum != "" {
			target.Maximum = f.Maximum
		}
		if f.MinItems > 0 {
			p.MinItems = ptr(f.MinItems)
		}
	}
}
