package gpuevidence

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Status is what verification makes of one GPU.
type Status string

// The statuses. Every GPU is exactly one of them.
const (
	// StatusMatched: device-signed, measurements matched. The report is
	// signed by a key certified up to the device root, over the expected
	// nonce, with the leaf's FWID, and every golden measurement of the
	// driver and VBIOS RIMs (signed up to the RIM root) matched.
	StatusMatched Status = "matched"
	// StatusNotChecked: device-signed, measurements not checked; Reason
	// says why (a RIM not in the collateral).
	StatusNotChecked Status = "not-checked"
	// StatusUnattested: the GPU gave no evidence; Reason says why.
	StatusUnattested Status = "unattested"
	// StatusFailed: the evidence did not verify; Problems say what failed.
	StatusFailed Status = "failed"
)

// Phrase is the status in words ("device-signed, measurements matched").
func (s Status) Phrase() string {
	switch s {
	case StatusMatched:
		return "device-signed, measurements matched"
	case StatusNotChecked:
		return "device-signed, measurements not checked"
	case StatusUnattested:
		return "unattested"
	}
	return "failed"
}

// DeviceSigned reports whether the status means the GPU signed the
// report under the device root.
func (s Status) DeviceSigned() bool { return s == StatusMatched || s == StatusNotChecked }

// Option configures a Verifier.
type Option func(*options) error

type options struct {
	deviceRoot, rimRoot         *x509.Certificate
	deviceRootName, rimRootName string
	collateral                  *Collateral
	at                          time.Time
	workers                     int
}

// WithDeviceRoot replaces the pinned NVIDIA Device Identity CA by root
// (--gpu-root, for tests and simulated GPUs); name is shown in reports.
// Every GPU verified under it is reported as not NVIDIA-rooted.
func WithDeviceRoot(root *x509.Certificate, name string) Option {
	return func(o *options) error {
		if root == nil {
			return errors.New("device root: nil")
		}
		o.deviceRoot, o.deviceRootName = root, name
		return nil
	}
}

// WithRIMRoot replaces the pinned NVIDIA RIM signing root by root
// (--rim-root, for tests); name is shown in reports.
func WithRIMRoot(root *x509.Certificate, name string) Option {
	return func(o *options) error {
		if root == nil {
			return errors.New("RIM root: nil")
		}
		o.rimRoot, o.rimRootName = root, name
		return nil
	}
}

// WithCollateral gives the RIMs and OCSP answers to check against.
// Without it every GPU's measurements are "not checked".
func WithCollateral(c *Collateral) Option {
	return func(o *options) error { o.collateral = c; return nil }
}

// WithTime sets the time certificates, RIMs and OCSP answers are judged
// at: the time the evidence was recorded (default: now). NVIDIA's RIM
// signing certificates expire; a release verified later is judged as of
// when it was made.
func WithTime(t time.Time) Option {
	return func(o *options) error {
		if t.IsZero() {
			return errors.New("time: zero")
		}
		o.at = t
		return nil
	}
}

// WithWorkers sets how many GPUs are verified at once (default
// GOMAXPROCS).
func WithWorkers(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("workers %d: expected at least 1", n)
		}
		o.workers = n
		return nil
	}
}

// Verifier checks GPU evidence offline. It is safe for concurrent use;
// RIMs are checked once per Verifier however many GPUs use them.
type Verifier struct {
	o    options
	ocsp *ocspStore

	mu     sync.Mutex
	rims   map[string]*rimCheck
	chains chainCache
}

// New returns a Verifier: the pinned NVIDIA roots unless replaced.
func New(opts ...Option) (*Verifier, error) {
	o := options{workers: runtime.GOMAXPROCS(0)}
	for _, f := range opts {
		if err := f(&o); err != nil {
			return nil, err
		}
	}
	if o.deviceRoot == nil {
		o.deviceRoot, o.deviceRootName = NVIDIADeviceRoot(), "NVIDIA Device Identity CA (pinned)"
	}
	if o.rimRoot == nil {
		o.rimRoot, o.rimRootName = NVIDIARIMRoot(), "NVIDIA CoRIM signing Root CA (pinned)"
	}
	if o.at.IsZero() {
		o.at = time.Now()
	}
	v := &Verifier{o: o, rims: map[string]*rimCheck{}}
	if o.collateral != nil && len(o.collateral.OCSP) > 0 {
		s, err := newOCSPStore(o.collateral.OCSP)
		if err != nil {
			return nil, err
		}
		v.ocsp = s
	}
	return v, nil
}

