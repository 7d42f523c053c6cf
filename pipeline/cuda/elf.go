package cuda

import (
	"bytes"
	"debug/elf"
	"fmt"

	"github.com/gpuattest/gpuattest/pipeline"
)

// emCUDA is the ELF machine of NVIDIA device code.
const emCUDA = 190

// The CUDA ELF header, as NVIDIA's tools write it. NVIDIA does not
// document it; these are the values LLVM decodes (llvm-readobj and the
// offload runtime read cubins with them), from
// llvm/include/llvm/BinaryFormat/ELF.h and getNVPTXCPUName in
// llvm/lib/Object/ELFObjectFile.cpp: ELFABIVERSION_CUDA_V1/V2,
// EF_CUDA_SM, EF_CUDA_SM_MASK, EF_CUDA_SM_OFFSET, EF_CUDA_ACCELERATORS_V1
// and EF_CUDA_ACCELERATORS, added by llvm/llvm-project#75624 (the V1
// layout) and #149534 (the V2 layout CUDA 12.8 introduced for Blackwell),
// and extended by #159354 after CUDA 13.0 moved every SM to V2 (an sm_75
// cubin with EI_ABIVERSION 8 and e_flags 0x6004B04 in #159088).
//
// Cubins from CUDA 11.8 agree: EI_ABIVERSION 7 and e_flags 0x005a055a for
// sm_90 (SM 0x5a in the low byte, the virtual SM compute_90 in bits 16-23
// (EF_CUDA_VIRTUAL_SM), 64-bit addressing and unified texture mode in
// bits 8-10).
const (
	// elfABIVersionCUDAV1 (EI_ABIVERSION 7, and the versions before it):
	// the SM number is the low byte of e_flags and 0x800 marks
	// architecture-specific code (sm_90a).
	elfABIVersionCUDAV1 = 7
	efCUDASM            = 0xff
	efCUDAAccelV1       = 0x800

	// elfABIVersionCUDAV2 (EI_ABIVERSION 8): the SM number is bits 8-15
	// and 0x8 marks architecture-specific code (sm_100a). The low byte's
	// other bits and bits 24-31 hold flags LLVM does not name.
	elfABIVersionCUDAV2 = 8
	efCUDASMMask        = 0xff00
	efCUDASMOffset      = 8
	efCUDAAccel         = 0x8
)

// cubinArch reads the SASS architecture of a device ELF from its header:
// EI_ABIVERSION says where e_flags keeps the SM number and its a suffix.
// A family-specific cubin (sm_100f) carries no mark of its own: it reads
// as the plain architecture (llvm/llvm-project#151604).
func cubinArch(b []byte) (string, error) {
	f, err := openELF(b)
	if err != nil {
		return "", fmt.Errorf("not an ELF file: %w", err)
	}
	if f.Machine != emCUDA {
		return "", fmt.Errorf("ELF machine %d is not NVIDIA CUDA (190)", f.Machine)
	}
	// e_flags sits at offset 48 in a 64-bit header, 36 in a 32-bit one.
	off := 48
	if f.Class == elf.ELFCLASS32 {
		off = 36
	}
	if len(b) < off+4 {
		return "", fmt.Errorf("truncated ELF header")
	}
	t, err := decodeCUDAFlags(f.ABIVersion, f.ByteOrder.Uint32(b[off:]))
	if err != nil {
		return "", err
	}
	return t.SM(), nil
}

// decodeCUDAFlags decodes the SM architecture in a cubin's e_flags under
// the CUDA ELF ABI version abi.
func decodeCUDAFlags(abi uint8, flags uint32) (pipeline.Target, error) {
	var sm uint32
	var accel bool
	switch {
	case abi <= elfABIVersionCUDAV1:
		sm, accel = flags&efCUDASM, flags&efCUDAAccelV1 != 0
	case abi == elfABIVersionCUDAV2:
		sm, accel = (flags&efCUDASMMask)>>efCUDASMOffset, flags&efCUDAAccel != 0
	default:
		return pipeline.Target{}, fmt.Errorf("CUDA ELF ABI version %d is newer than this gpuattest reads (7 and 8): cannot tell its SM architecture from e_flags 0x%x", abi, flags)
	}
	if sm == 0 {
		return pipeline.Target{}, fmt.Errorf("ELF flags 0x%x name no SM architecture (CUDA ELF ABI version %d)", flags, abi)
	}
	t := pipeline.Target{Major: int(sm / 10), Minor: int(sm % 10)}
	if accel {
		t.Suffix = "a"
	}
	return t, nil
}

// namedCubinArch reads the architecture of a cubin cuobjdump extracted as
// name (k.1.sm_90a.cubin) and checks it against the name's. The header
// marks no family-specific cubin (sm_100f), and an architecture-specific
// one only where the ABI defines the bit, so a name whose suffix the
// header lacks supplies it: the name comes from the fatbin's own record
// of the entry. Any other disagreement is an error.
func namedCubinArch(b []byte, name string) (string, error) {
	arch, err := cubinArch(b)
	if err != nil {
		return "", err
	}
	m := nameArch.FindStringSubmatch(name)
	if m == nil || m[1] != "sm" || "sm_"+m[2] == arch {
		return arch, nil
	}
	named, _, err := pipeline.ParseCode("sm_" + m[2])
	if err == nil && named.Specific() && (pipeline.Target{Major: named.Major, Minor: named.Minor}).SM() == arch {
		return named.SM(), nil
	}
	return "", fmt.Errorf("its ELF header says %s", arch)
}

func isELF(b []byte) bool { return len(b) > 20 && string(b[:4]) == "\x7fELF" }

func elfMachine(b []byte) uint16 {
	f, err := openELF(b)
	if err != nil {
		return 0
	}
	return uint16(f.Machine)
}

// openELF parses b as ELF. NVIDIA cubins put the CUDA toolkit version
// (e.g. 118) in e_version, which debug/elf refuses; the parse uses a copy
// with e_version set to EV_CURRENT, leaving every other byte as it is.
func openELF(b []byte) (*elf.File, error) {
	if len(b) >= 24 && b[6] == 1 {
		var v uint32
		switch b[5] {
		case 1: // little endian
			v = uint32(b[20]) | uint32(b[21])<<8 | uint32(b[22])<<16 | uint32(b[23])<<24
		case 2:
			v = uint32(b[23]) | uint32(b[22])<<8 | uint32(b[21])<<16 | uint32(b[20])<<24
		}
		if v != 1 {
			c := append([]byte(nil), b...)
			if b[5] == 1 {
				c[20], c[21], c[22], c[23] = 1, 0, 0, 0
			} else {
				c[20], c[21], c[22], c[23] = 0, 0, 0, 1
			}
			b = c
		}
	}
	return elf.NewFile(bytes.NewReader(b))
}
