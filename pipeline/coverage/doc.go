// Package coverage reads the coverage reports test runners write (lcov
// .info, Cobertura XML as pytest-cov and gcovr write it, Go
// coverprofiles) into totals: lines and, where the format gives them,
// branches. Every reader bounds what it reads (size, XML depth and
// tokens; an XML document type declaration, which could declare
// entities, is refused), and bad input is an error that says where,
// never a panic.
package coverage