// Criteria says what the verifier checks, for the CLI to print first.
func (v *Verifier) Criteria() []string {
	c := []string{
		"device root: " + v.o.deviceRootName,
		"RIM root: " + v.o.rimRootName,
		"judged at: " + v.o.at.UTC().Format(time.RFC3339),
	}
	if v.o.collateral == nil {
		c = append(c, "collateral: none (measurements not checked)")
	} else {
		c = append(c, fmt.Sprintf("collateral: %d RIMs, %d OCSP answers", len(v.o.collateral.RIMs), len(v.o.collateral.OCSP)))
	}
	return c
}

// Claim is one GPU's evidence and the nonce the verifier expects it to
// have signed, recomputed by the caller (FleetNonce, RunNonce), never
// taken from the evidence.
type Claim struct {
	// Item is the evidence.
	Item Item
	// Nonce is the expected nonce.
	Nonce Nonce
	// Label names the GPU in messages ("job a100-3, GPU-5f3c..."); empty
	// for "GPU <index>".
	Label string
}

// GPU is the verdict on one GPU.
type GPU struct {
	// Index is the GPU's position in the evidence.
	Index int `json:"index"`
	// Label names the GPU (the claim's label, or "GPU <index>").
	Label string `json:"label"`
	// Arch is the architecture the evidence names.
	Arch Arch `json:"arch,omitempty"`
	// Status is the verdict.
	Status Status `json:"status"`
	// Reason says why measurements were not checked or why the GPU is
	// unattested.
	Reason string `json:"reason,omitempty"`
	// Problems say what failed (Status failed).
	Problems []string `json:"problems,omitempty"`
	// DeviceSigned is true when the report verified as the device's:
	// signed under the device root, over the expected nonce, with the
	// leaf's FWID. A failed GPU that is device-signed failed on its
	// measurements or RIMs.
	DeviceSigned bool `json:"device_signed"`
	// NVIDIARoot is true when the device chain ends at the pinned NVIDIA
	// root; false under a replaced root (a simulated or test GPU).
	NVIDIARoot bool `json:"nvidia_root"`
	// Model is the device's model from its certificate chain ("GH100
	// A01 GSP BROM").
	Model string `json:"model,omitempty"`
	// UEID is the device's identity: the leaf certificate's serial
	// number, in decimal as NVIDIA's claims write it.
	UEID string `json:"ueid,omitempty"`
	// DriverVersion and VBIOSVersion are what the signed report says.
	DriverVersion string `json:"driver_version,omitempty"`
	VBIOSVersion  string `json:"vbios_version,omitempty"`
	// FWID is the firmware ID (hex) the report and the leaf agree on.
	FWID string `json:"fwid,omitempty"`
	// Nonce is the nonce the report signs (hex).
	Nonce string `json:"nonce,omitempty"`
	// RIMs are the driver and VBIOS RIMs looked up for the GPU.
	RIMs []RIMResult `json:"rims,omitempty"`
	// Revocation is what stored OCSP answers showed for the device chain.
	Revocation Revocation `json:"revocation,omitempty"`
}

// RIMResult is one RIM's part in a GPU's verdict.
type RIMResult struct {
	// Kind is "driver" or "vbios".
	Kind string `json:"kind"`
	// ID is the RIM's ID.
	ID string `json:"id"`
	// Found is whether the collateral holds it.
	Found bool `json:"found"`
	// Matched counts the golden measurements compared and matched.
	Matched int `json:"matched,omitempty"`
	// Skipped lists indexes not compared (35 when NVDEC0 is disabled).
	Skipped []int `json:"skipped,omitempty"`
	// Revocation is what stored OCSP answers showed for its chain.
	Revocation Revocation `json:"revocation,omitempty"`
	// ValidUntil is when the RIM's signing chain expires.
	ValidUntil *time.Time `json:"valid_until,omitempty"`
}

// Report is the verdict on a set of GPUs.
type Report struct {
	// At is the time everything was judged at.
	At time.Time `json:"at"`
	// DeviceRoot and RIMRoot name the roots used.
	DeviceRoot string `json:"device_root"`
	RIMRoot    string `json:"rim_root"`
	// GPUs are the verdicts, in claim order.
	GPUs []GPU `json:"gpus"`
}

