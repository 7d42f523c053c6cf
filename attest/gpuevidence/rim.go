package gpuevidence

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Namespaces and algorithms of NVIDIA's RIMs (TCG reference integrity
// manifests in ISO 19770-2 SWID form, signed with XML-DSig).
const (
	nsSWID   = "http://standards.iso.org/iso/19770/-2/2015/schema.xsd"
	nsDSig   = "http://www.w3.org/2000/09/xmldsig#"
	nsSHA384 = "http://www.w3.org/2001/04/xmlenc#sha384"
	nsTCGRIM = "https://trustedcomputinggroup.org/resource/tcg-reference-integrity-manifest-rim-information-model/"

	algC14N11      = "http://www.w3.org/2006/12/xml-c14n11"
	algC14N10      = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315"
	algEnveloped   = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
	algECDSASHA384 = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384"
	algSHA384      = "http://www.w3.org/2001/04/xmldsig-more#sha384"
)

// Bounds on a RIM.
const (
	// MaxRIMBytes bounds a RIM file (NVIDIA's are about 20 KiB).
	MaxRIMBytes = 1 << 20
	// maxAlternatives bounds the golden values of one measurement.
	maxAlternatives = 64
	// maxMeasurementIndex bounds a measurement's index (SPDM block
	// indexes are one byte).
	maxMeasurementIndex = 254
)

// RIM is a reference integrity manifest: the golden measurements NVIDIA
// publishes for one driver or one VBIOS.
type RIM struct {
	// ID names the RIM ("NV_GPU_DRIVER_GH100_570.124.03").
	ID string
	// Version is the Meta colloquialVersion: the driver or VBIOS version.
	Version string
	// Measurements are the active golden measurements by index (RIM
	// indexes count from 0: a report's block N is index N-1).
	Measurements map[int]Measurement
	// Chain is the signer's certificate chain up to the root, once
	// Verify has built it; the KeyInfo certificates, signer first, when
	// it does not verify.
	Chain []*x509.Certificate

	doc, sig *xmlElem
}

// Measurement is one golden measurement and its alternatives: the
// runtime value must equal one of them.
type Measurement struct {
	// Index is the RIM index (the report's block Index+1).
	Index int
	// Name is the RIM's name for it ("Measurement_7").
	Name string
	// Values are the accepted digests.
	Values [][]byte
}

// ParseRIM parses a RIM document and reads its measurements. It checks
// nothing about the signature: see RIM.Verify.
func ParseRIM(id string, data []byte) (*RIM, error) {
	if len(data) > MaxRIMBytes {
		return nil, fmt.Errorf("RIM %s: larger than %d bytes", id, MaxRIMBytes)
	}
	root, err := parseXML(data)
	if err != nil {
		return nil, fmt.Errorf("RIM %s: %w", id, err)
	}
	r := &RIM{ID: id, doc: root, Measurements: map[int]Measurement{}}
	if !root.is(nsSWID, "SoftwareIdentity") {
		return nil, fmt.Errorf("RIM %s: document element %s, expected SoftwareIdentity (%s)", id, root.qname(), nsSWID)
	}
	metas := root.elems(nsSWID, "Meta")
	for _, m := range metas {
		if v, ok := m.attr("", "colloquialVersion"); ok {
			if r.Version != "" {
				return nil, fmt.Errorf("RIM %s: two Meta elements with a colloquialVersion", id)
			}
			r.Version = v
		}
	}
	if r.Version == "" {
		return nil, fmt.Errorf("RIM %s: no Meta colloquialVersion (the driver or VBIOS version)", id)
	}
	payloads := root.elems(nsSWID, "Payload")
	if len(payloads) != 1 {
		return nil, fmt.Errorf("RIM %s: %d Payload elements, expected 1", id, len(payloads))
	}
	for _, res := range payloads[0].elems(nsSWID, "Resource") {
		if t, _ := res.attr("", "type"); t != "Measurement" {
			continue
		}
		m, active, err := readMeasurement(res)
		if err != nil {
			return nil, fmt.Errorf("RIM %s line %d: %w", id, res.line, err)
		}
		if !active {
			continue
		}
		if _, dup := r.Measurements[m.Index]; dup {
			return nil, fmt.Errorf("RIM %s line %d: measurement index %d appears twice", id, res.line, m.Index)
		}
		r.Measurements[m.Index] = m
	}
	var sigs []*xmlElem
	root.walk(func(e *xmlElem) {
		if e.is(nsDSig, "Signature") {
			sigs = append(sigs, e)
		}
	})
	if len(sigs) != 1 || sigs[0].parent != root {
		return nil, fmt.Errorf("RIM %s: %d ds:Signature elements, expected one, a child of SoftwareIdentity (enveloped)", id, len(sigs))
	}
	r.sig = sigs[0]
	return r, nil
}

