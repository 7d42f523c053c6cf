package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KmsgPath is the kernel log device the Xids logged since boot are read
// from. A variable so tests can point it at a file of records.
var KmsgPath = "/dev/kmsg"

// Bounds of one kernel-log read: records scanned, bytes read and Xids
// kept. The kernel's ring buffer holds far less than maxKmsgBytes; the
// bound keeps a misbehaving device from being read for ever.
const (
	maxKmsgRecords = 1 << 20
	maxKmsgBytes   = 64 << 20
	maxKernelXids  = 256
)

// KernelXid is one Xid the NVIDIA driver logged in the kernel log.
type KernelXid struct {
	// Seq is the record's sequence number in the kernel log.
	Seq uint64 `json:"seq"`
	// SinceBoot is when it was logged, measured from boot.
	SinceBoot time.Duration `json:"since_boot_ns"`
	// PCIBusID is the GPU's bus id as the driver logs it (0000:18:00).
	PCIBusID string `json:"pci_bus_id"`
	// Xid is the code.
	Xid uint64 `json:"xid"`
	// Fatal is whether the code fails a step (see FatalXids).
	Fatal bool `json:"fatal"`
	// Message is the log line after the code, as the driver wrote it
	// (bounded).
	Message string `json:"message"`
}

// KernelLog is what one read of the kernel log found.
type KernelLog struct {
	// LastSeq is the sequence number of the last record read.
	LastSeq uint64
	// Xids are the Xids logged, oldest first (at most maxKernelXids: the
	// newest are kept).
	Xids []KernelXid
	// Dropped counts Xids left out by the bound.
	Dropped int
}

// xidLine matches the driver's Xid message, e.g.
// "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=x, GPU has fallen off the bus."
var xidLine = regexp.MustCompile(`NVRM: Xid \(PCI:([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): (\d{1,5}),? ?(.*)`)

// ReadKernelXids reads the kernel log at path (KmsgPath when empty) from
// its oldest record without blocking and returns the Xids logged in it.
// /dev/kmsg is readable by root, or by anyone when
// kernel.dmesg_restrict is 0; the error says which it was when it is
// not readable.
func ReadKernelXids(path string) (*KernelLog, error) {
	if path == "" {
		path = KmsgPath
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			hint = " (hint: run as root, or sysctl kernel.dmesg_restrict=0)"
		}
		return nil, fmt.Errorf("reading the kernel log %s: %w%s", path, err, hint)
	}
	defer syscall.Close(fd)
	log := &KernelLog{}
	buf := make([]byte, 16<<10)
	var pending []byte
	total := 0
	for reads, records := 0, 0; reads < maxKmsgRecords && records < maxKmsgRecords && total < maxKmsgBytes; reads++ {
		n, err := syscall.Read(fd, buf)
		switch {
		case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EINTR):
			// EPIPE: records were overwritten while reading; the next
			// read goes on with the oldest one left.
			continue
		case errors.Is(err, syscall.EAGAIN):
			n = 0 // no more records
		case err != nil:
			return nil, fmt.Errorf("reading the kernel log %s: %w", path, err)
		}
		if n <= 0 {
			break
		}
		total += n
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			records++
			log.record(string(pending[:i]))
			pending = pending[i+1:]
		}
	}
	if len(pending) > 0 {
		log.record(string(pending))
	}
	return log, nil
}

// record parses one kernel-log record ("PRI,SEQ,USEC,FLAGS;MESSAGE");
// continuation lines (" KEY=value") and other lines are skipped.
func (l *KernelLog) record(line string) {
	head, msg, ok := strings.Cut(line, ";")
	if !ok || strings.HasPrefix(line, " ") {
		return
	}
	f := strings.Split(head, ",")
	if len(f) < 3 {
		return
	}
	seq, err1 := strconv.ParseUint(f[1], 10, 64)
	usec, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	l.LastSeq = max(l.LastSeq, seq)
	m := xidLine.FindStringSubmatch(msg)
	if m == nil {
		return
	}
	x, err := strconv.ParseUint(m[2], 10, 64)
	if err != nil {
		return
	}
	text := m[3]
	if len(text) > 200 {
		text = text[:200]
	}
	if len(l.Xids) == maxKernelXids {
		l.Xids = l.Xids[1:]
		l.Dropped++
	}
	l.Xids = append(l.Xids, KernelXid{Seq: seq, SinceBoot: time.Duration(usec) * time.Microsecond,
		PCIBusID: strings.ToLower(m[1]), Xid: x, Fatal: XidFatal(x), Message: text})
}

// samePCI reports whether the driver's bus id (0000:18:00) and NVML's
// (00000000:18:00.0) name one device: same domain, bus and device.
func samePCI(kernel, nvmlID string) bool {
	norm := func(s string) (uint64, uint64, uint64, bool) {
		s, _, _ = strings.Cut(strings.ToLower(s), ".")
		p := strings.Split(s, ":")
		if len(p) != 3 {
			return 0, 0, 0, false
		}
		d, e1 := strconv.ParseUint(p[0], 16, 32)
		b, e2 := strconv.ParseUint(p[1], 16, 8)
		v, e3 := strconv.ParseUint(p[2], 16, 8)
		return d, b, v, e1 == nil && e2 == nil && e3 == nil
	}
	d1, b1, v1, ok1 := norm(kernel)
	d2, b2, v2, ok2 := norm(nvmlID)
	return ok1 && ok2 && d1 == d2 && b1 == b2 && v1 == v2
}

// fromKernel says where an Xid read from the kernel log came from.
func fromKernel(x XidEvent) string {
	if x.Source == "" {
		return ""
	}
	return " (from the " + x.Source + ", no NVML event)"
}
