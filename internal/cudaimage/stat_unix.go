//go:build unix

package cudaimage

import (
	"io/fs"
	"syscall"
)

// fileStat is what the layer writer needs of a file beyond fs.FileInfo.
type fileStat struct {
	uid, gid int
	dev, ino uint64
	nlink    uint64
}

// statOf returns fi's owner, inode and link count.
func statOf(fi fs.FileInfo) (fileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{uid: int(st.Uid), gid: int(st.Gid), dev: uint64(st.Dev), ino: uint64(st.Ino), nlink: uint64(st.Nlink)}, true
}
