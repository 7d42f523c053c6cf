// Package source describes the git work tree a pipeline runs in: the
// repository's remote URL, the checked-out commit and whether the tree is
// dirty ([Detect]), for run records, attestations and release checks
// ([Info.CheckClean]), and writes a commit's files into a fresh directory
// for a rebuild ([CopyTracked]).
//
// Everything goes through the git command line tool, run with a time
// limit and a cap on its output, with the repository's hooks, fsmonitor
// and filter drivers switched off, the system configuration and replace
// objects ignored: a hostile repository's configuration runs no command
// and cannot make a commit id stand for another tree. Dirtiness does not
// rest on the index: every tracked file is hashed and compared with the
// commit's blob, read from the object store with each object's id
// checked, so an edit hidden with skip-worktree or assume-unchanged, a
// stat-preserving edit or a crafted index still counts. Remote URLs lose
// any user name or password before they are recorded.
package source
