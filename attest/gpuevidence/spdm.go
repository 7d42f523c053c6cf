package gpuevidence

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// SPDM 1.1 GET_MEASUREMENTS as NVIDIA GPUs answer it (DMTF DSP0274
// 1.1.0, sections 10.11 and 10.11.1).
const (
	spdmVersion11         = 0x11
	spdmGetMeasurements   = 0xe0
	spdmMeasurements      = 0x60
	dmtfMeasurementSpec   = 0x01 // MeasurementSpecification bit 0: DMTF
	nonceSize             = 32
	requestSize           = 4 + nonceSize + 1 // header, nonce, SlotIDParam
	signatureSize         = 96                // raw P-384 r||s
	measurementHeaderSize = 4                 // index, spec, 2-byte size
	dmtfValueHeaderSize   = 3                 // type, 2-byte size
)

// Request is a parsed SPDM 1.1 GET_MEASUREMENTS request: the part of an
// attestation report the verifier's nonce is in.
type Request struct {
	// Version is SPDMVersion (0x11).
	Version uint8
	// Code is RequestResponseCode (0xe0, GET_MEASUREMENTS).
	Code uint8
	// Param1 and Param2 are the request's attributes (0x01: signature
	// requested) and measurement operation (0xff: all measurements).
	Param1, Param2 uint8
	// Nonce is the requester's nonce the response's signature covers.
	Nonce [nonceSize]byte
	// SlotID is SlotIDParam, the certificate slot that signs.
	SlotID uint8
}

// Response is a parsed SPDM 1.1 MEASUREMENTS response.
type Response struct {
	// Version is SPDMVersion (0x11).
	Version uint8
	// Code is RequestResponseCode (0x60, MEASUREMENTS).
	Code uint8
	// Param1 and Param2 are the response's parameters.
	Param1, Param2 uint8
	// Blocks are the measurement blocks in the order the GPU sent them.
	Blocks []MeasurementBlock
	// RecordLength is MeasurementRecordLength, the bytes the blocks take.
	RecordLength int
	// Nonce is the responder's own nonce.
	Nonce [nonceSize]byte
	// Opaque are the opaque data fields in the order the GPU sent them.
	Opaque []OpaqueField
	// OpaqueLength is OpaqueLength, the bytes the opaque fields take.
	OpaqueLength int
	// Signature is the raw P-384 signature, r and s of 48 bytes each.
	Signature []byte
}

// MeasurementBlock is one DMTF measurement block of a response.
type MeasurementBlock struct {
	// Index is the block's index as the GPU numbers it (1-based); RIMs
	// number the same measurement Index-1.
	Index uint8
	// ValueType is DMTFSpecMeasurementValueType.
	ValueType uint8
	// Value is DMTFSpecMeasurementValue, a SHA-384 digest on NVIDIA GPUs.
	Value []byte
}

// OpaqueField is one type-length-value field of a response's opaque data.
type OpaqueField struct {
	// Type is the field's type (OpaqueFWID and its siblings).
	Type uint16
	// Value is the field's bytes.
	Value []byte
}

// AttestationReport is an attestation report as NVIDIA GPUs return it: the SPDM
// request followed by the signed response.
type AttestationReport struct {
	// Request is the GET_MEASUREMENTS request.
	Request Request
	// Response is the MEASUREMENTS response.
	Response Response
	// Signed is the region the signature covers: the request and the
	// response up to its signature.
	Signed []byte
}

// ParseAttestationReport parses raw, an attestation report (request then
// response, as nvmlDeviceGetConfComputeGpuAttestationReport and
// nvattest return it). Every length is checked against the bytes
// present; trailing bytes are an error.
func ParseAttestationReport(raw []byte) (*AttestationReport, error) {
	if len(raw) < requestSize+signatureSize {
		return nil, fmt.Errorf("attestation report: %d bytes, too short for an SPDM request and a signed response", len(raw))
	}
	req, err := parseRequest(raw[:requestSize])
	if err != nil {
		return nil, err
	}
	resp, err := parseResponse(raw[requestSize:])
	if err != nil {
		return nil, err
	}
	return &AttestationReport{Request: *req, Response: *resp, Signed: raw[:len(raw)-signatureSize]}, nil
}

func parseRequest(b []byte) (*Request, error) {
	if len(b) != requestSize {
		return nil, fmt.Errorf("SPDM request: %d bytes, expected %d", len(b), requestSize)
	}
	r := &Request{Version: b[0], Code: b[1], Param1: b[2], Param2: b[3], SlotID: b[4+nonceSize]}
	copy(r.Nonce[:], b[4:4+nonceSize])
	if r.Version != spdmVersion11 {
		return nil, fmt.Errorf("SPDM request: SPDMVersion %#02x, expected %#02x (SPDM 1.1)", r.Version, spdmVersion11)
	}
	if r.Code != spdmGetMeasurements {
		return nil, fmt.Errorf("SPDM request: RequestResponseCode %#02x, expected %#02x (GET_MEASUREMENTS)", r.Code, spdmGetMeasurements)
	}
	return r, nil
}

// cursor reads a response field by field and names the field that did
// not fit.
type cursor struct {
	b   []byte
	off int
	err error
}

