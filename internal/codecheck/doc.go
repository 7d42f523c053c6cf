// Package codecheck holds repository-wide checks of the source itself, run as
// tests: no function in non-test code is longer than [MaxFuncLines] lines,
// go.mod has no replace directive (no forked dependencies), no exported
// identifier of attest/ names an internal/ type (TestPublicAPINamesNoInternal), and the
// portable packages build and vet without cgo for darwin, windows and
// linux on amd64 and arm64 (TestCrossBuild).
package codecheck

// MaxFuncLines is the longest a function in non-test code may be, counted
// from its func keyword to its closing brace.
const MaxFuncLines = 100
