package engine

import (
	"fmt"

	"github.com/gpuattest/gpuattest/internal/envlist"
	"github.com/gpuattest/gpuattest/pipeline"
)

// claim is what a step holds exclusively while it runs: nothing, some
// GPUs (by UUID, or index when the record has none), or the whole
// machine.
type claim struct {
	machine bool
	devices []string
}

// exclusive decides a step's claim. gpu: true steps claim the GPUs their
// environment's CUDA_VISIBLE_DEVICES leaves visible (every GPU of the
// hardware record when unset): the harness's device is among them, and
// preflight would see another step's process on it. A benchmark or a
// burn-in that is not gpu: true claims the whole machine: on the CPU
// backend it measures, or loads, every core, and with --backend auto it
// may use any GPU. When the visible GPUs cannot be matched to the record
// (no record, a MIG instance, an unknown UUID) the step claims the whole
// machine too. Other steps claim nothing and run beside these.
func (e *run) exclusive(s *pipeline.Step) claim {
	switch {
	case s.GPU:
	case s.Kind == pipeline.KindBenchmark || s.Kind == pipeline.KindBurnin:
		return claim{machine: true}
	default:
		return claim{}
	}
	hw := e.o.hardware
	if hw == nil || len(hw.GPUs) == 0 {
		return claim{machine: true}
	}
	host := false
	if r, ok := e.o.runners[s.Runner]; ok {
		host = r.Name() == "host"
	}
	env := e.env(s, "", host)
	idx, err := hw.Visible(func(k string) (string, bool) {
		v, ok := envlist.Lookup(env, k)
		return v, ok
	})
	if err != nil || len(idx) == 0 {
		return claim{machine: true}
	}
	var c claim
	for _, i := range idx {
		g := hw.GPUs[i]
		key := g.UUID
		if key == "" {
			key = fmt.Sprintf("index %d", g.Index)
		}
		c.devices = append(c.devices, key)
	}
	return c
}

// locks are the claims of the running steps. Only the scheduler's
// goroutine uses them.
type locks struct {
	machine bool
	devices map[string]bool
	held    map[int]claim
}

// take gives step i its claim c when nothing running conflicts with it,
// and reports whether it did. The whole machine conflicts with every
// claim; a GPU with a claim on the same GPU.
func (l *locks) take(i int, c claim) bool {
	if !c.machine && len(c.devices) == 0 {
		return true
	}
	if l.devices == nil {
		l.devices, l.held = map[string]bool{}, map[int]claim{}
	}
	if l.machine || (c.machine && len(l.held) > 0) {
		return false
	}
	for _, d := range c.devices {
		if l.devices[d] {
			return false
		}
	}
	l.machine = c.machine
	for _, d := range c.devices {
		l.devices[d] = true
	}
	l.held[i] = c
	return true
}

// release gives back step i's claim, if it held one.
func (l *locks) release(i int) {
	c, ok := l.held[i]
	if !ok {
		return
	}
	delete(l.held, i)
	if c.machine {
		l.machine = false
	}
	for _, d := range c.devices {
		delete(l.devices, d)
	}
}
