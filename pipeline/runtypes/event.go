package runtypes

import "time"

// Event is one line of progress.
type Event struct {
	// Type is "start", "finish", "skip" or "progress" (a running step's
	// report: Progress is set).
	Type  string
	Step  string
	Kind  string
	State State
	// Cache is "hit", "miss" or "off" on finish.
	Cache    string
	Duration time.Duration
	Reason   string
	// Progress is a running step's report on a "progress" event.
	Progress *Progress
}

// Progress is how far a running step has come.
type Progress struct {
	// Phase is what the step is doing now, when it says ("preflight").
	Phase string
	// Iterations and Errors count a burn-in's finished and failed
	// iterations.
	Iterations, Errors int
	// Samples counts a benchmark's samples so far (both sides); CIWidth
	// is the widest relative width of a case's 95 % median interval among
	// the candidate's cases (0 while unknown).
	Samples int
	CIWidth float64
	// Rounds is a benchmark's pairs of reference and candidate
	// invocations so far. With rounds: auto, MaxRounds is its most pairs,
	// TimeLeft the time budget left, Undecided the cases its gate has not
	// decided yet, and GateCase the undecided case with the widest
	// interval: GateDelta its relative change, [GateLo, GateHi] its
	// confidence sequence, against ±GateThreshold.
	Rounds, MaxRounds, Undecided int
	TimeLeft                     time.Duration
	GateCase                     string
	GateDelta, GateLo, GateHi    float64
	GateThreshold                float64
}
