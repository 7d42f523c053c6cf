package fleet_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

// counting is a Scheduler that records when Status is called.
type counting struct {
	mu       sync.Mutex
	calls    []time.Time
	finished int
}

func (c *counting) Name() string { return "counting" }
func (c *counting) Submit(context.Context, fleet.Request) ([]fleet.Handle, error) {
	return nil, errors.New("not here")
}
func (c *counting) Cancel(context.Context, []string) error { return nil }
func (c *counting) Describe(context.Context) (fleet.Cluster, error) {
	return fleet.Cluster{Engine: "counting"}, nil
}
func (c *counting) Status(_ context.Context, ids []string) (map[string]fleet.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, time.Now())
	out := map[string]fleet.Status{}
	for _, id := range ids {
		out[id] = fleet.Status{ID: id, State: fleet.Running}
	}
	return out, nil
}

// finishing is a counting Scheduler that is also a Finisher.
type finishing struct{ counting }

func (f *finishing) Finish(context.Context, []string) error { f.finished++; return nil }

// TestThrottleSpacesStatus: back-to-back Status calls reach the
// scheduler at least every apart; the first goes at once.
func TestThrottleSpacesStatus(t *testing.T) {
	c := &counting{}
	s := fleet.Throttle(c, 100*time.Millisecond)
	start := time.Now()
	for range 4 {
		st, err := s.Status(t.Context(), []string{"1"})
		if err != nil {
			t.Fatal(err)
		}
		if st["1"].State != fleet.Running {
			t.Fatalf("Status passed through %+v", st)
		}
	}
	if len(c.calls) != 4 {
		t.Fatalf("%d calls reached the scheduler, want 4", len(c.calls))
	}
	if first := c.calls[0].Sub(start); first > 50*time.Millisecond {
		t.Errorf("the first call waited %v", first)
	}
	for i := 1; i < len(c.calls); i++ {
		if gap := c.calls[i].Sub(c.calls[i-1]); gap < 100*time.Millisecond {
			t.Errorf("calls %d and %d %v apart, want at least 100ms", i-1, i, gap)
		}
	}
}

// TestThrottleStopsWithContext: a Status waiting out the interval
// returns the context's error once it ends, without asking.
func TestThrottleStopsWithContext(t *testing.T) {
	c := &counting{}
	s := fleet.Throttle(c, time.Hour)
	if _, err := s.Status(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Status(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Status = %v, want the context's deadline", err)
	}
	if len(c.calls) != 1 {
		t.Errorf("%d calls reached the scheduler, want 1", len(c.calls))
	}
}

// TestThrottleKeepsFinisher: Finish reaches a wrapped Finisher, and is a
// no-op for a scheduler without one.
func TestThrottleKeepsFinisher(t *testing.T) {
	f := &finishing{}
	s := fleet.Throttle(f, time.Second)
	fin, ok := s.(fleet.Finisher)
	if !ok {
		t.Fatal("Throttle of a Finisher is no Finisher")
	}
	if err := fin.Finish(t.Context(), []string{"1"}); err != nil || f.finished != 1 {
		t.Errorf("Finish = %v, finished %d times, want once", err, f.finished)
	}
	if err := fleet.Throttle(&counting{}, time.Second).(fleet.Finisher).Finish(t.Context(), nil); err != nil {
		t.Errorf("Finish of a scheduler without one = %v", err)
	}
	if d, err := s.Describe(t.Context()); err != nil || d.Engine != "counting" {
		t.Errorf("Describe = %+v, %v", d, err)
	}
}
