package cuda

import (
	"testing"
)

// FuzzBinaryParsing feeds arbitrary bytes to the parsers that read build
// outputs (cubin headers, ELF sections, PTX sniffing, strings): bad input
// must produce an error or a diff, never a panic.
func FuzzBinaryParsing(f *testing.F) {
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF\x02\x01\x01\x33\x07")
	hdr[18] = 190 // EM_CUDA
	hdr[20] = 118 // CUDA's e_version
	hdr[48] = 90  // sm_90
	f.Add(hdr, []byte("//\n.version 7.8\n.target sm_80\n"))
	f.Add([]byte("\x7fELF"), []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		_, _ = cubinArch(a)
		_ = isPTXText(a)
		_ = elfMachine(b)
		d := compareBytes("x", a, b)
		if d.Identical != (string(a) == string(b)) {
			t.Fatalf("Identical = %v for equal=%v", d.Identical, string(a) == string(b))
		}
		_ = d.Summary()
	})
}
