package gpuevidencetest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
)

// GPUOptions describe a simulated GPU. The zero value is a Hopper GPU
// with driver 570.124.03 and VBIOS 96.00.74.00.20, NVDEC0 disabled.
type GPUOptions struct {
	// Arch is ArchHopper (default) or ArchBlackwell.
	Arch gpuevidence.Arch
	// DriverVersion is the driver version the report states.
	DriverVersion string
	// VBIOSVersion is the VBIOS version, "96.00.74.00.20" form.
	VBIOSVersion string
	// Project, ProjectSKU and ChipSKU name the board (they name the
	// VBIOS RIM); defaults "1010", "0205", "862".
	Project, ProjectSKU, ChipSKU string
	// NVDEC0Enabled makes index 35 a measured one.
	NVDEC0Enabled bool
	// NoFWID leaves the FWID out of the report (a verifier must refuse
	// it); the leaf certificate still has one.
	NoFWID bool
}

// VBIOSIndexes and DriverIndexes are the RIM indexes the simulated VBIOS
// and driver RIMs measure (disjoint, as NVIDIA's are; 35 is the driver's
// NVDEC0 measurement).
var (
	VBIOSIndexes  = span(0, 16)
	DriverIndexes = span(16, 40)
)

func span(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// numBlocks is how many measurement blocks a report carries (NVIDIA's
// Hopper reports carry 64).
const numBlocks = 64

// GPU is a simulated GPU: its own device key and certificate chain, and
// the measurements its reports carry.
type GPU struct {
	// Options are the GPU's options, defaults filled in.
	Options GPUOptions
	// Leaf and BROM are the GPU's two own certificates (the firmware's
	// per-boot leaf and the chip's identity).
	Leaf, BROM Issuer
	// Chain is the PEM chain its evidence carries, leaf first.
	Chain []byte
	// FWID is the firmware ID in the leaf and in each report.
	FWID []byte
	// Measurements are the values the reports carry, by RIM index (block
	// index minus 1). A test may change one after making the RIMs.
	Measurements map[int][]byte
}

// NewGPU makes a simulated GPU certified under ca.
func (ca *CA) NewGPU(opts GPUOptions) (*GPU, error) {
	if opts.Arch == "" {
		opts.Arch = gpuevidence.ArchHopper
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&opts.DriverVersion, "570.124.03")
	def(&opts.VBIOSVersion, "96.00.74.00.20")
	def(&opts.Project, "1010")
	def(&opts.ProjectSKU, "0205")
	def(&opts.ChipSKU, "862")
	if _, err := vbiosBytes(opts.VBIOSVersion); err != nil {
		return nil, err
	}
	g := &GPU{Options: opts, Measurements: map[int][]byte{}}
	for i := range numBlocks {
		g.Measurements[i] = golden(opts, i)
	}
	fw := sha512.Sum384([]byte("simulated firmware " + opts.DriverVersion + " " + opts.VBIOSVersion))
	g.FWID = fw[:]
	nb := ca.Provisioner.Cert.NotBefore
	var err error
	if g.BROM, err = newIssuer(&ca.Provisioner, Simulated+" GH100 A01 GSP BROM", true, nb, ca.Provisioner.Cert.NotAfter); err != nil {
		return nil, err
	}
	ext, err := fwidExtension(opts.Arch, g.FWID)
	if err != nil {
		return nil, err
	}
	if g.Leaf, err = newIssuer(&g.BROM, Simulated+" GH100 A01 GSP FMC LF", false, nb, ca.Provisioner.Cert.NotAfter, ext); err != nil {
		return nil, err
	}
	g.Chain = PEM(g.Leaf.Cert, g.BROM.Cert, ca.Provisioner.Cert, ca.Identity.Cert, ca.DeviceRoot.Cert)
	return g, nil
}

// golden is the simulated firmware's value at a RIM index: zero where
// nothing is measured, as on real GPUs.
func golden(o GPUOptions, idx int) []byte {
	ver := ""
	switch {
	case idx < VBIOSIndexes[len(VBIOSIndexes)-1]+1:
		ver = "vbios " + o.VBIOSVersion
	case idx < DriverIndexes[len(DriverIndexes)-1]+1:
		ver = "driver " + o.DriverVersion
	default:
		return make([]byte, 48)
	}
	h := sha512.Sum384([]byte(fmt.Sprintf("simulated measurement %s index %d", ver, idx)))
	return h[:]
}

var (
	oidFWIDHopper    = asn1.ObjectIdentifier{2, 23, 133, 5, 4, 1}
	oidFWIDBlackwell = asn1.ObjectIdentifier{2, 23, 133, 5, 4, 1, 1}
	oidSHA384        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
)

type fwidASN1 struct {
	HashAlg asn1.ObjectIdentifier
	Digest  []byte
}

// fwidExtension is the leaf's DICE extension in NVIDIA's layout for arch.
func fwidExtension(arch gpuevidence.Arch, fwid []byte) (pkix.Extension, error) {
	f, err := asn1.Marshal(fwidASN1{HashAlg: oidSHA384, Digest: fwid})
	if err != nil {
		return pkix.Extension{}, err
	}
	if arch == gpuevidence.ArchBlackwell {
		// TcbInfo: vendor [0], model [1], ..., fwids [6] (the firmware's
		// FWID first, then a zero one, as Blackwell's leaf has).
		zero, _ := asn1.Marshal(fwidASN1{HashAlg: oidSHA384, Digest: make([]byte, 48)})
		list := asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 6, IsCompound: true, Bytes: append(f, zero...)}
		vendor := asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, Bytes: []byte(Simulated)}
		v, err := asn1.Marshal([]any{vendor, list})
		if err != nil {
			return pkix.Extension{}, err
		}
		return pkix.Extension{Id: oidFWIDBlackwell, Value: v}, nil
	}
	spki := asn1.RawValue{FullBytes: []byte{0x30, 0x00}}
	v, err := asn1.Marshal([]any{1, spki, asn1.RawValue{FullBytes: f}})
	if err != nil {
		return pkix.Extension{}, err
	}
	return pkix.Extension{Id: oidFWIDHopper, Value: v}, nil
}

