package runtypes

// State is the state of a run or of one step.
type State string

// Step and run states. A run ends passed, failed, interrupted or error.
const (
	Pending     State = "pending"
	Running     State = "running"
	Passed      State = "passed"
	Failed      State = "failed"
	Skipped     State = "skipped"
	Error       State = "error"
	Interrupted State = "interrupted"
)
