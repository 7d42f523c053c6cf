package runtypes

// LockProblem is one reason the lock check (pipeline/image CheckLock)
// refuses to run a release.
type LockProblem struct {
	// Image is the image's name in the pipeline (or in the lock, for a stale
	// entry).
	Image string `json:"image"`
	// Reference is the source the pipeline writes for it, if any.
	Reference string `json:"reference,omitempty"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Hint says how to fix it.
	Hint string `json:"hint"`
}

// String renders the problem as an error message with its hint line.
func (p LockProblem) String() string {
	s := "image " + p.Image
	if p.Reference != "" {
		s += " (" + p.Reference + ")"
	}
	s += ": " + p.Message
	if p.Hint != "" {
		s += "\nhint: " + p.Hint
	}
	return s
}

// Error makes a LockProblem usable as an error.
func (p LockProblem) Error() string { return p.String() }
