//go:build !unix

package cudaimage

import "io/fs"

// fileStat is what the layer writer needs of a file beyond fs.FileInfo.
type fileStat struct {
	uid, gid int
	dev, ino uint64
	nlink    uint64
}

// statOf reports nothing where files have no Unix owner and inode: the
// layer gets owner root and no hard links.
func statOf(fs.FileInfo) (fileStat, bool) { return fileStat{}, false }