func vbiosBytes(v string) ([]byte, error) {
	p := strings.Split(v, ".")
	if len(p) != 5 {
		return nil, fmt.Errorf("VBIOS version %q: expected five hex parts", v)
	}
	var b [5]byte
	for i, s := range p {
		n, err := strconv.ParseUint(s, 16, 8)
		if err != nil {
			return nil, fmt.Errorf("VBIOS version %q: %w", v, err)
		}
		b[i] = byte(n)
	}
	// The report's layout: bytes 3, 2, 1, 0 then 4 read as the version.
	return []byte{b[3], b[2], b[1], b[0], b[4], 0, 0, 0}, nil
}

func opaqueField(buf *bytes.Buffer, t uint16, v []byte) {
	var h [4]byte
	binary.LittleEndian.PutUint16(h[:], t)
	binary.LittleEndian.PutUint16(h[2:], uint16(len(v)))
	buf.Write(h[:])
	buf.Write(v)
}

// Report makes a signed SPDM 1.1 attestation report over nonce.
func (g *GPU) Report(nonce gpuevidence.Nonce) ([]byte, error) {
	o := g.Options
	var b bytes.Buffer
	b.Write([]byte{0x11, 0xe0, 0x01, 0xff})
	b.Write(nonce[:])
	b.WriteByte(0x00)
	// Response header.
	var rec bytes.Buffer
	for i := range numBlocks {
		v := g.Measurements[i]
		rec.Write([]byte{byte(i + 1), 0x01})
		var sz [2]byte
		binary.LittleEndian.PutUint16(sz[:], uint16(3+len(v)))
		rec.Write(sz[:])
		rec.WriteByte(0x01)
		binary.LittleEndian.PutUint16(sz[:], uint16(len(v)))
		rec.Write(sz[:])
		rec.Write(v)
	}
	b.Write([]byte{0x11, 0x60, 0x00, 0x00, numBlocks})
	l := rec.Len()
	b.Write([]byte{byte(l), byte(l >> 8), byte(l >> 16)})
	b.Write(rec.Bytes())
	var respNonce [32]byte
	if _, err := rand.Read(respNonce[:]); err != nil {
		return nil, err
	}
	b.Write(respNonce[:])
	var op bytes.Buffer
	vb, _ := vbiosBytes(o.VBIOSVersion)
	opaqueField(&op, gpuevidence.OpaqueDriverVersion, append([]byte(o.DriverVersion), 0))
	opaqueField(&op, gpuevidence.OpaqueVBIOSVersion, vb)
	opaqueField(&op, gpuevidence.OpaqueProject, append([]byte(o.Project), 0))
	opaqueField(&op, gpuevidence.OpaqueProjectSKU, append([]byte(o.ProjectSKU), 0))
	opaqueField(&op, gpuevidence.OpaqueChipSKU, append([]byte(o.ChipSKU), 0))
	nvdec := byte(0x55)
	if o.NVDEC0Enabled {
		nvdec = 0xaa
	}
	opaqueField(&op, gpuevidence.OpaqueNVDEC0Status, []byte{nvdec})
	if !o.NoFWID {
		opaqueField(&op, gpuevidence.OpaqueFWID, g.FWID)
	}
	var ol [2]byte
	binary.LittleEndian.PutUint16(ol[:], uint16(op.Len()))
	b.Write(ol[:])
	b.Write(op.Bytes())
	h := sha512.Sum384(b.Bytes())
	r, s, err := ecdsa.Sign(rand.Reader, g.Leaf.Key.(*ecdsa.PrivateKey), h[:])
	if err != nil {
		return nil, err
	}
	var sig [96]byte
	r.FillBytes(sig[:48])
	s.FillBytes(sig[48:])
	b.Write(sig[:])
	return b.Bytes(), nil
}

// Evidence makes the GPU's evidence over nonce in NVIDIA's serialized
// form.
func (g *GPU) Evidence(nonce gpuevidence.Nonce) (gpuevidence.Item, error) {
	rep, err := g.Report(nonce)
	if err != nil {
		return gpuevidence.Item{}, err
	}
	return gpuevidence.Item{
		Arch:        g.Options.Arch,
		Nonce:       hex.EncodeToString(nonce[:]),
		Evidence:    base64.StdEncoding.EncodeToString(rep),
		Certificate: base64.StdEncoding.EncodeToString(g.Chain),
	}, nil
}

// RIMs makes the GPU's driver and VBIOS RIMs from its current
// measurements, signed by signer, and returns them by ID.
func (ca *CA) RIMs(g *GPU, signer Issuer) (map[string][]byte, error) {
	it, err := g.Evidence(gpuevidence.Nonce{})
	if err != nil {
		return nil, err
	}
	driverID, vbiosID, err := gpuevidence.RIMIDs(it)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, r := range []struct {
		id, version string
		idx         []int
	}{{driverID, g.Options.DriverVersion, DriverIndexes}, {vbiosID, g.Options.VBIOSVersion, VBIOSIndexes}} {
		ms := map[int][]byte{}
		for _, i := range r.idx {
			ms[i] = g.Measurements[i]
		}
		doc, err := ca.RIM(r.id, r.version, ms, signer)
		if err != nil {
			return nil, err
		}
		out[r.id] = doc
	}
	return out, nil
}
