package gpuevidence

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// The opaque field types NVIDIA GPUs send in a MEASUREMENTS response
// (NVIDIA's GPU opaque data format, version 0 and 1).
const (
	OpaqueCertIssuerName      uint16 = 1
	OpaqueCertAuthorityKeyID  uint16 = 2
	OpaqueDriverVersion       uint16 = 3
	OpaqueGPUInfo             uint16 = 4
	OpaqueSKU                 uint16 = 5
	OpaqueVBIOSVersion        uint16 = 6
	OpaqueManufacturerID      uint16 = 7
	OpaqueTamperDetection     uint16 = 8
	OpaqueSMC                 uint16 = 9
	OpaqueVPR                 uint16 = 10
	OpaqueNVDEC0Status        uint16 = 11
	OpaqueMSRSCount           uint16 = 12
	OpaqueCPRInfo             uint16 = 13
	OpaqueBoardID             uint16 = 14
	OpaqueChipSKU             uint16 = 15
	OpaqueChipSKUMod          uint16 = 16
	OpaqueProject             uint16 = 17
	OpaqueProjectSKU          uint16 = 18
	OpaqueProjectSKUMod       uint16 = 19
	OpaqueFWID                uint16 = 20
	OpaqueProtectedPCIeStatus uint16 = 21
	OpaqueSwitchPDI           uint16 = 22
	OpaqueFloorsweptPorts     uint16 = 23
	OpaquePositionID          uint16 = 24
	OpaqueLockSwitchStatus    uint16 = 25
	OpaqueGPULinkConn         uint16 = 32
	OpaqueSysEnableStatus     uint16 = 33
	OpaqueDataVersion         uint16 = 34
	OpaqueChipInfo            uint16 = 35
	OpaqueFeatureFlag         uint16 = 36
)

// maxOpaqueVersion is the newest opaque data version this package
// understands; a newer one is refused rather than half read.
const maxOpaqueVersion = 1

var opaqueNames = map[uint16]string{
	OpaqueCertIssuerName: "CERT_ISSUER_NAME", OpaqueCertAuthorityKeyID: "CERT_AUTHORITY_KEY_IDENTIFIER",
	OpaqueDriverVersion: "DRIVER_VERSION", OpaqueGPUInfo: "GPU_INFO", OpaqueSKU: "SKU",
	OpaqueVBIOSVersion: "VBIOS_VERSION", OpaqueManufacturerID: "MANUFACTURER_ID",
	OpaqueTamperDetection: "TAMPER_DETECTION", OpaqueSMC: "SMC", OpaqueVPR: "VPR",
	OpaqueNVDEC0Status: "NVDEC0_STATUS", OpaqueMSRSCount: "MSRSCNT", OpaqueCPRInfo: "CPRINFO",
	OpaqueBoardID: "BOARD_ID", OpaqueChipSKU: "CHIP_SKU", OpaqueChipSKUMod: "CHIP_SKU_MOD",
	OpaqueProject: "PROJECT", OpaqueProjectSKU: "PROJECT_SKU", OpaqueProjectSKUMod: "PROJECT_SKU_MOD",
	OpaqueFWID: "FWID", OpaqueProtectedPCIeStatus: "PROTECTED_PCIE_STATUS", OpaqueSwitchPDI: "SWITCH_PDI",
	OpaqueFloorsweptPorts: "FLOORSWEPT_PORTS", OpaquePositionID: "POSITION_ID",
	OpaqueLockSwitchStatus: "LOCK_SWITCH_STATUS", OpaqueGPULinkConn: "GPU_LINK_CONN",
	OpaqueSysEnableStatus: "SYS_ENABLE_STATUS", OpaqueDataVersion: "OPAQUE_DATA_VERSION",
	OpaqueChipInfo: "CHIP_INFO", OpaqueFeatureFlag: "FEATURE_FLAG",
}

// opaqueName is the field's name as NVIDIA's tools print it
// ("OPAQUE_FIELD_ID_FWID"), or its number when unknown.
func opaqueName(t uint16) string {
	if n, ok := opaqueNames[t]; ok {
		return "OPAQUE_FIELD_ID_" + n
	}
	return fmt.Sprintf("opaque field type %d", t)
}

// NVDEC0 status values: an enabled decoder is measured at RIM index 35,
// a disabled one is not.
const (
	nvdec0Enabled  = 0xaa
	nvdec0Disabled = 0x55
)

// gpuOpaque is a response's opaque data read as a GPU's: every field
// known, none twice, the version understood.
type gpuOpaque map[uint16][]byte

func readGPUOpaque(fields []OpaqueField) (gpuOpaque, error) {
	o := gpuOpaque{}
	for _, f := range fields {
		if _, ok := opaqueNames[f.Type]; !ok {
			return nil, fmt.Errorf("opaque data: unknown field type %d\nhint: the GPU firmware is newer than this verifier", f.Type)
		}
		if _, dup := o[f.Type]; dup {
			return nil, fmt.Errorf("opaque data: %s appears twice", opaqueName(f.Type))
		}
		o[f.Type] = f.Value
	}
	if v, ok := o[OpaqueDataVersion]; ok {
		if len(v) > 8 {
			return nil, fmt.Errorf("opaque data: %s is %d bytes, at most 8 expected", opaqueName(OpaqueDataVersion), len(v))
		}
		if n := leUint(v); n > maxOpaqueVersion {
			return nil, fmt.Errorf("opaque data: version %d, this verifier reads up to %d\nhint: the GPU firmware is newer than this verifier", n, maxOpaqueVersion)
		}
	}
	if v, ok := o[OpaqueMSRSCount]; ok && len(v)%4 != 0 {
		return nil, fmt.Errorf("opaque data: %s is %d bytes, not a list of 4-byte counts", opaqueName(OpaqueMSRSCount), len(v))
	}
	return o, nil
}

func leUint(b []byte) uint64 {
	var x [8]byte
	copy(x[:], b)
	return binary.LittleEndian.Uint64(x[:])
}

// str is a NUL-terminated string field.
func (o gpuOpaque) str(t uint16) (string, bool) {
	v, ok := o[t]
	if !ok {
		return "", false
	}
	if i := bytes.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	}
	return string(v), true
}

// vbiosVersion formats VBIOS_VERSION as NVIDIA writes it
// ("96.00.5E.00.04"): bytes 3, 2, 1 and 0, then byte 4, in hex.
func (o gpuOpaque) vbiosVersion() (string, bool) {
	v, ok := o[OpaqueVBIOSVersion]
	if !ok || len(v) != 8 {
		return "", false
	}
	parts := []byte{v[3], v[2], v[1], v[0], v[4]}
	s := make([]string, len(parts))
	for i, b := range parts {
		s[i] = strings.ToUpper(hex.EncodeToString([]byte{b}))
	}
	return strings.Join(s, "."), true
}

// nvdec0 reports whether index 35 is measured: true for an enabled
// decoder, false for a disabled one, an error for anything else.
func (o gpuOpaque) nvdec0() (bool, error) {
	v, ok := o[OpaqueNVDEC0Status]
	if !ok || len(v) == 0 {
		return false, fmt.Errorf("opaque data: no %s (whether index 35 is measured)", opaqueName(OpaqueNVDEC0Status))
	}
	switch v[0] {
	case nvdec0Enabled:
		return true, nil
	case nvdec0Disabled:
		return false, nil
	}
	return false, fmt.Errorf("opaque data: %s is %#02x, expected 0xaa (enabled) or 0x55 (disabled)", opaqueName(OpaqueNVDEC0Status), v[0])
}
