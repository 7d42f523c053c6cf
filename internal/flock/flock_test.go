package flock

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestLockExcludes: goroutines holding the lock never overlap.
func TestLockExcludes(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "x.lock")
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := Lock(t.Context(), p)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders at once, want 1", most)
	}
}

// TestLockWaitsUntilCtxDone: a held lock makes Lock wait, and give up with
// ctx's error when ctx ends.
func TestLockWaitsUntilCtxDone(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
}

func TestLockMissingDir(t *testing.T) {
	t.Parallel()
	if _, err := Lock(t.Context(), filepath.Join(t.TempDir(), "no", "x.lock")); err == nil {
		t.Fatal("locked a file in a missing directory")
	}
}
