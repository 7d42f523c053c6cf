// Package schemas generates the JSON Schemas published in this folder
// (pipeline, lock, results, hardware record, predicate, policy) from the
// Go types that read those documents. The schemas are artifacts for
// editors and third parties: gpuattest itself runs no JSON Schema engine,
// its readers decode strictly and then Validate. The spec types import
// nothing for this: what a Go type does not say (the YAML forms of the
// spec's typed scalars, the known CUDA targets) the generator maps here.
// A test fails when a checked-in schema is stale.
package schemas

//go:generate go test . -run ^TestSchemasUpToDate$ -update
