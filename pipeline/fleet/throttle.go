package fleet

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Throttle returns s with its Status calls spaced: a call that comes
// sooner than every after the previous one returned waits out the rest
// (or returns ctx's error if ctx ends first), and calls never overlap.
// Submit, Cancel and Describe pass through. A Finisher stays one. It is
// how the coordinator bounds what polling costs a scheduler's controller,
// the same way for every engine; every <= 0 spaces nothing.
func Throttle(s Scheduler, every time.Duration) Scheduler {
	return &throttled{Scheduler: s, every: every}
}

var _ Finisher = (*throttled)(nil)

// throttled is Throttle's wrapper.
type throttled struct {
	Scheduler
	every time.Duration

	mu   sync.Mutex // serialises Status and guards last
	last time.Time  // when the previous Status returned
}

// Status waits until every has passed since the previous call returned,
// then asks the scheduler.
func (t *throttled) Status(ctx context.Context, ids []string) (map[string]Status, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if wait := time.Until(t.last.Add(t.every)); wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
	defer func() { t.last = time.Now() }()
	return t.Scheduler.Status(ctx, ids)
}

// Finish calls the wrapped scheduler's Finish, if it has one.
func (t *throttled) Finish(ctx context.Context, ids []string) error {
	if f, ok := t.Scheduler.(Finisher); ok {
		return f.Finish(ctx, ids)
	}
	return nil
}

// Unwrap returns the wrapped scheduler.
func (t *throttled) Unwrap() Scheduler { return t.Scheduler }

// FormatDuration writes d as a fleet file would: 10m rather than 10m0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
