// Package digest computes the sha256 digests gpuattest records for files.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// File returns the lowercase hex sha256 of the file at path and its size.
func File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return Reader(f)
}

// Reader returns the lowercase hex sha256 of what r holds and its size.
func Reader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
