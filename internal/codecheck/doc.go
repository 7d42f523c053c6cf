// Package codecheck holds repository-wide checks of the source itself, run as
// tests: no function in non-test code is longer than [MaxFuncLines] lines,
// and go.mod has no replace directive (no forked dependencies).
package codecheck

// MaxFuncLines is the longest a function in non-test code may be, counted
// from its func keyword to its closing brace.
const MaxFuncLines = 100
