package runner

import (
	"context"
	"io"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/image"
)

// Runner runs one process for a step: on the host, in a docker container or
// under bubblewrap. Implementations must kill the whole process tree when
// ctx is cancelled and must not return before it is gone.
type Runner interface {
	// Name is the runner kind: "host", "docker" or "bwrap".
	Name() string
	// Run runs c to completion. A non-zero exit is reported in
	// Result.ExitCode with a nil error; the error is for a process that
	// could not be started or was cut short (ctx done: the error wraps
	// ctx.Err()).
	Run(ctx context.Context, c *Command) (*Result, error)
}

// Command is one process to run.
type Command struct {
	// Args is the argv; Args[0] is looked up in PATH (in the image for
	// container runners).
	Args []string
	// Dir is the absolute host directory the process runs in. Container
	// runners bind it read-write at the same absolute path in the
	// container, so paths under it mean the same inside and out.
	Dir string
	// Env is the complete environment as KEY=VALUE pairs. Host runs get
	// exactly this; container runs get it on top of the image's own.
	Env []string
	// Stdout and Stderr receive the process's output; nil discards it.
	Stdout, Stderr io.Writer
	// Image is the digest-pinned image for the docker and bwrap runners;
	// the host runner refuses one that is not zero.
	Image image.Pinned
	// GPU asks for the GPUs (device nodes and driver libraries).
	GPU bool
	// ReadOnly lists extra absolute host paths bound read-only at the
	// same path (container runners only).
	ReadOnly []string
}

// Result is how a process ended.
type Result struct {
	// ExitCode is the process's exit status; -1 when killed by a signal.
	ExitCode int
	// Duration is the wall time from start to exit.
	Duration time.Duration
	// MaxRSSBytes is the peak resident set size of the process (and its
	// waited-for children) when the runner can measure it, else zero.
	MaxRSSBytes int64
	// Notes are facts the runner wants recorded (for example "bind
	// mounts unavailable: copied the work dir in and out").
	Notes []string
}

// Info describes a runner for the run record.
type Info struct {
	// Name is the runner kind.
	Name string `json:"name"`
	// Isolation is "none", "container" or "namespace".
	Isolation string `json:"isolation"`
	// Image is the pinned image as the runner uses it (name@sha256:...,
	// or a file source with its local path), when there is one.
	Image string `json:"image,omitempty"`
}
