package cuda

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cubinHeader returns a 64-bit little-endian NVIDIA CUDA ELF header (no
// sections) with the given OS ABI, ABI version, e_version and e_flags, as
// nvcc writes them.
func cubinHeader(osabi, abiVersion byte, version, flags uint32) []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4] = 2 // ELFCLASS64
	h[5] = 1 // little endian
	h[6] = 1 // EV_CURRENT
	h[7] = osabi
	h[8] = abiVersion
	binary.LittleEndian.PutUint16(h[16:], 2)   // ET_EXEC
	binary.LittleEndian.PutUint16(h[18:], 190) // EM_CUDA
	binary.LittleEndian.PutUint32(h[20:], version)
	binary.LittleEndian.PutUint32(h[48:], flags)
	binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize
	return h
}

// TestCubinArch decodes the SM architecture of synthetic cubin headers
// under both CUDA ELF ABIs. The V1 values are those CUDA 11.8's nvcc
// writes (sm_80: e_flags 0x00500550, sm_90: 0x005a055a); sm_90a sets
// EF_CUDA_ACCELERATORS_V1 (0x800). Under V2 (CUDA 12.8 for Blackwell, CUDA
// 13 for every SM) the SM sits in bits 8-15 and the a suffix is
// EF_CUDA_ACCELERATORS (0x8); the sm_75 value is the one in
// llvm/llvm-project#159088.
func TestCubinArch(t *testing.T) {
	t.Parallel()
	const v1, v2 = 7, 8
	const osabiV1, osabiV2 = 0x33, 0x41
	tests := []struct {
		name    string
		hdr     []byte
		want    string
		wantErr string
	}{
		{name: "sm_80", hdr: cubinHeader(osabiV1, v1, 118, 0x00500550), want: "sm_80"},
		{name: "sm_90", hdr: cubinHeader(osabiV1, v1, 118, 0x005a055a), want: "sm_90"},
		{name: "sm_90a", hdr: cubinHeader(osabiV1, v1, 120, 0x005a0d5a), want: "sm_90a"},
		{name: "sm_100", hdr: cubinHeader(osabiV2, v2, 128, 0x06006404), want: "sm_100"},
		{name: "sm_100a", hdr: cubinHeader(osabiV2, v2, 128, 0x0600640c), want: "sm_100a"},
		{name: "sm_120", hdr: cubinHeader(osabiV2, v2, 128, 0x06007804), want: "sm_120"},
		{name: "sm_90 under V2 (CUDA 13)", hdr: cubinHeader(osabiV2, v2, 130, 0x06005a04), want: "sm_90"},
		{name: "sm_75 under V2 (CUDA 13)", hdr: cubinHeader(osabiV2, v2, 1, 0x06004b04), want: "sm_75"},
		{name: "no SM under V2", hdr: cubinHeader(osabiV2, v2, 128, 0x06000004), wantErr: "name no SM architecture"},
		{name: "unknown ABI version", hdr: cubinHeader(osabiV2, 9, 128, 0x06006404), wantErr: "ABI version 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := cubinArch(tt.hdr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("cubinArch = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("cubinArch = %q, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// TestNamedCubinArch: cuobjdump's name of an extracted cubin supplies the
// a or f suffix its header does not mark, and any other disagreement
// between name and header is an error.
func TestNamedCubinArch(t *testing.T) {
	t.Parallel()
	sm100 := cubinHeader(0x41, 8, 128, 0x06006404)
	sm100a := cubinHeader(0x41, 8, 128, 0x0600640c)
	tests := []struct {
		name, file string
		hdr        []byte
		want       string
		wantErr    string
	}{
		{name: "plain", file: "k.1.sm_100.cubin", hdr: sm100, want: "sm_100"},
		{name: "marked a", file: "k.1.sm_100a.cubin", hdr: sm100a, want: "sm_100a"},
		{name: "family f is unmarked", file: "k.1.sm_100f.cubin", hdr: sm100, want: "sm_100f"},
		{name: "a the header lacks", file: "k.1.sm_100a.cubin", hdr: sm100, want: "sm_100a"},
		{name: "header a, name plain", file: "k.1.sm_100.cubin", hdr: sm100a, wantErr: "its ELF header says sm_100a"},
		{name: "other SM", file: "k.1.sm_120.cubin", hdr: sm100, wantErr: "its ELF header says sm_100"},
		{name: "no arch in name", file: "k.cubin", hdr: sm100, want: "sm_100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := namedCubinArch(tt.hdr, tt.file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("namedCubinArch = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("namedCubinArch = %q, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// TestSortArchs orders architectures by compute capability, so sm_100
// follows sm_90 (a string sort would put it first).
func TestSortArchs(t *testing.T) {
	t.Parallel()
	got := []string{"sm_120", "sm_90a", "sm_100", "sm_80", "sm_90", "odd"}
	sortArchs(got)
	if diff := cmp.Diff([]string{"sm_80", "sm_90", "sm_90a", "sm_100", "sm_120", "odd"}, got); diff != "" {
		t.Errorf("sortArchs (-want +got):\n%s", diff)
	}
	d := CompareArchs("SASS", []string{"sm_80"}, []string{"sm_80", "sm_90", "sm_100"})
	if diff := cmp.Diff([]string{"sm_90", "sm_100"}, d.Missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
}
