// Package runner runs a step's processes: on the host (Host), in a docker
// container (Docker) or under bubblewrap in an extracted image (Bwrap).
// Every runner kills the whole process tree when its context is done.
package runner
