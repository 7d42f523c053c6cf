package slurmtest

import "syscall"

// ids are the user and group a daemon runs as.
type ids struct{ uid, gid uint32 }

// procAttr starts a daemon in its own process group, as cred when set.
func procAttr(cred *ids) (*syscall.SysProcAttr, error) {
	a := &syscall.SysProcAttr{Setpgid: true}
	if cred != nil {
		a.Credential = &syscall.Credential{Uid: cred.uid, Gid: cred.gid}
	}
	return a, nil
}

// mknodChar makes the character device file dev (major, minor).
func mknodChar(dev string, major, minor int) error {
	return syscall.Mknod(dev, syscall.S_IFCHR|0o666, mkdev(major, minor))
}
