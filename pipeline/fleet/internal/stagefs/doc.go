// Package stagefs holds what the fleet's coordinator and node side both
// know of a dispatch directory: its file names, the variables of a job's
// environment, and the checks that no other user of a shared directory
// can replace what a path on it leads to (TrustedDir).
package stagefs