// Count returns how many GPUs have status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, g := range r.GPUs {
		if g.Status == s {
			n++
		}
	}
	return n
}

// Summary is one line: "4/4 device-signed (0 measurements matched, 4
// not checked)", with the failed and unattested counts when any.
func (r *Report) Summary() string {
	signed := r.Count(StatusMatched) + r.Count(StatusNotChecked)
	s := fmt.Sprintf("%d/%d device-signed (%d measurements matched, %d not checked)", signed, len(r.GPUs), r.Count(StatusMatched), r.Count(StatusNotChecked))
	if n := r.Count(StatusUnattested); n > 0 {
		s += fmt.Sprintf(", %d unattested", n)
	}
	if n := r.Count(StatusFailed); n > 0 {
		s += fmt.Sprintf(", %d failed", n)
	}
	return s
}

// Err returns nil when no GPU failed, else a *FailedError naming each
// failed GPU and what failed.
func (r *Report) Err() error {
	var f []GPU
	for _, g := range r.GPUs {
		if g.Status == StatusFailed {
			f = append(f, g)
		}
	}
	if len(f) == 0 {
		return nil
	}
	return &FailedError{GPUs: f}
}

// FailedError is the error of a report with failed GPUs.
type FailedError struct {
	// GPUs are the failed GPUs.
	GPUs []GPU
}

// Error names each failed GPU and its problems.
func (e *FailedError) Error() string {
	var b strings.Builder
	for i, g := range e.GPUs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s: GPU evidence failed: %s", g.Label, strings.Join(g.Problems, "; "))
	}
	return b.String()
}

// Verify checks every claim and returns the report; it never fails as a
// whole (a GPU's problems are in its verdict, Report.Err collects them).
// A cancelled ctx marks the GPUs not yet verified as failed.
func (v *Verifier) Verify(ctx context.Context, claims []Claim) *Report {
	rep := &Report{At: v.o.at, DeviceRoot: v.o.deviceRootName, RIMRoot: v.o.rimRootName, GPUs: make([]GPU, len(claims))}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(v.o.workers, len(claims)) {
		wg.Go(func() {
			for i := range work {
				rep.GPUs[i] = v.verifyOne(ctx, i, claims[i])
			}
		})
	}
	for i := range claims {
		work <- i
	}
	close(work)
	wg.Wait()
	return rep
}

// VerifyItems checks the items of one evidence file, all collected with
// the same nonce.
func (v *Verifier) VerifyItems(ctx context.Context, items []Item, nonce Nonce) *Report {
	claims := make([]Claim, len(items))
	for i, it := range items {
		claims[i] = Claim{Item: it, Nonce: nonce}
	}
	return v.Verify(ctx, claims)
}

func (v *Verifier) verifyOne(ctx context.Context, i int, c Claim) (g GPU) {
	g = GPU{Index: i, Label: c.Label, Arch: c.Item.Arch}
	if g.Label == "" {
		g.Label = fmt.Sprintf("GPU %d", i)
	}
	fail := func(format string, args ...any) {
		g.Problems = append(g.Problems, fmt.Sprintf(format, args...))
	}
	defer func() {
		if len(g.Problems) > 0 {
			g.Status, g.Reason = StatusFailed, ""
		}
	}()
	if err := ctx.Err(); err != nil {
		fail("not verified: %v", err)
		return g
	}
	d, err := c.Item.decode()
	if err != nil {
		fail("%v", err)
		return g
	}
	rep := d.report
	g.Nonce = hex.EncodeToString(rep.Request.Nonce[:])
	chain, err := parseChain(d.chain)
	if err != nil {
		fail("%v", err)
		return g
	}
	leaf := chain[0]
	g.UEID = leaf.SerialNumber.String()
	if len(chain) > 1 {
		g.Model = chain[1].Subject.CommonName
	}
	g.NVIDIARoot = v.o.deviceRoot.Equal(NVIDIADeviceRoot())

	// The device: chain, signature, nonce, FWID.
	built, err := v.chains.verify(chain, v.o.deviceRoot, v.o.at)
	if err != nil {
		fail("device %v", err)
	}
	if err := verifyRawP384(leaf, rep.Signed, rep.Response.Signature); err != nil {
		fail("report signature by the device leaf %q: %v (the signed region was changed, or another key signed it)", leaf.Subject.CommonName, err)
	}
	if rep.Request.Nonce != c.Nonce {
		fail("nonce: the report signs %x, expected %x (evidence collected for another dispatch, job or run)", rep.Request.Nonce, c.Nonce[:])
	}
	op, err := readGPUOpaque(rep.Response.Opaque)
	if err != nil {
		fail("%v", err)
		return g
	}
	g.DriverVersion, _ = op.str(OpaqueDriverVersion)
	g.VBIOSVersion, _ = op.vbiosVersion()
	if fw, ok := op[OpaqueFWID]; !ok || len(fw) == 0 {
		fail("the report carries no FWID (%s): it cannot be tied to the leaf certificate's firmware", opaqueName(OpaqueFWID))
	} else if cfw, err := leafFWID(leaf, c.Item.Arch); err != nil {
		fail("%v", err)
	} else if !bytes.Equal(fw, cfw) {
		fail("FWID: the report says %x, the leaf certificate %x", fw, cfw)
	} else {
		g.FWID = hex.EncodeToString(fw)
	}
	if built != nil {
		var errs []error
		g.Revocation, errs = v.ocsp.check(built, 1, v.o.at)
		for _, e := range errs {
			fail("device chain: %v", e)
		}
	}
	g.DeviceSigned = len(g.Problems) == 0

	// The measurements, checked even when the device part failed, so
	// that the verdict names every problem at once.
	v.checkMeasurements(&g, c.Item.Arch, rep, op)
	return g
}

