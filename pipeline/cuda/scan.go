package cuda

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/internal/limits"
)

// File kinds Scan tells apart.
const (
	FileFatbin     = "fatbin"
	FileCubin      = "cubin"
	FilePTX        = "ptx"
	FileExecutable = "executable"
	FileShared     = "shared-library"
	FileObject     = "object"
	FileArchive    = "archive"
	FileELF        = "elf"
	FileOther      = "file"
)

// Bounds on what Scan reads of a file a step wrote: a hostile archive
// cannot make it walk more members, nor a hostile ELF more sections.
const (
	scanMaxMembers  = 1 << 16
	scanMaxSections = 1 << 16
)

// fatbinMagic starts a fatbin (the wrapper nvcc -fatbin writes and the
// .nv_fatbin section holds), little endian.
const fatbinMagic = 0xBA55ED50

// deviceSections are the ELF sections host files keep device code in:
// .nv_fatbin in executables, libraries and whole-program objects,
// __nv_relfatbin in objects compiled with -rdc.
var deviceSections = []string{".nv_fatbin", "__nv_relfatbin"}

// ScanResult is what Scan found in a file.
type ScanResult struct {
	// Kind is one of the File* kinds.
	Kind string
	// DeviceCode is true when the file holds device code cuobjdump can
	// list: a fatbin, cubin or PTX file, or an ELF file (or an archive
	// member) with a device code section.
	DeviceCode bool
}

// Scan reads enough of the file at path to say what it is and whether
// it holds device code, without running any tool: its magic, and for an
// ELF file or a static archive the section names (of each member). Bad
// input is an error that names what is wrong, never a panic; reads are
// bounded by the file's size and by scanMaxMembers and scanMaxSections.
func Scan(path string) (res ScanResult, err error) {
	// limits.Open checks the opened file and never waits on a FIFO.
	f, err := limits.Open(path, "output")
	if errors.Is(err, limits.ErrNotRegular) {
		return res, fmt.Errorf("%s is not a regular file", path)
	}
	if err != nil {
		return res, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return res, err
	}
	head := make([]byte, 8192)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return res, err
	}
	head = head[:n]
	defer func() {
		// debug/elf is fuzzed upstream; this is a second guard, so that
		// a step's hostile output fails the step instead of the run.
		if r := recover(); r != nil {
			res, err = ScanResult{}, fmt.Errorf("%s: unreadable: %v", path, r)
		}
	}()
	switch {
	case len(head) >= 4 && binary.LittleEndian.Uint32(head) == fatbinMagic:
		return ScanResult{Kind: FileFatbin, DeviceCode: true}, nil
	case isELF(head):
		return scanELF(io.NewSectionReader(f, 0, fi.Size()), head)
	case bytes.HasPrefix(head, []byte("!<arch>\n")):
		has, err := scanArchive(f, fi.Size())
		return ScanResult{Kind: FileArchive, DeviceCode: has}, err
	case isPTXText(head):
		return ScanResult{Kind: FilePTX, DeviceCode: true}, nil
	}
	return ScanResult{Kind: FileOther}, nil
}

// scanELF classifies one ELF file (r, whose first bytes are head).
func scanELF(r io.ReaderAt, head []byte) (ScanResult, error) {
	if len(head) >= 20 {
		var m uint16
		if head[5] == 2 {
			m = binary.BigEndian.Uint16(head[18:])
		} else {
			m = binary.LittleEndian.Uint16(head[18:])
		}
		if m == emCUDA {
			return ScanResult{Kind: FileCubin, DeviceCode: true}, nil
		}
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return ScanResult{Kind: FileELF}, fmt.Errorf("malformed ELF file: %w", err)
	}
	if len(f.Sections) > scanMaxSections {
		return ScanResult{Kind: FileELF}, fmt.Errorf("malformed ELF file: %d sections, more than %d", len(f.Sections), scanMaxSections)
	}
	res := ScanResult{Kind: FileELF, DeviceCode: hasDeviceSection(f)}
	switch f.Type {
	case elf.ET_EXEC:
		res.Kind = FileExecutable
	case elf.ET_REL:
		res.Kind = FileObject
	case elf.ET_DYN:
		res.Kind = FileShared
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				res.Kind = FileExecutable // a position-independent executable
			}
		}
	}
	return res, nil
}

func hasDeviceSection(f *elf.File) bool {
	for _, s := range f.Sections {
		for _, name := range deviceSections {
			if s.Name == name && s.Type != elf.SHT_NOBITS && s.Size > 0 {
				return true
			}
		}
	}
	return false
}

// scanArchive walks the members of a System V / GNU static archive and
// reports whether any ELF member holds device code. A member that is
// not ELF (the symbol table, the long-name table) is skipped.
func scanArchive(r io.ReaderAt, size int64) (bool, error) {
	off := int64(8)
	for i := 0; off < size; i++ {
		if i >= scanMaxMembers {
			return false, fmt.Errorf("malformed archive: more than %d members", scanMaxMembers)
		}
		var hdr [60]byte
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			if err == io.EOF && off+1 >= size {
				break // a final padding byte
			}
			return false, fmt.Errorf("malformed archive: member header at offset %d: %w", off, err)
		}
		if string(hdr[58:60]) != "`\n" {
			return false, fmt.Errorf("malformed archive: member header at offset %d lacks its end marker", off)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || n < 0 || n > size-off-60 {
			return false, fmt.Errorf("malformed archive: member at offset %d: size %q does not fit the file", off, strings.TrimSpace(string(hdr[48:58])))
		}
		body := io.NewSectionReader(r, off+60, n)
		var magic [24]byte
		if k, _ := body.ReadAt(magic[:], 0); k == len(magic) && isELF(magic[:]) {
			res, err := scanELF(body, magic[:])
			if err != nil {
				name := strings.TrimSpace(string(hdr[:16]))
				return false, fmt.Errorf("archive member %q at offset %d: %w", name, off, err)
			}
			if res.DeviceCode {
				return true, nil
			}
		}
		off += 60 + n + n%2
	}
	return false, nil
}
