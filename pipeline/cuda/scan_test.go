package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// elf64 returns a minimal little-endian ELF64 file of type typ whose
// sections are named names (each 8 bytes of PROGBITS), for Scan's tests.
func elf64(typ uint16, names ...string) []byte {
	strtab := []byte{0}
	offs := make([]uint32, len(names)+1)
	for i, n := range append(names, ".shstrtab") {
		offs[i] = uint32(len(strtab))
		strtab = append(append(strtab, n...), 0)
	}
	data := bytes.Repeat([]byte{0xAA}, 8)
	shoff := 64 + 8*len(names) + len(strtab)
	shoff += (8 - shoff%8) % 8
	var b bytes.Buffer
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(hdr[16:], typ)
	le.PutUint16(hdr[18:], 62) // x86-64
	le.PutUint32(hdr[20:], 1)
	le.PutUint64(hdr[40:], uint64(shoff))
	le.PutUint16(hdr[52:], 64)
	le.PutUint16(hdr[58:], 64)
	le.PutUint16(hdr[60:], uint16(len(names)+2))
	le.PutUint16(hdr[62:], uint16(len(names)+1))
	b.Write(hdr)
	for range names {
		b.Write(data)
	}
	b.Write(strtab)
	for b.Len() < shoff {
		b.WriteByte(0)
	}
	sh := func(name, typ uint32, off, size int) {
		s := make([]byte, 64)
		le.PutUint32(s[0:], name)
		le.PutUint32(s[4:], typ)
		le.PutUint64(s[24:], uint64(off))
		le.PutUint64(s[32:], uint64(size))
		le.PutUint64(s[48:], 1)
		b.Write(s)
	}
	sh(0, 0, 0, 0)
	for i := range names {
		sh(offs[i], 1, 64+8*i, 8)
	}
	sh(offs[len(names)], 3, 64+8*len(names), len(strtab))
	return b.Bytes()
}

// ar returns a static archive of members (name -> bytes), in order.
func ar(members ...[]byte) []byte {
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for i, m := range members {
		fmt.Fprintf(&b, "%-16s%-12s%-6s%-6s%-8s%-10d`\n", fmt.Sprintf("m%d.o/", i), "0", "0", "0", "644", len(m))
		b.Write(m)
		if len(m)%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func TestScan(t *testing.T) {
	t.Parallel()
	fatbin := make([]byte, 64)
	binary.LittleEndian.PutUint32(fatbin, fatbinMagic)
	cubin := make([]byte, 64)
	copy(cubin, "\x7fELF\x02\x01\x01\x33\x07")
	cubin[18] = emCUDA
	const etRel, etExec, etDyn = 1, 2, 3
	tests := []struct {
		name    string
		data    []byte
		want    ScanResult
		wantErr string
	}{
		{name: "fatbin", data: fatbin, want: ScanResult{Kind: FileFatbin, DeviceCode: true}},
		{name: "cubin", data: cubin, want: ScanResult{Kind: FileCubin, DeviceCode: true}},
		{name: "ptx", data: []byte("//\n.version 7.8\n.target sm_80\n"), want: ScanResult{Kind: FilePTX, DeviceCode: true}},
		{name: "text", data: []byte("release notes\n"), want: ScanResult{Kind: FileOther}},
		{name: "empty", data: nil, want: ScanResult{Kind: FileOther}},
		{name: "executable with fatbin", data: elf64(etExec, ".text", ".nv_fatbin"), want: ScanResult{Kind: FileExecutable, DeviceCode: true}},
		{name: "host executable", data: elf64(etExec, ".text", ".data"), want: ScanResult{Kind: FileExecutable}},
		{name: "shared library with fatbin", data: elf64(etDyn, ".nv_fatbin"), want: ScanResult{Kind: FileShared, DeviceCode: true}},
		{name: "rdc object", data: elf64(etRel, "__nv_relfatbin"), want: ScanResult{Kind: FileObject, DeviceCode: true}},
		{name: "host object", data: elf64(etRel, ".text"), want: ScanResult{Kind: FileObject}},
		{name: "archive with device member", data: ar([]byte("symtab"), elf64(etRel, ".text"), elf64(etRel, ".nv_fatbin")), want: ScanResult{Kind: FileArchive, DeviceCode: true}},
		{name: "host archive", data: ar(elf64(etRel, ".text"), []byte("odd")), want: ScanResult{Kind: FileArchive}},
		{name: "archive member size past the end", data: []byte("!<arch>\nm.o/            0           0     0     644     99999999  `\n\x7fELF"), wantErr: "does not fit the file"},
		{name: "archive member size negative", data: []byte("!<arch>\nm.o/            0           0     0     644     -5        `\n"), wantErr: "does not fit the file"},
		{name: "archive header without end marker", data: []byte("!<arch>\nm.o/            0           0     0     644     4         XX\nabcd"), wantErr: "lacks its end marker"},
		{name: "truncated archive header", data: []byte("!<arch>\nm.o/   0"), wantErr: "member header at offset 8"},
		{name: "archive with a malformed ELF member", data: ar([]byte("\x7fELF\x02\x01\x01\x00garbage garbage garbage garbage")), wantErr: `archive member "m0.o/"`},
		{name: "truncated ELF", data: elf64(etExec, ".nv_fatbin")[:70], wantErr: "malformed ELF file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Scan(p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Scan = %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Scan = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestScanArchiveMemberBound: an archive of more members than
// scanMaxMembers is refused once the bound is reached, not walked on.
func TestScanArchiveMemberBound(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	hdr := fmt.Sprintf("%-16s%-12s%-6s%-6s%-8s%-10d`\n", "m.o/", "0", "0", "0", "644", 0)
	for range scanMaxMembers + 1 {
		b.WriteString(hdr)
	}
	p := filepath.Join(t.TempDir(), "many.a")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Scan(p); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d members", scanMaxMembers)) {
		t.Fatalf("Scan = %v, want the member bound", err)
	}
}

// TestScanNotRegular: a directory (or device) is refused, not read.
func TestScanNotRegular(t *testing.T) {
	t.Parallel()
	if _, err := Scan(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Scan(dir) = %v", err)
	}
}

// FuzzScan feeds arbitrary files to Scan: an error or a result, never a
// panic (the recover in Scan would turn one into an error; the fuzzer
// reports it by its text).
func FuzzScan(f *testing.F) {
	f.Add(elf64(2, ".nv_fatbin"))
	f.Add(ar(elf64(1, ".text"), elf64(1, "__nv_relfatbin")))
	f.Add([]byte("!<arch>\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Scan(p); err != nil && strings.Contains(err.Error(), "unreadable:") {
			t.Fatalf("Scan panicked: %v", err)
		}
	})
}
