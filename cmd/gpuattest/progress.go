package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// heartbeatEvery is how often, off a terminal, a line says how each step
// that has run that long is doing.
const heartbeatEvery = 30 * time.Second

// progress shows a run's progress on stderr: on a terminal a live status
// area of the running steps (mpb) with finished steps scrolling above it,
// elsewhere plain lines and a heartbeat every 30 s during long steps.
// Nothing of it reaches a step's logs or results.
type progress struct {
	mu      sync.Mutex
	out     io.Writer // where lines go: w, or mpb's area above the bars
	color   bool
	now     func() time.Time
	specs   map[string]*pipeline.Step
	running map[string]*live
	// tty only
	mpb  *mpb.Progress
	stop chan struct{}
	done chan struct{}
}

// live is a running step as progress knows it.
type live struct {
	id, kind string
	start    time.Time
	bar      *mpb.Bar
	// mu guards last: mpb's goroutines read it (never while pr.mu is
	// held by a call into mpb, which would deadlock).
	mu   sync.Mutex
	last runtypes.Progress
}

// progressOptions configure newProgress (tests set them).
type progressOptions struct {
	tty       *bool
	heartbeat time.Duration
	now       func() time.Time
}

// newProgress starts the progress display for p's steps on w.
func newProgress(w io.Writer, p *pipeline.Pipeline, o progressOptions) *progress {
	tty := isTerminal(w)
	if o.tty != nil {
		tty = *o.tty
	}
	if o.heartbeat == 0 {
		o.heartbeat = heartbeatEvery
	}
	if o.now == nil {
		o.now = time.Now
	}
	pr := &progress{out: w, now: o.now, specs: map[string]*pipeline.Step{}, running: map[string]*live{},
		color: tty && colorAllowed(), stop: make(chan struct{}), done: make(chan struct{})}
	for i := range p.Steps {
		pr.specs[p.Steps[i].ID] = &p.Steps[i]
	}
	if tty {
		pr.mpb = mpb.New(mpb.WithOutput(w), mpb.WithAutoRefresh(), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithWidth(28))
		pr.out = pr.mpb
		go pr.tick(time.Second, pr.updateBars)
	} else {
		go pr.tick(o.heartbeat, pr.heartbeat)
	}
	return pr
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colorAllowed honours NO_COLOR (https://no-color.org) and TERM=dumb.
func colorAllowed() bool {
	return os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// Writer is where other messages (log lines) go so that they scroll above
// the live area instead of through it.
func (pr *progress) Writer() io.Writer { return areaWriter{pr} }

type areaWriter struct{ pr *progress }

func (a areaWriter) Write(b []byte) (int, error) { return a.pr.out.Write(b) }

// Event takes one engine event.
func (pr *progress) Event(ev runtypes.Event) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	switch ev.Type {
	case "start":
		l := &live{id: ev.Step, kind: ev.Kind, start: pr.now()}
		pr.running[ev.Step] = l
		if pr.mpb == nil {
			fmt.Fprintf(pr.out, "start  %-20s %s\n", textsafe.Line(ev.Step), textsafe.Line(ev.Kind))
		} else {
			pr.addBar(l)
		}
	case "progress":
		if l := pr.running[ev.Step]; l != nil && ev.Progress != nil {
			l.mu.Lock()
			l.last = *ev.Progress
			l.mu.Unlock()
		}
	case "skip":
		fmt.Fprintf(pr.out, "%s %-20s %s\n", pr.paint("skip  ", yellow), textsafe.Line(ev.Step), textsafe.Line(ev.Reason))
	case "finish":
		if l := pr.running[ev.Step]; l != nil {
			delete(pr.running, ev.Step)
			if l.bar != nil {
				l.bar.Abort(true) // removed from the area
			}
		}
		fmt.Fprintln(pr.out, pr.finishLine(ev))
	}
}

// finishLine is the line of a finished step.
func (pr *progress) finishLine(ev runtypes.Event) string {
	word, col := string(ev.State), yellow
	switch ev.State {
	case runtypes.Passed:
		word, col = "pass", green
	case runtypes.Failed:
		word, col = "FAIL", red
	case runtypes.Error:
		word, col = "ERROR", red
	}
	line := fmt.Sprintf("%s %-20s %8s", pr.paint(fmt.Sprintf("%-6s", word), col), textsafe.Line(ev.Step), fmtDuration(ev.Duration))
	if ev.Cache != "" && ev.Cache != "off" {
		line += "  cache " + ev.Cache
	}
	if ev.Reason != "" && ev.State != runtypes.Passed {
		line += "  " + textsafe.Line(firstLine(ev.Reason))
	}
	return line
}

// The colours of the words pass, FAIL and skip on a terminal.
const (
	red    = "31"
	green  = "32"
	yellow = "33"
)

// paint colours s on a terminal that allows it (SGR only; the live area's
// cursor movement is mpb's).
func (pr *progress) paint(s, col string) string {
	if !pr.color {
		return s
	}
	return "\x1b[" + col + "m" + s + "\x1b[0m"
}

// status is one running step's line: elapsed time and what the step said.
func (pr *progress) status(l *live) string {
	l.mu.Lock()
	last := l.last
	l.mu.Unlock()
	el := pr.now().Sub(l.start)
	var b strings.Builder
	b.WriteString(shortDuration(el))
	if spec := pr.specs[l.id]; spec != nil && spec.Kind == pipeline.KindBurnin {
		d := spec.Duration.Value()
		if d > 0 {
			fmt.Fprintf(&b, "/%s", shortDuration(d))
		}
		// Counts come as invocations finish: a sustained burn-in is one
		// invocation, so "0 iterations" would misreport its rounds.
		if last.Iterations > 0 || last.Errors > 0 {
			fmt.Fprintf(&b, ", %d iterations, %d errors", last.Iterations, last.Errors)
		}
		if rem := d - el; d > 0 && rem > 0 {
			fmt.Fprintf(&b, ", %s left", shortDuration(rem))
		}
	}
	if last.Samples > 0 {
		fmt.Fprintf(&b, ", %d samples", last.Samples)
		if last.CIWidth > 0 {
			fmt.Fprintf(&b, ", CI ±%.1f%%", 50*last.CIWidth)
		}
	}
	writeRounds(&b, last)
	if last.Phase != "" {
		b.WriteString(", " + textsafe.Line(last.Phase))
	}
	return b.String()
}

// writeRounds adds a benchmark's pairs and, with rounds: auto, its gate's
// widest undecided interval against the threshold and the budget left.
func writeRounds(b *strings.Builder, p runtypes.Progress) {
	if p.Rounds == 0 {
		return
	}
	if p.MaxRounds == 0 {
		fmt.Fprintf(b, ", %d rounds", p.Rounds)
		return
	}
	fmt.Fprintf(b, ", %d/%d rounds", p.Rounds, p.MaxRounds)
	if p.Undecided > 0 && p.GateCase != "" {
		ci := "unbounded"
		if !math.IsInf(p.GateLo, 0) && !math.IsInf(p.GateHi, 0) {
			ci = fmt.Sprintf("%+.1f%%, %+.1f%%", 100*p.GateLo, 100*p.GateHi)
		}
		fmt.Fprintf(b, ", %d undecided: %s %+.1f%% [%s] vs ±%.1f%%", p.Undecided, textsafe.Line(p.GateCase), 100*p.GateDelta, ci, 100*p.GateThreshold)
	}
	fmt.Fprintf(b, ", %s budget left", shortDuration(p.TimeLeft))
}

// heartbeat prints, off a terminal, how every step that has run for at
// least one heartbeat interval is doing.
func (pr *progress) heartbeat() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, l := range pr.sortedRunning() {
		if pr.now().Sub(l.start) < time.Second {
			continue
		}
		fmt.Fprintf(pr.out, "%s %s\n", textsafe.Line(l.id), pr.status(l))
	}
}

func (pr *progress) sortedRunning() []*live {
	ls := make([]*live, 0, len(pr.running))
	for _, l := range pr.running {
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool {
		return ls[i].start.Before(ls[j].start) || ls[i].start.Equal(ls[j].start) && ls[i].id < ls[j].id
	})
	return ls
}

// addBar adds a running step's line to the live area: a bar for a
// burn-in (its duration is known), a spinner for the rest.
func (pr *progress) addBar(l *live) {
	name := decor.Name(fmt.Sprintf("%-20s", textsafe.Line(l.id)), decor.WCSyncSpaceR)
	stat := decor.Any(func(decor.Statistics) string { return pr.status(l) })
	if spec := pr.specs[l.id]; spec != nil && spec.Kind == pipeline.KindBurnin && spec.Duration.Value() > 0 {
		l.bar = pr.mpb.New(int64(spec.Duration.Value()/time.Second)+1, mpb.BarStyle().Lbound("[").Rbound("]"),
			mpb.PrependDecorators(name), mpb.AppendDecorators(stat), mpb.BarRemoveOnComplete())
		return
	}
	l.bar = pr.mpb.New(0, mpb.SpinnerStyle(), mpb.BarWidth(1), mpb.PrependDecorators(name), mpb.AppendDecorators(stat), mpb.BarRemoveOnComplete())
}

// updateBars moves the burn-in bars to their elapsed time.
func (pr *progress) updateBars() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, l := range pr.running {
		if spec := pr.specs[l.id]; l.bar != nil && spec != nil && spec.Kind == pipeline.KindBurnin {
			el := int64(pr.now().Sub(l.start) / time.Second)
			l.bar.SetCurrent(min(el, int64(spec.Duration.Value()/time.Second)))
		}
	}
}

// tick calls f every d until Close.
func (pr *progress) tick(d time.Duration, f func()) {
	defer close(pr.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f()
		case <-pr.stop:
			return
		}
	}
}

// Close ends the display; lines written afterwards go straight to the
// output.
func (pr *progress) Close() {
	if pr == nil {
		return
	}
	close(pr.stop)
	<-pr.done
	pr.mu.Lock()
	for _, l := range pr.running {
		if l.bar != nil {
			l.bar.Abort(true)
		}
	}
	pr.mu.Unlock()
	if pr.mpb != nil {
		pr.mpb.Wait()
	}
}

// shortDuration writes d to the second, without a trailing zero-second
// or zero-minute part: 12m30s, 1h0m, 45s.
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}
