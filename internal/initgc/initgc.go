// Package initgc holds the garbage collector off while the program's
// packages initialize, and gives it back when main starts.
//
// gpuattest links about 380 packages (sigstore-go's, go-containerregistry's,
// client-go's, CEL's) whose inits allocate about 3.5 MB: enough to start a
// collection cycle in the middle of start-up, which costs every command,
// `gpuattest version` included, a few milliseconds on two cores (issue 22's
// start-up goal). Go initializes a package once its imports are, choosing
// the lexically first import path among those ready (the Go spec, "Package
// initialization"); this package imports only runtime/debug, so it runs
// before every package whose path sorts after it and those that wait on
// one, most of the heavy ones among them. What the inits allocate is
// bounded, and collected at the first cycle after Restore.
package initgc

import "runtime/debug"

// percent is the GC percent in force before init (GOGC's, or 100).
var percent = debug.SetGCPercent(-1)

// Restore sets the GC percent back to what it was before init: call it
// first thing in main.
func Restore() { debug.SetGCPercent(percent) }
