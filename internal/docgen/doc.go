// Package docgen holds the generators of the reference pages in docs/ that
// are derived from an artifact of the repository, run as tests: with
// -update a test rewrites its page, without it the test fails when the
// checked-in page is stale. docs/pipeline-fields.md comes from
// schemas/pipeline.schema.json (itself generated from the pipeline types,
// so run go generate for the schema first); the CLI reference, docs/cli,
// is generated in cmd/gpuattest from the cobra commands. TestDocLinks
// checks that the links between README.md, bench/README.md and docs/ resolve.
package docgen

//go:generate go test . -run ^TestPipelineFields$ -update
