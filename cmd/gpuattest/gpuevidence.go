package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/internal/textsafe"
)

func init() { verbs = append(verbs, newGPUEvidenceCmd) }

func newGPUEvidenceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "gpu-evidence",
		Short: "Verify NVIDIA GPU attestation evidence offline",
		Long: "gpu-evidence works on the evidence NVIDIA GPUs sign: an SPDM measurement\n" +
			"report over a nonce, certified up to NVIDIA's Device Identity CA (see\n" +
			"docs/gpu-evidence.md).",
	}
	c.AddCommand(newGPUEvidenceVerifyCmd())
	return c
}

// gpuEvidenceOutput is the JSON form of gpu-evidence verify.
type gpuEvidenceOutput struct {
	File     string   `json:"file"`
	Nonce    string   `json:"nonce"`
	Criteria []string `json:"criteria"`
	Summary  string   `json:"summary"`
	Verified bool     `json:"verified"`
	*gpuevidence.Report
}

func newGPUEvidenceVerifyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "verify FILE",
		Short: "Verify a file of NVIDIA GPU evidence offline, in pure Go",
		Long: "verify checks NVIDIA's serialized GPU evidence (the JSON array nvattest\n" +
			"collect-evidence writes: arch, nonce, evidence, certificate per GPU) without\n" +
			"any network: each GPU's SPDM report is signed by its device key, over the\n" +
			"nonce given with --nonce (never the one the file states), under a\n" +
			"certificate chain to the pinned NVIDIA Device Identity CA, and its FWID equals\n" +
			"the leaf certificate's. With --rim-store, the driver and VBIOS reference\n" +
			"measurements (RIMs, <RIM ID>.xml, signed up to the pinned NVIDIA RIM root)\n" +
			"are compared with the report, and stored OCSP answers (*.ocsp) are judged;\n" +
			"certificates, RIMs and OCSP answers are judged as of --at (default: now).\n\n" +
			"Each GPU is device-signed with measurements matched, device-signed with\n" +
			"measurements not checked (and why), or failed. Exit codes follow verify's:\n" +
			"0 all GPUs device-signed, 10 a device signature, chain, nonce or FWID\n" +
			"failed, 12 a RIM or measurement failed, 1 the file could not be read, 2\n" +
			"bad flags. --gpu-root and --rim-root replace the pinned roots (tests,\n" +
			"simulated GPUs): GPUs verified under them are marked SIMULATED.",
		Example: "  gpuattest gpu-evidence verify evidence.json --nonce 931d8dd0...dfcb\n" +
			"  gpuattest gpu-evidence verify evidence.json --nonce $NONCE --rim-store rims/ --at 2025-06-01T12:00:00Z -o json",
		Args: cobra.ExactArgs(1),
	}
	out := outputFlag(c)
	nonceHex := c.Flags().String("nonce", "", "the nonce the evidence must sign, 64 hex digits (required)")
	rimStore := c.Flags().String("rim-store", "", "directory of RIMs (<RIM ID>.xml) and OCSP answers (*.ocsp)")
	atFlag := c.Flags().String("at", "", "judge certificates, RIMs and OCSP answers as of this time (RFC 3339 or YYYY-MM-DD; default now)")
	gpuRoot := c.Flags().String("gpu-root", "", "device root certificate (PEM) instead of the pinned NVIDIA Device Identity CA")
	rimRoot := c.Flags().String("rim-root", "", "RIM root certificate (PEM) instead of the pinned NVIDIA RIM root")
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		nonce, err := parseNonceFlag(*nonceHex)
		if err != nil {
			return err
		}
		opts := []gpuevidence.Option{}
		if *atFlag != "" {
			t, err := parseAtFlag(*atFlag)
			if err != nil {
				return err
			}
			opts = append(opts, gpuevidence.WithTime(t))
		}
		more, err := gpuEvidenceOptions(*gpuRoot, *rimRoot, *rimStore)
		if err != nil {
			return err
		}
		opts = append(opts, more...)
		v, err := gpuevidence.New(opts...)
		if err != nil {
			return usageErr("%v", err)
		}
		data, err := limits.ReadFile(args[0], gpuevidence.MaxFileBytes, "GPU evidence file")
		if err != nil {
			return withCode(exitFailed, err)
		}
		items, err := gpuevidence.ParseFile(args[0], data)
		if err != nil {
			return withCode(exitFailed, err)
		}
		rep := v.VerifyItems(c.Context(), items, nonce)
		code := gpuEvidenceExit(rep)
		w := c.OutOrStdout()
		if *out == "json" {
			if err := writeJSON(w, gpuEvidenceOutput{File: args[0], Nonce: nonce.String(), Criteria: v.Criteria(), Summary: rep.Summary(), Verified: code == exitOK, Report: rep}); err != nil {
				return err
			}
		} else {
			renderGPUEvidence(w, args[0], nonce, v.Criteria(), rep, code)
		}
		if code != exitOK {
			return silentExit(code)
		}
		return nil
	}
	return c
}

