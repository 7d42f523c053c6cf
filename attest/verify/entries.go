package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/internal/limits"
)

// Artifact is a file to check against the subjects.
type Artifact struct {
	// Name is how the artifact is shown (its path).
	Name string `json:"name"`
	// SHA256 is its lowercase hex sha256.
	SHA256 string `json:"sha256"`
}

// DigestFile hashes the file at path, which must be a regular file (a
// FIFO or device is refused at once, never waited on), and stops when
// ctx is done.
func DigestFile(ctx context.Context, path string) (Artifact, error) {
	sum, _, err := digest.FileContext(ctx, path)
	if err != nil {
		return Artifact{}, fmt.Errorf("reading artifact: %w", err)
	}
	return Artifact{Name: path, SHA256: sum}, nil
}

// DigestFiles hashes the files at paths as DigestFile does, several at
// once (at most GOMAXPROCS, the calling goroutine one of them, so that a
// single file is hashed without a hand-off), and returns them in the
// order given. The error is that of the first path, in that order, that
// failed for a cause of its own; the rest stop when one fails.
func DigestFiles(ctx context.Context, paths []string) ([]Artifact, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	arts := make([]Artifact, len(paths))
	errs := make([]error, len(paths))
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(paths) {
				return
			}
			if arts[i], errs[i] = DigestFile(ctx, paths[i]); errs[i] != nil {
				cancel()
			}
		}
	}
	var wg sync.WaitGroup
	for range min(len(paths), runtime.GOMAXPROCS(0)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	// A path stopped by another's failure fails as cancelled: the cause
	// comes first.
	var cancelled error
	for _, err := range errs {
		switch {
		case err == nil:
		case !errors.Is(err, context.Canceled):
			return nil, err
		case cancelled == nil:
			cancelled = err
		}
	}
	if cancelled != nil {
		return nil, cancelled
	}
	return arts, nil
}

// Entry is one bundle to verify, with where it came from.
type Entry struct {
	// Source is "file:line" or "file".
	Source string
	// Data is the bundle's JSON.
	Data []byte
	// Problem, when set, says why the bundle could not be taken as
	// delivered (a registry served bytes that do not match their
	// digest): the entry fails the signature check with it, unread.
	Problem string
}

// ReadBundles reads the bundle file at path (a regular file, no larger
// than the Verifier's limits allow) and splits it with ParseBundles. ctx
// is checked before and after the read, which the limit keeps short.
func (v *Verifier) ReadBundles(ctx context.Context, path string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := limits.ReadFile(path, v.opts.maxFileSize(), "bundle file")
	if err == nil {
		err = ctx.Err()
	}
	var tl *limits.TooLargeError
	if errors.As(err, &tl) {
		return nil, fmt.Errorf("reading bundles: %s: larger than %s, the most a bundle file may be (%d bundles of the largest size)\n%s",
			path, limits.Human(tl.Limit), bundlesPerFile, v.opts.limitHint())
	}
	if err != nil {
		return nil, fmt.Errorf("reading bundles: %w", err)
	}
	return ParseBundles(path, data)
}

// ParseBundles splits a file's content into bundles: one JSON document
// (a single bundle, possibly indented) or JSON Lines (one per line). A
// line that is not JSON (a truncated or damaged bundle) is not a Sigstore
// bundle: its entry carries the Problem and fails the signature check, so
// that a damaged bundle file is refused as every other changed bundle is
// (exit 10), not as an unreadable input. A file of more than MaxBundles
// lines is refused.
func ParseBundles(name string, data []byte) ([]Entry, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%s: no bundles: the file is empty", name)
	}
	if json.Valid(trimmed) {
		return []Entry{{Source: name, Data: trimmed}}, nil
	}
	var out []Entry
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(out) == MaxBundles {
			return nil, fmt.Errorf("%s:%d: more than %d bundles in one file, the most verify reads\nhint: split the file; a run writes a few bundles", name, i+1, MaxBundles)
		}
		e := Entry{Source: fmt.Sprintf("%s:%d", name, i+1), Data: line}
		if !json.Valid(line) {
			e.Data, e.Problem = nil, "not a JSON document: not a Sigstore bundle (truncated or damaged?)"
		}
		out = append(out, e)
	}
	return out, nil
}