func (v *Verifier) checkMeasurements(g *GPU, arch Arch, rep *AttestationReport, op gpuOpaque) {
	fail := func(format string, args ...any) {
		g.Problems = append(g.Problems, fmt.Sprintf(format, args...))
	}
	driverID, vbiosID, err := rimIDs(arch, op)
	if err != nil {
		fail("%v", err)
		return
	}
	measure35, err := op.nvdec0()
	if err != nil {
		fail("%v", err)
		return
	}
	reported := map[int][]byte{}
	for _, b := range rep.Response.Blocks {
		reported[int(b.Index)-1] = b.Value
	}
	type kindRIM struct {
		kind, id, version string
		rim               *RIM
	}
	wants := []kindRIM{{kind: "driver", id: driverID, version: g.DriverVersion}, {kind: "vbios", id: vbiosID, version: g.VBIOSVersion}}
	var missing []string
	for i := range wants {
		w := &wants[i]
		res := RIMResult{Kind: w.kind, ID: w.id}
		rc := v.rim(w.id)
		if rc == nil {
			missing = append(missing, fmt.Sprintf("%s RIM %s", w.kind, w.id))
			g.RIMs = append(g.RIMs, res)
			continue
		}
		res.Found = true
		res.Revocation = rc.revocation
		res.ValidUntil = rc.validUntil
		for _, e := range rc.errs {
			fail("%s RIM: %v", w.kind, e)
		}
		if rc.rim != nil {
			w.rim = rc.rim
			if rc.rim.Version != w.version {
				fail("%s RIM %s is for version %q, the report says %q", w.kind, w.id, rc.rim.Version, w.version)
			}
		}
		g.RIMs = append(g.RIMs, res)
	}
	if wants[0].rim != nil && wants[1].rim != nil {
		var both []int
		for idx := range wants[0].rim.Measurements {
			if _, ok := wants[1].rim.Measurements[idx]; ok {
				both = append(both, idx)
			}
		}
		if len(both) > 0 {
			slices.Sort(both)
			fail("the driver and VBIOS RIMs both claim measurement indexes %v (they must be disjoint)", both)
		}
	}
	for i, w := range wants {
		if w.rim == nil {
			continue
		}
		idxs := make([]int, 0, len(w.rim.Measurements))
		for idx := range w.rim.Measurements {
			idxs = append(idxs, idx)
		}
		slices.Sort(idxs)
		for _, idx := range idxs {
			if idx == 35 && !measure35 {
				g.RIMs[i].Skipped = append(g.RIMs[i].Skipped, idx)
				continue
			}
			m := w.rim.Measurements[idx]
			got, ok := reported[idx]
			if !ok {
				fail("measurement %d (%s RIM %s): not in the report", idx, w.kind, w.id)
				continue
			}
			if !slices.ContainsFunc(m.Values, func(x []byte) bool { return bytes.Equal(x, got) }) {
				fail("measurement %d (%s RIM %s): the report has %x, the RIM expects %s", idx, w.kind, w.id, got, hexList(m.Values))
				continue
			}
			g.RIMs[i].Matched++
		}
	}
	if len(g.Problems) > 0 {
		return
	}
	if len(missing) > 0 {
		g.Status = StatusNotChecked
		if v.o.collateral == nil {
			g.Reason = "no RIMs given (--rim-store): it needs " + strings.Join(missing, " and ")
		} else {
			g.Reason = strings.Join(missing, " and ") + " not in the collateral"
		}
		return
	}
	g.Status = StatusMatched
}

