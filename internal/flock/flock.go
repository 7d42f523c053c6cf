// Package flock takes exclusive locks on files, so that goroutines and
// processes doing the same work on a shared cache wait for each other
// instead of doing it twice: flock(2) on Unix (advisory), LockFileEx on
// Windows (mandatory for the locked byte range).
package flock

import (
	"context"
	"fmt"
	"os"
	"time"
)

// pollInterval is how often Lock retries a lock another holder has.
const pollInterval = 50 * time.Millisecond

// Lock takes an exclusive lock on path, creating the file when needed,
// and waits for it until ctx is done. It returns the function that
// releases the lock. Each call opens its own descriptor, so two
// goroutines of one process exclude each other as two processes do.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	for {
		held, err := tryLock(f)
		if held {
			return func() {
				unlockFile(f)
				_ = f.Close()
			}, nil
		}
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the lock %s, held by another process or goroutine: %w", path, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}
