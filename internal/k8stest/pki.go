package k8stest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pki is what the apiserver and its clients are configured with: a CA, the
// apiserver's serving certificate for 127.0.0.1, the service-account
// signing key and the static tokens.
type pki struct {
	caPEM []byte
	files map[string]string // role -> path: ca, cert, key, sakey, sapub, tokens
	admin string            // the admin token (group system:masters)
	// tenants are the restricted users' tokens, tenant-0, tenant-1, ...:
	// each has no rights until a Role in one namespace is bound to it.
	tenants []string
}

// tenantCount bounds how many restricted users one cluster can hand out
// (the static token file is read once, at the apiserver's start).
const tenantCount = 64

// newToken returns a fresh bearer token (about 260 random bits).
func newToken() string { return strings.ToLower(rand.Text() + rand.Text()) }

// writePKI generates the CA, serving certificate, service-account key and
// tokens into dir.
func writePKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gpuattest k8stest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP("10.96.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	p := &pki{
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		files: map[string]string{},
		admin: newToken(),
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	// token,user,uid,"group1,group2" (the apiserver's --token-auth-file).
	tokens := []string{fmt.Sprintf("%s,admin,admin,\"system:masters\"", p.admin)}
	for i := range tenantCount {
		t := newToken()
		p.tenants = append(p.tenants, t)
		tokens = append(tokens, fmt.Sprintf("%s,tenant-%d,tenant-%d,\"gpuattest:tenants\"", t, i, i))
	}
	for role, content := range map[string][]byte{
		"ca":     p.caPEM,
		"cert":   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		"key":    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}),
		"sakey":  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saKeyDER}),
		"sapub":  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
		"tokens": []byte(strings.Join(tokens, "\n") + "\n"),
	} {
		path := filepath.Join(dir, role+".pem")
		if role == "tokens" {
			path = filepath.Join(dir, "tokens.csv")
		}
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return nil, err
		}
		p.files[role] = path
	}
	return p, nil
}

// writeKubeconfig writes a kubeconfig (JSON, which kubectl and client-go
// read like YAML) for server, trusting caPEM and authenticating with
// token.
func writeKubeconfig(path, server string, caPEM []byte, user, token, namespace string) error {
	ctx := map[string]any{"cluster": "k8stest", "user": user}
	if namespace != "" {
		ctx["namespace"] = namespace
	}
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": "k8stest",
		"clusters": []any{map[string]any{"name": "k8stest", "cluster": map[string]any{
			"server":                     server,
			"certificate-authority-data": base64.StdEncoding.EncodeToString(caPEM),
		}}},
		"users":    []any{map[string]any{"name": user, "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "k8stest", "context": ctx}},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
