package cuda

import (
	"bytes"
	"debug/elf"
	"fmt"
)

// emCUDA is the ELF machine of NVIDIA device code.
const emCUDA = 190

// cubinArch reads the SASS architecture of a device ELF from e_flags.
func cubinArch(b []byte) (string, error) {
	f, err := openELF(b)
	if err != nil {
		return "", fmt.Errorf("not an ELF file: %w", err)
	}
	if f.Machine != emCUDA {
		return "", fmt.Errorf("ELF machine %d is not NVIDIA CUDA (190)", f.Machine)
	}
	// e_flags sits at offset 48 in a 64-bit header, 36 in a 32-bit one;
	// its low byte is the SM number (EF_CUDA_SM).
	off := 48
	if f.Class == elf.ELFCLASS32 {
		off = 36
	}
	if len(b) < off+4 {
		return "", fmt.Errorf("truncated ELF header")
	}
	flags := f.ByteOrder.Uint32(b[off:])
	sm := flags & 0xff
	if sm == 0 {
		return "", fmt.Errorf("ELF flags 0x%x name no SM architecture", flags)
	}
	return fmt.Sprintf("sm_%d", sm), nil
}

func isELF(b []byte) bool { return len(b) > 20 && string(b[:4]) == "\x7fELF" }

func elfMachine(b []byte) uint16 {
	f, err := openELF(b)
	if err != nil {
		return 0
	}
	return uint16(f.Machine)
}

// openELF parses b as ELF. NVIDIA cubins put the CUDA ELF ABI version
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
