// Package sign signs in-toto statements into Sigstore bundles (v0.3 JSON,
// DSSE envelope) with sigstore-go, and manages cosign-compatible key pairs.
//
// Keys: GenerateKeyPair writes NAME.key, an ECDSA P-256 private key in
// cosign's encrypted format (PEM "ENCRYPTED SIGSTORE PRIVATE KEY": PKCS #8
// encrypted with scrypt + NaCl secretbox by go-securesystemslib's encrypted
// package), mode 0600, and NAME.pub, a PEM public key. LoadPrivateKey reads
// such keys, cosign's older "ENCRYPTED COSIGN PRIVATE KEY" ones, and
// unencrypted PKCS #8 / EC keys.
//
// Signing: a Signer made by NewKeySigner (a key file, optional RFC 3161
// timestamps) or NewKeylessSigner (Fulcio certificate from an OIDC token,
// Rekor and TSA from a Sigstore signing config v0.2) turns statements into
// bundles; AppendJSONL writes them one per line to attestations.intoto.jsonl.
package sign
