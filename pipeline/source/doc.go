// Package source describes the git work tree a pipeline runs in: the
// repository's remote URL, the checked-out commit and whether the tree is
// dirty ([Detect]), for run records, attestations and release checks
// ([Info.CheckClean]), and copies a clean tree's tracked files into a
// fresh directory for a rebuild ([CopyTracked]).
//
// Everything goes through the git command line tool, run with a time
// limit and a cap on its output, with the repository's hooks, fsmonitor
// and filter drivers switched off: a hostile repository's configuration
// runs no command. Remote URLs lose any user name or password before they
// are recorded.
package source