func (c *cursor) take(n int, field string) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > len(c.b)-c.off {
		c.err = fmt.Errorf("SPDM response: %s at offset %d needs %d bytes, %d left", field, c.off, n, len(c.b)-c.off)
		return nil
	}
	v := c.b[c.off : c.off+n]
	c.off += n
	return v
}

func (c *cursor) u8(field string) uint8 {
	if v := c.take(1, field); v != nil {
		return v[0]
	}
	return 0
}

func (c *cursor) le(n int, field string) int {
	v := c.take(n, field)
	x := 0
	for i := len(v) - 1; i >= 0; i-- {
		x = x<<8 | int(v[i])
	}
	return x
}

func parseResponse(b []byte) (*Response, error) {
	c := &cursor{b: b}
	r := &Response{Version: c.u8("SPDMVersion"), Code: c.u8("RequestResponseCode"), Param1: c.u8("Param1"), Param2: c.u8("Param2")}
	n := int(c.u8("NumberOfBlocks"))
	r.RecordLength = c.le(3, "MeasurementRecordLength")
	record := c.take(r.RecordLength, "MeasurementRecord")
	copy(r.Nonce[:], c.take(nonceSize, "Nonce"))
	r.OpaqueLength = c.le(2, "OpaqueLength")
	opaque := c.take(r.OpaqueLength, "OpaqueData")
	r.Signature = c.take(signatureSize, "Signature")
	if c.err != nil {
		return nil, c.err
	}
	if c.off != len(b) {
		return nil, fmt.Errorf("SPDM response: %d bytes after the signature", len(b)-c.off)
	}
	if r.Version != spdmVersion11 {
		return nil, fmt.Errorf("SPDM response: SPDMVersion %#02x, expected %#02x (SPDM 1.1)", r.Version, spdmVersion11)
	}
	if r.Code != spdmMeasurements {
		return nil, fmt.Errorf("SPDM response: RequestResponseCode %#02x, expected %#02x (MEASUREMENTS)", r.Code, spdmMeasurements)
	}
	if n == 0 {
		return nil, fmt.Errorf("SPDM response: NumberOfBlocks is 0")
	}
	var err error
	if r.Blocks, err = parseBlocks(record, n); err != nil {
		return nil, err
	}
	if len(opaque) == 0 {
		return nil, fmt.Errorf("SPDM response: no opaque data (NVIDIA GPUs always send it)")
	}
	if r.Opaque, err = parseOpaque(opaque); err != nil {
		return nil, err
	}
	return r, nil
}

func parseBlocks(record []byte, n int) ([]MeasurementBlock, error) {
	blocks := make([]MeasurementBlock, 0, n)
	off := 0
	for i := range n {
		if len(record)-off < measurementHeaderSize {
			return nil, fmt.Errorf("SPDM response: measurement block %d of %d at record offset %d: truncated header", i+1, n, off)
		}
		idx, spec := record[off], record[off+1]
		size := int(binary.LittleEndian.Uint16(record[off+2:]))
		off += measurementHeaderSize
		if idx == 0 {
			return nil, fmt.Errorf("SPDM response: measurement block %d of %d: index 0 (indexes start at 1)", i+1, n)
		}
		if spec != dmtfMeasurementSpec {
			return nil, fmt.Errorf("SPDM response: measurement block index %d: MeasurementSpecification %#02x, expected %#02x (DMTF)", idx, spec, dmtfMeasurementSpec)
		}
		if size > len(record)-off {
			return nil, fmt.Errorf("SPDM response: measurement block index %d: MeasurementSize %d, %d bytes left", idx, size, len(record)-off)
		}
		m := record[off : off+size]
		off += size
		if len(m) < dmtfValueHeaderSize {
			return nil, fmt.Errorf("SPDM response: measurement block index %d: %d bytes, too short for a DMTF measurement", idx, len(m))
		}
		vsize := int(binary.LittleEndian.Uint16(m[1:]))
		if vsize != len(m)-dmtfValueHeaderSize {
			return nil, fmt.Errorf("SPDM response: measurement block index %d: DMTFSpecMeasurementValueSize %d, block holds %d", idx, vsize, len(m)-dmtfValueHeaderSize)
		}
		if slices.ContainsFunc(blocks, func(b MeasurementBlock) bool { return b.Index == idx }) {
			return nil, fmt.Errorf("SPDM response: measurement block index %d appears twice", idx)
		}
		blocks = append(blocks, MeasurementBlock{Index: idx, ValueType: m[0], Value: m[dmtfValueHeaderSize:]})
	}
	if off != len(record) {
		return nil, fmt.Errorf("SPDM response: %d bytes after the %d measurement blocks", len(record)-off, n)
	}
	return blocks, nil
}

func parseOpaque(b []byte) ([]OpaqueField, error) {
	var fields []OpaqueField
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			return nil, fmt.Errorf("SPDM response: opaque data offset %d: truncated field header", off)
		}
		t := binary.LittleEndian.Uint16(b[off:])
		size := int(binary.LittleEndian.Uint16(b[off+2:]))
		off += 4
		if size > len(b)-off {
			return nil, fmt.Errorf("SPDM response: opaque field %s: size %d, %d bytes left", opaqueName(t), size, len(b)-off)
		}
		fields = append(fields, OpaqueField{Type: t, Value: b[off : off+size]})
		off += size
	}
	return fields, nil
}