func readMeasurement(res *xmlElem) (Measurement, bool, error) {
	get := func(name string) (string, error) {
		v, ok := res.attr("", name)
		if !ok {
			return "", fmt.Errorf("measurement without attribute %q", name)
		}
		return v, nil
	}
	var m Measurement
	var err error
	activeS, err := get("active")
	if err != nil {
		return m, false, err
	}
	idxS, err := get("index")
	if err != nil {
		return m, false, err
	}
	altS, err := get("alternatives")
	if err != nil {
		return m, false, err
	}
	sizeS, err := get("size")
	if err != nil {
		return m, false, err
	}
	if m.Name, err = get("name"); err != nil {
		return m, false, err
	}
	var active bool
	switch activeS {
	case "True":
		active = true
	case "False":
	default:
		return m, false, fmt.Errorf("measurement %s: active %q, expected True or False", m.Name, activeS)
	}
	if m.Index, err = strconv.Atoi(idxS); err != nil || m.Index < 0 || m.Index > maxMeasurementIndex {
		return m, false, fmt.Errorf("measurement %s: index %q, expected 0 to %d", m.Name, idxS, maxMeasurementIndex)
	}
	alts, err := strconv.Atoi(altS)
	if err != nil || alts < 1 || alts > maxAlternatives {
		return m, false, fmt.Errorf("measurement %s: alternatives %q, expected 1 to %d", m.Name, altS, maxAlternatives)
	}
	size, err := strconv.Atoi(sizeS)
	if err != nil || size < 1 || size > 64 {
		return m, false, fmt.Errorf("measurement %s: size %q, expected 1 to 64 bytes", m.Name, sizeS)
	}
	for i := range alts {
		h, ok := res.attr(nsSHA384, "Hash"+strconv.Itoa(i))
		if !ok {
			return m, false, fmt.Errorf("measurement %s: no Hash%d (%s) of its %d alternatives", m.Name, i, nsSHA384, alts)
		}
		v, err := hex.DecodeString(h)
		if err != nil || len(v) != size {
			return m, false, fmt.Errorf("measurement %s: Hash%d is not %d bytes of hex", m.Name, i, size)
		}
		m.Values = append(m.Values, v)
	}
	return m, active, nil
}

