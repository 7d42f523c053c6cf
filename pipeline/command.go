package pipeline

import (
	"encoding/json"
	"fmt"
)

// Command is a step's run: either a shell string (run by /bin/sh -c) or an
// argv list (run directly).
type Command struct {
	// Shell is the shell string form; empty when Argv is used.
	Shell string
	// Argv is the argv list form; nil when Shell is used.
	Argv []string
}

// IsZero reports whether the command is empty in both forms.
func (c Command) IsZero() bool { return c.Shell == "" && len(c.Argv) == 0 }

// Args returns the argv that runs the command.
func (c Command) Args() []string {
	if c.Argv != nil {
		return append([]string(nil), c.Argv...)
	}
	if c.Shell == "" {
		return nil
	}
	return []string{"/bin/sh", "-ec", c.Shell}
}

// String returns the command as a user would read it.
func (c Command) String() string {
	if c.Argv != nil {
		return fmt.Sprintf("%q", c.Argv)
	}
	return c.Shell
}

// UnmarshalYAML accepts a string or a list of strings.
func (c *Command) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err == nil {
		*c = Command{Shell: s}
		return nil
	}
	var argv []string
	if err := unmarshal(&argv); err != nil {
		return fmt.Errorf("run: expected a shell string or a list of strings")
	}
	if argv == nil {
		argv = []string{}
	}
	*c = Command{Argv: argv}
	return nil
}

// MarshalYAML writes the form the command was given in.
func (c Command) MarshalYAML() (any, error) {
	if c.Argv != nil {
		return c.Argv, nil
	}
	return c.Shell, nil
}

// MarshalJSON writes the form the command was given in.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Argv != nil {
		return json.Marshal(c.Argv)
	}
	return json.Marshal(c.Shell)
}

// Repeats is a benchmark's timed iterations per case: a count, or auto
// (adaptive: stop once the median is known to Precision, or at MaxTime).
// The zero value leaves the suite's own default.
type Repeats struct {
	// N is the fixed count; zero with Auto or when unset.
	N int
	// Auto is true for repeats: auto.
	Auto bool
}

// RepeatsAuto is the YAML spelling of adaptive repeats.
const RepeatsAuto = "auto"

// IsZero reports whether repeats was left out.
func (r Repeats) IsZero() bool { return r.N == 0 && !r.Auto }

// String returns "auto", the count, or "" when unset.
func (r Repeats) String() string {
	switch {
	case r.Auto:
		return RepeatsAuto
	case r.N != 0:
		return fmt.Sprint(r.N)
	}
	return ""
}

// UnmarshalYAML accepts an integer or "auto".
func (r *Repeats) UnmarshalYAML(unmarshal func(any) error) error {
	var n int
	if err := unmarshal(&n); err == nil {
		*r = Repeats{N: n}
		return nil
	}
	var s string
	if err := unmarshal(&s); err == nil && s == RepeatsAuto {
		*r = Repeats{Auto: true}
		return nil
	}
	return fmt.Errorf("repeats: expected a positive integer or auto")
}

// MarshalYAML writes the count or "auto".
func (r Repeats) MarshalYAML() (any, error) {
	if r.Auto {
		return RepeatsAuto, nil
	}
	return r.N, nil
}

// MarshalJSON writes the count or "auto".
func (r Repeats) MarshalJSON() ([]byte, error) {
	if r.Auto {
		return json.Marshal(RepeatsAuto)
	}
	return json.Marshal(r.N)
}

// UnmarshalJSON reads the count or "auto".
func (r *Repeats) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*r = Repeats{N: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil && s == RepeatsAuto {
		*r = Repeats{Auto: true}
		return nil
	}
	return fmt.Errorf("repeats: expected a positive integer or %q", RepeatsAuto)
}

// Rounds is how many pairs of invocations a benchmark with a reference
// runs: a fixed count, judged once with the fixed-size paired test, or
// auto (the default): pairs are added, in ABBA blocks, until every case
// is decided or the budget (maxRounds, roundsTime, the step's timeout)
// runs out, judged with the always-valid sequential test.
type Rounds struct {
	// N is the fixed count; zero with Auto or when unset.
	N int
	// Auto is true for rounds: auto.
	Auto bool
}

// RoundsAuto is the YAML spelling of sequential rounds.
const RoundsAuto = "auto"

// IsZero reports whether rounds was left out.
func (r Rounds) IsZero() bool { return r.N == 0 && !r.Auto }

// String returns "auto", the count, or "" when unset.
func (r Rounds) String() string {
	switch {
	case r.Auto:
		return RoundsAuto
	case r.N != 0:
		return fmt.Sprint(r.N)
	}
	return ""
}

// UnmarshalYAML accepts an integer or "auto".
func (r *Rounds) UnmarshalYAML(unmarshal func(any) error) error {
	var n int
	if err := unmarshal(&n); err == nil {
		*r = Rounds{N: n}
		return nil
	}
	var s string
	if err := unmarshal(&s); err == nil && s == RoundsAuto {
		*r = Rounds{Auto: true}
		return nil
	}
	return fmt.Errorf("rounds: expected a positive integer or auto")
}

// MarshalYAML writes the count or "auto".
func (r Rounds) MarshalYAML() (any, error) {
	if r.Auto {
		return RoundsAuto, nil
	}
	return r.N, nil
}

// MarshalJSON writes the count or "auto".
func (r Rounds) MarshalJSON() ([]byte, error) {
	if r.Auto {
		return json.Marshal(RoundsAuto)
	}
	return json.Marshal(r.N)
}

// UnmarshalJSON reads the count or "auto".
func (r *Rounds) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*r = Rounds{N: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil && s == RoundsAuto {
		*r = Rounds{Auto: true}
		return nil
	}
	return fmt.Errorf("rounds: expected a positive integer or %q", RoundsAuto)
}
