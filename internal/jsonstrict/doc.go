// Package jsonstrict checks JSON documents that others wrote before
// gpuattest decodes them: well-formed JSON (RFC 8259) in valid UTF-8, no
// object with the same key twice, nesting no deeper than a limit. Go's
// encoding/json keeps the last of two equal keys, other decoders the
// first, so a document with both could mean one thing to a signer and
// another to a verifier; this package refuses it instead.
//
// Errors are *Error values that name the line, column and field path of
// the problem.
package jsonstrict
