//go:build !unix

package image

import "io/fs"

// inode is 0 where the file system's inode numbers are not reported.
func inode(fs.FileInfo) uint64 { return 0 }