// Verify checks the RIM's XML signature (C14N 1.1, enveloped, ECDSA
// P-384 with SHA-384) and that its signer chains to root with every
// certificate valid at t. It returns every problem found.
func (r *RIM) Verify(root *x509.Certificate, t time.Time) []error {
	var errs []error
	sig := r.sig
	one := func(parent *xmlElem, space, local string) *xmlElem {
		l := parent.elems(space, local)
		if len(l) != 1 {
			errs = append(errs, fmt.Errorf("RIM %s: signature: %d %s elements in %s, expected 1", r.ID, len(l), local, parent.local))
			return nil
		}
		return l[0]
	}
	si := one(sig, nsDSig, "SignedInfo")
	sv := one(sig, nsDSig, "SignatureValue")
	ki := one(sig, nsDSig, "KeyInfo")
	if si == nil || sv == nil || ki == nil {
		return errs
	}
	cm, sm, ref := one(si, nsDSig, "CanonicalizationMethod"), one(si, nsDSig, "SignatureMethod"), one(si, nsDSig, "Reference")
	if cm == nil || sm == nil || ref == nil {
		return errs
	}
	if a, _ := cm.attr("", "Algorithm"); a != algC14N11 && a != algC14N10 {
		return append(errs, fmt.Errorf("RIM %s: signature: canonicalization %q, expected %s", r.ID, a, algC14N11))
	}
	if a, _ := sm.attr("", "Algorithm"); a != algECDSASHA384 {
		return append(errs, fmt.Errorf("RIM %s: signature: method %q, expected %s", r.ID, a, algECDSASHA384))
	}
	if uri, ok := ref.attr("", "URI"); !ok || uri != "" {
		return append(errs, fmt.Errorf("RIM %s: signature: reference URI %q, expected \"\" (the whole document)", r.ID, uri))
	}
	var transforms []string
	for _, ts := range ref.elems(nsDSig, "Transforms") {
		for _, tr := range ts.elems(nsDSig, "Transform") {
			a, _ := tr.attr("", "Algorithm")
			transforms = append(transforms, a)
		}
	}
	switch strings.Join(transforms, " ") {
	case algEnveloped, algEnveloped + " " + algC14N11, algEnveloped + " " + algC14N10:
	default:
		return append(errs, fmt.Errorf("RIM %s: signature: transforms %q, expected enveloped-signature then C14N 1.1", r.ID, transforms))
	}
	dm := one(ref, nsDSig, "DigestMethod")
	dv := one(ref, nsDSig, "DigestValue")
	if dm == nil || dv == nil {
		return errs
	}
	if a, _ := dm.attr("", "Algorithm"); a != algSHA384 {
		return append(errs, fmt.Errorf("RIM %s: signature: digest %q, expected %s", r.ID, a, algSHA384))
	}
	want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(textOf(dv)))
	if err != nil {
		return append(errs, fmt.Errorf("RIM %s: signature: DigestValue is not base64", r.ID))
	}
	got := sha512.Sum384(canonicalize(r.doc, sig))
	if !bytes.Equal(got[:], want) {
		errs = append(errs, fmt.Errorf("RIM %s: the document does not match its signed digest (changed after signing)", r.ID))
	}
	chain, err := keyInfoChain(ki)
	if err != nil {
		return append(errs, fmt.Errorf("RIM %s: %w", r.ID, err))
	}
	r.Chain = chain
	sigBytes, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(textOf(sv)), ""))
	if err != nil {
		return append(errs, fmt.Errorf("RIM %s: signature: SignatureValue is not base64", r.ID))
	}
	if err := verifyRawECDSA(chain[0], canonicalize(si, nil), sigBytes); err != nil {
		errs = append(errs, fmt.Errorf("RIM %s: signature by %q: %w", r.ID, chain[0].Subject.CommonName, err))
	}
	if chain[0].KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		errs = append(errs, fmt.Errorf("RIM %s: signer %q may not sign (no digitalSignature key usage)", r.ID, chain[0].Subject.CommonName))
	}
	if built, err := verifyChain(chain, root, t); err != nil {
		errs = append(errs, fmt.Errorf("RIM %s: %w", r.ID, err))
	} else {
		r.Chain = built
	}
	return errs
}

// keyInfoChain reads the KeyInfo's X509Certificates: the signer (the one
// certificate that is not a CA) first, then the others in their order.
func keyInfoChain(ki *xmlElem) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for _, xd := range ki.elems(nsDSig, "X509Data") {
		for _, xc := range xd.elems(nsDSig, "X509Certificate") {
			der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(textOf(xc)), ""))
			if err != nil {
				return nil, fmt.Errorf("signature: X509Certificate %d is not base64", len(certs)+1)
			}
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return nil, fmt.Errorf("signature: X509Certificate %d: %w", len(certs)+1, err)
			}
			if len(certs) == maxChainCerts {
				return nil, fmt.Errorf("signature: more than %d certificates", maxChainCerts)
			}
			certs = append(certs, c)
		}
	}
	leaf := -1
	for i, c := range certs {
		if !c.IsCA {
			if leaf >= 0 {
				return nil, errors.New("signature: KeyInfo holds two end-entity certificates")
			}
			leaf = i
		}
	}
	if leaf < 0 {
		return nil, errors.New("signature: KeyInfo holds no signer (end-entity) certificate")
	}
	out := append([]*x509.Certificate{certs[leaf]}, certs[:leaf]...)
	return append(out, certs[leaf+1:]...), nil
}

// verifyRawECDSA checks an XML-DSig ECDSA signature (r||s, RFC 4051)
// over SHA-384(msg).
func verifyRawECDSA(cert *x509.Certificate, msg, sig []byte) error {
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return errors.New("signer key is not ECDSA")
	}
	n := (pub.Curve.Params().BitSize + 7) / 8
	if len(sig) != 2*n {
		return fmt.Errorf("signature is %d bytes, expected %d", len(sig), 2*n)
	}
	h := sha512.Sum384(msg)
	if !ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:n]), new(big.Int).SetBytes(sig[n:])) {
		return errors.New("signature does not verify")
	}
	return nil
}

// textOf is the concatenated text of e's text children.
func textOf(e *xmlElem) string {
	var b strings.Builder
	for _, c := range e.children {
		if c.elem == nil {
			b.WriteString(c.text)
		}
	}
	return b.String()
}
