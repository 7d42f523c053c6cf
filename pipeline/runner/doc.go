// Package runner runs a step's processes: on the host (Host), in a docker
// container (Docker), under bubblewrap in an extracted image (Bwrap), or
// under bubblewrap with the host's own tools read-only, no network and
// only the work directory writable (Sandbox, which a rebuild puts in the
// host runner's place). Every runner kills the whole process tree when
// its context is done.
package runner
