// Package flock takes exclusive advisory locks on files (flock(2)), so
// that goroutines and processes doing the same work on a shared cache wait
// for each other instead of doing it twice.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// pollInterval is how often Lock retries a lock another holder has.
const pollInterval = 50 * time.Millisecond

// Lock takes an exclusive flock on path, creating the file when needed,
// and waits for it until ctx is done. It returns the function that
// releases the lock. Each call opens its own descriptor, so two
// goroutines of one process exclude each other as two processes do.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
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
