package gpuevidencetest

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// The namespaces and algorithms of NVIDIA's RIMs.
const (
	nsSWID   = "http://standards.iso.org/iso/19770/-2/2015/schema.xsd"
	nsDSig   = "http://www.w3.org/2000/09/xmldsig#"
	nsSHA384 = "http://www.w3.org/2001/04/xmlenc#sha384"
	algC14N  = "http://www.w3.org/2006/12/xml-c14n11"
)

// RIM makes a RIM document with the golden measurements ms (RIM index
// to value), signed by signer with XML-DSig as NVIDIA signs theirs
// (enveloped, C14N 1.1, ECDSA P-384 with SHA-384, the chain in KeyInfo).
//
// The document is written in canonical form, so that its digest is the
// digest of its own bytes: the signature is made without any
// canonicalization code, and a verifier that canonicalizes differently
// fails on it.
func (ca *CA) RIM(id, version string, ms map[int][]byte, signer Issuer) ([]byte, error) {
	var b strings.Builder
	tag := sha512.Sum384([]byte(id))
	fmt.Fprintf(&b, `<SoftwareIdentity xmlns="%s" xmlns:ns0="%s" xmlns:ns2="%s" corpus="false" name="%s" patch="false" supplemental="false" tagId="%x" tagVersion="0" version="1.0">`+"\n", nsSWID, nsSWID, nsSHA384, Simulated, tag)
	fmt.Fprintf(&b, `    <ns0:Entity name="%s" role="softwareCreator tagCreator"></ns0:Entity>`+"\n", Organization)
	fmt.Fprintf(&b, `    <ns0:Meta colloquialVersion="%s" product="%s %s"></ns0:Meta>`+"\n", version, Simulated, id)
	b.WriteString("    <ns0:Payload>\n")
	idx := make([]int, 0, len(ms))
	for i := range ms {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		fmt.Fprintf(&b, `        <ns0:Resource active="True" alternatives="2" index="%d" name="Measurement_%d" size="%d" type="Measurement" ns2:Hash0="%x" ns2:Hash1="%s"></ns0:Resource>`+"\n",
			i, i, len(ms[i]), sha512.Sum384([]byte(fmt.Sprint("other firmware ", i))), hex.EncodeToString(ms[i]))
	}
	b.WriteString("    </ns0:Payload>\n")
	unsigned := b.String()
	digest := sha512.Sum384([]byte(unsigned + "</SoftwareIdentity>"))

	inner := `<ds:CanonicalizationMethod Algorithm="` + algC14N + `"></ds:CanonicalizationMethod>` +
		`<ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384"></ds:SignatureMethod>` +
		`<ds:Reference URI=""><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"></ds:Transform>` +
		`<ds:Transform Algorithm="` + algC14N + `"></ds:Transform></ds:Transforms>` +
		`<ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#sha384"></ds:DigestMethod>` +
		`<ds:DigestValue>` + base64.StdEncoding.EncodeToString(digest[:]) + `</ds:DigestValue></ds:Reference>`
	// SignedInfo as C14N renders it in place: every namespace in scope
	// is declared on it.
	canonSI := fmt.Sprintf(`<ds:SignedInfo xmlns="%s" xmlns:ds="%s" xmlns:ns0="%s" xmlns:ns2="%s">`, nsSWID, nsDSig, nsSWID, nsSHA384) + inner + `</ds:SignedInfo>`
	h := sha512.Sum384([]byte(canonSI))
	key, ok := signer.Key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("RIM signer key is %T, expected ECDSA", signer.Key)
	}
	r, s, err := ecdsa.Sign(rand.Reader, key, h[:])
	if err != nil {
		return nil, err
	}
	n := (key.Curve.Params().BitSize + 7) / 8
	sig := make([]byte, 2*n)
	r.FillBytes(sig[:n])
	s.FillBytes(sig[n:])
	b.WriteString(`<ds:Signature xmlns:ds="` + nsDSig + `"><ds:SignedInfo>` + inner + `</ds:SignedInfo>`)
	b.WriteString(`<ds:SignatureValue>` + base64.StdEncoding.EncodeToString(sig) + `</ds:SignatureValue><ds:KeyInfo><ds:X509Data>`)
	for _, c := range []Issuer{signer, ca.RIMCA, ca.RIMRoot} {
		b.WriteString(`<ds:X509Certificate>` + base64.StdEncoding.EncodeToString(c.Cert.Raw) + `</ds:X509Certificate>`)
	}
	b.WriteString(`</ds:X509Data></ds:KeyInfo></ds:Signature></SoftwareIdentity>`)
	return []byte(b.String()), nil
}
