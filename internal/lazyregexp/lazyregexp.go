// Package lazyregexp is a regular expression compiled on its first use,
// not in the init of the package that declares it: every gpuattest
// process runs the init of every package it links, whatever its command,
// and `gpuattest verify` uses few of them. (The Go toolchain has the same
// helper for the same reason, as cmd/go's internal/lazyregexp.)
package lazyregexp

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on its first use. Its methods
// are those of regexp.Regexp the project calls.
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

// New returns the expression expr, to be compiled on first use; it
// panics then if expr does not compile (expr is a constant of the
// program, as with regexp.MustCompile).
func New(expr string) *Regexp { return &Regexp{expr: expr} }

// Regexp returns the compiled expression.
func (r *Regexp) Regexp() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

// String returns the source text of the expression.
func (r *Regexp) String() string { return r.expr }

// MatchString is regexp.Regexp's.
func (r *Regexp) MatchString(s string) bool { return r.Regexp().MatchString(s) }

// FindStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.Regexp().FindStringSubmatch(s) }

// FindAllStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.Regexp().FindAllStringSubmatch(s, n)
}

// ReplaceAllLiteralString is regexp.Regexp's.
func (r *Regexp) ReplaceAllLiteralString(src, repl string) string {
	return r.Regexp().ReplaceAllLiteralString(src, repl)
}