func hexList(vs [][]byte) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = hex.EncodeToString(v)
	}
	if len(s) == 1 {
		return s[0]
	}
	return "one of " + strings.Join(s, ", ")
}

// rimIDs are the IDs of the driver and VBIOS RIMs a report needs, built
// as NVIDIA's RIM service names them.
func rimIDs(arch Arch, op gpuOpaque) (driver, vbios string, err error) {
	drv, ok := op.str(OpaqueDriverVersion)
	if !ok || drv == "" {
		return "", "", fmt.Errorf("opaque data: no %s", opaqueName(OpaqueDriverVersion))
	}
	switch arch {
	case ArchHopper:
		driver = "NV_GPU_DRIVER_GH100_" + drv
	case ArchBlackwell:
		if chip, ok := op.str(OpaqueChipInfo); ok && chip != "" {
			driver = "NV_GPU_CC_DRIVER_" + chip + "_" + drv
		} else {
			driver = "NV_GPU_CC_DRIVER_GB100_" + drv
		}
	}
	project, ok1 := op.str(OpaqueProject)
	sku, ok2 := op.str(OpaqueProjectSKU)
	chip, ok3 := op.str(OpaqueChipSKU)
	ver, ok4 := op.vbiosVersion()
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return "", "", errors.New("opaque data: the project, project SKU, chip SKU or VBIOS version that names the VBIOS RIM is missing")
	}
	vbios = "NV_GPU_VBIOS_" + project + "_" + sku + "_" + chip + "_" + strings.ReplaceAll(ver, ".", "")
	for _, id := range []string{driver, vbios} {
		if !rimIDPattern.MatchString(id) {
			return "", "", fmt.Errorf("opaque data: RIM ID %q holds characters no RIM ID has", id)
		}
	}
	return driver, vbios, nil
}

// rimCheck is a RIM parsed and verified once per Verifier.
type rimCheck struct {
	once       sync.Once
	rim        *RIM
	errs       []error
	revocation Revocation
	validUntil *time.Time
}

// rim returns the checked RIM id, nil when the collateral lacks it.
func (v *Verifier) rim(id string) *rimCheck {
	if v.o.collateral == nil {
		return nil
	}
	data, ok := v.o.collateral.RIMs[id]
	if !ok {
		return nil
	}
	v.mu.Lock()
	rc, ok := v.rims[id]
	if !ok {
		rc = &rimCheck{}
		v.rims[id] = rc
	}
	v.mu.Unlock()
	rc.once.Do(func() {
		r, err := ParseRIM(id, data)
		if err != nil {
			rc.errs = []error{err}
			return
		}
		rc.rim = r
		rc.errs = r.Verify(v.o.rimRoot, v.o.at)
		if len(rc.errs) == 0 {
			until := r.Chain[0].NotAfter
			for _, c := range r.Chain {
				if c.NotAfter.Before(until) {
					until = c.NotAfter
				}
			}
			rc.validUntil = &until
			var oerrs []error
			rc.revocation, oerrs = v.ocsp.check(r.Chain, 0, v.o.at)
			rc.errs = append(rc.errs, oerrs...)
		}
	})
	return rc
}

// RIMIDs returns the IDs of the driver and VBIOS RIMs an item's report
// needs, as NVIDIA's RIM service names them (a collector fetches them
// by these IDs; a collateral directory holds them as <ID>.xml). It
// reads the report without verifying it.
func RIMIDs(it Item) (driver, vbios string, err error) {
	d, err := it.decode()
	if err != nil {
		return "", "", err
	}
	op, err := readGPUOpaque(d.report.Response.Opaque)
	if err != nil {
		return "", "", err
	}
	return rimIDs(it.Arch, op)
}
