package gpuevidence

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpuattest/gpuattest/internal/jsonstrict"
	"github.com/gpuattest/gpuattest/internal/limits"
)

// Arch is a GPU architecture as NVIDIA's serialized evidence names it.
type Arch string

// The architectures that sign evidence.
const (
	ArchHopper    Arch = "HOPPER"
	ArchBlackwell Arch = "BLACKWELL"
)

// Limits on evidence read from a file or a bundle.
const (
	// MaxFileBytes bounds a serialized evidence file (one GPU's item is
	// about 12 KiB).
	MaxFileBytes = 4 << 20
	// MaxItems bounds the GPUs of one file.
	MaxItems = 256
	// maxReportBytes bounds one decoded attestation report (NVIDIA's
	// are about 4 KiB; SPDM's MeasurementRecordLength allows 16 MiB).
	maxReportBytes = 64 << 10
	// maxChainBytes bounds one decoded PEM certificate chain.
	maxChainBytes = 64 << 10
)

// Item is one GPU's evidence in NVIDIA's serialized form (the JSON
// array nvattest collect-evidence writes and NVIDIA's verifiers read).
type Item struct {
	// Arch is "HOPPER" or "BLACKWELL".
	Arch Arch `json:"arch"`
	// Nonce is the hex nonce the evidence was collected with, as the
	// collector says; the verifier trusts the one inside the signed
	// report, compared with the nonce it recomputes.
	Nonce string `json:"nonce"`
	// Evidence is the base64 attestation report (SPDM request and
	// signed response).
	Evidence string `json:"evidence"`
	// Certificate is the base64 of the device's PEM certificate chain,
	// leaf first.
	Certificate string `json:"certificate"`
}

// ParseFile decodes NVIDIA's serialized evidence: a JSON array of items,
// at most MaxFileBytes and MaxItems, each with exactly the four keys.
// name is the file's name in messages.
func ParseFile(name string, data []byte) ([]Item, error) {
	if len(data) > MaxFileBytes {
		return nil, &limits.TooLargeError{Name: name, What: "GPU evidence file", Limit: MaxFileBytes}
	}
	var items []Item
	if probs := jsonstrict.Decode(name, data, 8, &items); len(probs) > 0 {
		return nil, probs
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: no GPU evidence (an empty array)", name)
	}
	if len(items) > MaxItems {
		return nil, fmt.Errorf("%s: %d GPUs, more than the %d a file may hold", name, len(items), MaxItems)
	}
	return items, nil
}

// Marshal encodes items in NVIDIA's serialized form.
func Marshal(items []Item) ([]byte, error) {
	b, err := json.MarshalIndent(items, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding GPU evidence: %w", err)
	}
	return append(b, '\n'), nil
}

// decoded is an item's report and chain, decoded and parsed.
type decoded struct {
	report *AttestationReport
	raw    []byte
	chain  []byte
}

func (it Item) decode() (*decoded, error) {
	switch it.Arch {
	case ArchHopper, ArchBlackwell:
	default:
		return nil, fmt.Errorf("arch %q: expected %q or %q", it.Arch, ArchHopper, ArchBlackwell)
	}
	raw, err := decodeB64(it.Evidence, maxReportBytes, "evidence")
	if err != nil {
		return nil, err
	}
	chain, err := decodeB64(it.Certificate, maxChainBytes, "certificate")
	if err != nil {
		return nil, err
	}
	rep, err := ParseAttestationReport(raw)
	if err != nil {
		return nil, err
	}
	if it.Nonce != "" {
		n, err := hex.DecodeString(strings.TrimPrefix(it.Nonce, "0x"))
		if err != nil {
			return nil, fmt.Errorf("nonce %q: not hex", it.Nonce)
		}
		if string(n) != string(rep.Request.Nonce[:]) {
			return nil, fmt.Errorf("nonce: the item says %s, its signed report %x", it.Nonce, rep.Request.Nonce)
		}
	}
	return &decoded{report: rep, raw: raw, chain: chain}, nil
}

func decodeB64(s string, max int, field string) ([]byte, error) {
	if base64.StdEncoding.DecodedLen(len(s)) > max+2 {
		return nil, fmt.Errorf("%s: larger than %s decoded", field, limits.Human(int64(max)))
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s: not base64: %w", field, err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: empty", field)
	}
	return b, nil
}
