// Package jsonpos turns byte offsets in a JSON document, and the offsets
// encoding/json puts in its errors, into the 1-based line:col positions
// that user-facing errors name.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
)

// LineCol returns the 1-based line and column (counted in bytes) of byte
// offset off in data. An offset outside data is clamped to its ends.
func LineCol(data []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(data))))
	pre := data[:off]
	return bytes.Count(pre, []byte{'\n'}) + 1, int(off) - bytes.LastIndexByte(pre, '\n')
}

// OfError returns the line and column of the byte an encoding/json
// decoding error (a *json.SyntaxError or *json.UnmarshalTypeError) points
// at in data; ok is false for an error that carries no offset.
func OfError(data []byte, err error) (line, col int, ok bool) {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 {
		return 0, 0, false
	}
	// The offset counts the bytes read, the offending one included.
	line, col = LineCol(data, off-1)
	return line, col, true
}