// gpuEvidenceExit maps a report to verify's exit codes: 10 when a GPU's
// own signature, chain, nonce or FWID failed, 12 when only RIMs or
// measurements did.
func gpuEvidenceExit(rep *gpuevidence.Report) int {
	code := exitOK
	for _, g := range rep.GPUs {
		if g.Status != gpuevidence.StatusFailed {
			continue
		}
		if !g.DeviceSigned {
			return exitSig
		}
		code = exitPolicy
	}
	return code
}

func parseNonceFlag(s string) (gpuevidence.Nonce, error) {
	var n gpuevidence.Nonce
	if s == "" {
		return n, usageErr("--nonce is required: the nonce the evidence must have signed (64 hex digits)\nhint: the verifier never takes the nonce from the evidence")
	}
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil || len(b) != len(n) {
		return n, usageErr("--nonce %q: expected 64 hex digits (32 bytes)", s)
	}
	copy(n[:], b)
	return n, nil
}

func parseAtFlag(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageErr("--at %q: expected RFC 3339 (2025-06-01T12:00:00Z) or a date (2025-06-01)", s)
}

func renderGPUEvidence(w io.Writer, file string, nonce gpuevidence.Nonce, criteria []string, rep *gpuevidence.Report, code int) {
	fmt.Fprintf(w, "Verifying GPU evidence %s offline:\n", textsafe.Line(file))
	fmt.Fprintf(w, "  nonce: %s (--nonce)\n", nonce)
	for _, c := range criteria {
		fmt.Fprintf(w, "  %s\n", textsafe.Line(c))
	}
	fmt.Fprintln(w)
	for _, g := range rep.GPUs {
		fmt.Fprintf(w, "%s  %s", textsafe.Line(g.Label), textsafe.Line(string(g.Arch)))
		if g.Model != "" {
			fmt.Fprintf(w, "  %s", textsafe.Line(g.Model))
		}
		if g.DriverVersion != "" {
			fmt.Fprintf(w, "  driver %s  vbios %s", textsafe.Line(g.DriverVersion), textsafe.Line(g.VBIOSVersion))
		}
		if g.UEID != "" {
			fmt.Fprintf(w, "  ueid %s", g.UEID)
		}
		fmt.Fprintln(w)
		switch g.Status {
		case gpuevidence.StatusFailed:
			fmt.Fprintln(w, "  FAILED:")
			for _, p := range g.Problems {
				fmt.Fprintf(w, "    - %s\n", textsafe.Line(p))
			}
		case gpuevidence.StatusNotChecked:
			fmt.Fprintf(w, "  %s: %s\n", g.Status.Phrase(), textsafe.Line(g.Reason))
		default:
			fmt.Fprintf(w, "  %s\n", g.Status.Phrase())
		}
		if g.DeviceSigned && !g.NVIDIARoot {
			fmt.Fprintln(w, "  SIMULATED: the chain ends at --gpu-root, not at NVIDIA's Device Identity CA")
		}
		if g.DeviceSigned {
			fmt.Fprintf(w, "  revocation (OCSP): %s\n", g.Revocation)
		}
	}
	fmt.Fprintf(w, "\nGPU evidence: %s\n", rep.Summary())
	switch code {
	case exitOK:
		fmt.Fprintln(w, "Verified OK")
	case exitSig:
		fmt.Fprintf(w, "Verification FAILED: device signature, chain, nonce or FWID (exit %d)\n", code)
	default:
		fmt.Fprintf(w, "Verification FAILED: reference measurements (exit %d)\n", code)
	}
}

// gpuEvidenceOptions are the verifier options of --gpu-root, --rim-root
// and --rim-store (gpu-evidence verify, verify).
func gpuEvidenceOptions(gpuRoot, rimRoot, rimStore string) ([]gpuevidence.Option, error) {
	var opts []gpuevidence.Option
	if gpuRoot != "" {
		r, err := gpuevidence.LoadRoot(gpuRoot)
		if err != nil {
			return nil, usageErr("--gpu-root: %v", err)
		}
		opts = append(opts, gpuevidence.WithDeviceRoot(r, gpuRoot+" (--gpu-root, not NVIDIA's)"))
	}
	if rimRoot != "" {
		r, err := gpuevidence.LoadRoot(rimRoot)
		if err != nil {
			return nil, usageErr("--rim-root: %v", err)
		}
		opts = append(opts, gpuevidence.WithRIMRoot(r, rimRoot+" (--rim-root, not NVIDIA's)"))
	}
	if rimStore != "" {
		col, err := gpuevidence.LoadCollateral(rimStore)
		if err != nil {
			return nil, withCode(exitFailed, err)
		}
		opts = append(opts, gpuevidence.WithCollateral(col))
	}
	return opts, nil
}
