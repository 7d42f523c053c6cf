package gpuevidence

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/internal/limits"
)

// Collateral is what verification needs besides the evidence, kept so
// that it needs no network: NVIDIA's reference measurements (RIMs) by
// ID and stored OCSP answers.
type Collateral struct {
	// RIMs are RIM documents by ID ("NV_GPU_DRIVER_GH100_570.124.03").
	RIMs map[string][]byte
	// OCSP are DER OCSP responses, for the device and RIM chains.
	OCSP [][]byte
}

// Bounds on a collateral directory.
const (
	maxCollateralFiles = 1024
	maxCollateralBytes = 64 << 20
)

// rimIDPattern is what a RIM ID may hold: it comes from a report's
// strings and names a file.
var rimIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// RIM file and OCSP answer file name endings in a collateral directory.
const (
	RIMExt  = ".xml"
	OCSPExt = ".ocsp"
)

// LoadCollateral reads a collateral directory: RIMs as <RIM ID>.xml (the
// layout NVIDIA's file RIM store uses) and DER OCSP responses as *.ocsp.
// Other files are ignored; subdirectories are not read. At most 1024
// files and 64 MiB are read.
func LoadCollateral(dir string) (*Collateral, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading collateral: %w", err)
	}
	c := &Collateral{RIMs: map[string][]byte{}}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, RIMExt) || strings.HasSuffix(n, OCSPExt)) {
			names = append(names, n)
		}
	}
	if len(names) > maxCollateralFiles {
		return nil, fmt.Errorf("collateral %s: %d files, more than %d", dir, len(names), maxCollateralFiles)
	}
	sort.Strings(names)
	var total int64
	for _, n := range names {
		p := filepath.Join(dir, n)
		max := int64(MaxRIMBytes)
		if strings.HasSuffix(n, OCSPExt) {
			max = MaxOCSPBytes
		}
		b, err := limits.ReadFile(p, max, "collateral file")
		if err != nil {
			return nil, err
		}
		if total += int64(len(b)); total > maxCollateralBytes {
			return nil, fmt.Errorf("collateral %s: more than %s", dir, limits.Human(maxCollateralBytes))
		}
		if id, ok := strings.CutSuffix(n, RIMExt); ok {
			if !rimIDPattern.MatchString(id) {
				return nil, fmt.Errorf("%s: %q is not a RIM ID (letters, digits, _ . -)", p, id)
			}
			c.RIMs[id] = b
		} else {
			c.OCSP = append(c.OCSP, b)
		}
	}
	return c, nil
}
