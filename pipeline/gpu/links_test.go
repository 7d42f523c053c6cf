//go:build linux && cgo

package gpu

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// hasLine reports whether one of lines contains every part.
func hasLine(lines []string, parts ...string) bool {
	for _, l := range lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// On the simulated 8-GPU node: a PCIe link trained down to x8, one at
// Gen3 under load, an NVLink that goes down during the step, NVLink
// recovery errors and an HBM at its maximum each fail their GPU by
// index; an idle GPU at Gen3, corrected ECC errors and NVLink CRC errors
// are noted, not failed (SIMULATED: go-nvml's dgxh100 mock, the calls it
// lacks served by function fields).
func TestTelemetryLinksAndThermal(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:8")
	s.Device(0).GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 8, nvml.SUCCESS }
	s.Device(1).GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 3, nvml.SUCCESS }
	s.SetUtilization(1, 100)
	s.Device(2).GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 3, nvml.SUCCESS } // idle: not judged
	s.SetNVLinkDown(6, 17, true)
	sum, lines := runTelemetry(t, s, func() {
		s.SetNVLinkDown(3, 5, true)
		s.SetField(4, nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, 2)
		s.SetField(5, nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, 40)
		s.InjectCorrectedECC(5, 3)
		s.SetField(7, nvml.FI_DEV_MEMORY_TEMP, 96)
	})
	r := sum.Verdict.Reasons
	for _, want := range [][]string{
		{"gpu 0: PCIe link trained down to x8", "support x16"},
		{"gpu 1: PCIe link at Gen3 under load", "support Gen5"},
		{"gpu 3: NVLink(s) 5 went down during the step"},
		{"gpu 4: 2 NVLink recovery error(s) during the step (0 -> 2)"},
		{"gpu 6: 17 NVLinks active, the other GPUs have 18"},
		{"gpu 7: HBM temperature reached 96 C, its memory maximum is 95 C"},
	} {
		if !hasLine(r, want...) {
			t.Errorf("no reason with %q in %q", want, r)
		}
	}
	if hasLine(r, "gpu 2:") || hasLine(r, "gpu 5:") {
		t.Errorf("gpu 2 (idle at Gen3) or gpu 5 (corrected errors) failed: %q", r)
	}
	for _, want := range []string{"gpu 5: 3 corrected ECC error(s) during the step (volatile count 0 -> 3)", "gpu 5: 40 NVLink CRC error(s) during the step (0 -> 40)"} {
		if !hasLine(sum.Notes, want) {
			t.Errorf("no note %q in %q", want, sum.Notes)
		}
	}
	if h := sum.GPUs[3].NVLink; h == nil || len(h.ActiveBefore) != 18 || len(h.ActiveAfter) != 17 {
		t.Errorf("gpu 3 NVLinks = %+v", h)
	}
	if th := sum.GPUs[7].Thermal; th == nil || *th.MemLimitC != 95 || *th.SlowdownC != 90 || *th.MemMaxC != 96 {
		t.Errorf("gpu 7 thermal = %+v", th)
	}
	var util, memTemp, pcie bool
	for _, l := range lines {
		util = util || l.UtilizationPct != nil
		memTemp = memTemp || l.MemTemperatureC != nil
		pcie = pcie || (l.PCIeGen != nil && l.PCIeWidth != nil)
	}
	if !util || !memTemp || !pcie {
		t.Errorf("samples lack utilization (%v), HBM temperature (%v) or the PCIe link (%v)", util, memTemp, pcie)
	}
}

// A healthy simulated node has no link, thermal or ECC reason or note.
func TestTelemetryLinksHealthy(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:2")
	sum, _ := runTelemetry(t, s, nil)
	if sum.Verdict.Status != VerdictPassed || len(sum.Notes) != 0 {
		t.Errorf("verdict %+v, notes %q", sum.Verdict, sum.Notes)
	}
	if p := sum.GPUs[0].PCIe; p == nil || *p.MaxGen != 5 || *p.GenSeen != 5 || *p.WidthSeen != 16 || p.Loaded {
		t.Errorf("gpu 0 PCIe = %+v", p)
	}
}

const kmsgRecords = `6,100,5000000,-;Linux version 6.1.0
4,101,61000000,-;NVRM: Xid (PCI:0000:2a:00): 149, pid=4242, name=train, NETIR_LINK_DOWN
 SUBSYSTEM=pci
 DEVICE=+pci:0000:2a:00.0
4,102,62000000,-;NVRM: Xid (PCI:0000:2a:00): 13, pid=4242, name=train, Graphics Exception
4,103,63000000,-;NVRM: Xid (PCI:0000:5d:00): 31, pid=1, name=x, Ch 00000008, intr 10000000
6,104,64000000,-;nvidia-nvswitch: probe
`

// Preflight names the Xids the driver logged since boot for each GPU
// (matched by PCI bus id), warned: gpu 1 has the NVLink Xid 149 (fatal)
// and 13, gpu 3 Xid 31, gpu 0 none.
func TestPreflightXidHistory(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(log, []byte(kmsgRecords), 0o644); err != nil {
		t.Fatal(err)
	}
	checks := preflight(t, "h100:4", func(s *Simulated) { s.SetKernelLog(log) }, nil, nil, "")
	if c := findCheck(t, checks, CheckXidHistory, 0); c.Status != CheckPassed {
		t.Errorf("gpu 0: %+v", c)
	}
	c := findCheck(t, checks, CheckXidHistory, 1)
	if c.Status != CheckWarned || !strings.Contains(c.Message, "(1 fatal)") || !strings.Contains(c.Message, "Xid 149 (NVLink NETIR error (NVLINK_NETIR_ERROR)) at 1m1s after boot") || !strings.Contains(c.Message, "Xid 13") {
		t.Errorf("gpu 1: %+v", c)
	}
	if c := findCheck(t, checks, CheckXidHistory, 3); c.Status != CheckWarned || !strings.Contains(c.Message, "(0 fatal)") || !strings.Contains(c.Message, "Xid 31") {
		t.Errorf("gpu 3: %+v", c)
	}
	checks = preflight(t, "h100:1", func(s *Simulated) { s.SetKernelLog(filepath.Join(t.TempDir(), "none")) }, nil, nil, "")
	if c := findCheck(t, checks, CheckXidHistory, 0); c.Status != CheckWarned || !strings.Contains(c.Message, "Xids since boot not known: reading the kernel log") {
		t.Errorf("unreadable log: %+v", c)
	}
}

// An Xid the driver logs during the step that no NVML event reported
// fails the step from the kernel log; one logged before the step does
// not.
func TestTelemetryKernelLogXid(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(log, []byte(kmsgRecords), 0o644); err != nil {
		t.Fatal(err)
	}
	s := mustSimulate(t, "h100:8")
	s.SetKernelLog(log)
	sum, _ := runTelemetry(t, s, func() {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		f.WriteString("3,105,90000000,-;NVRM: Xid (PCI:0000:ab:00): 79, pid=0, name=, GPU has fallen off the bus.\n")
		f.Close()
	})
	want := "gpu 5: fatal Xid 79 (GPU has fallen off the bus) (from the kernel log, no NVML event)"
	if sum.Verdict.Status != VerdictFailed || len(sum.Verdict.Reasons) != 1 || sum.Verdict.Reasons[0] != want {
		t.Errorf("verdict = %+v, want only %q", sum.Verdict, want)
	}
}

func TestReadKernelXidsBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range maxKernelXids + 10 {
		b.WriteString("4," + strconv.Itoa(i) + ",1,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1, x\n")
	}
	b.WriteString("garbage without a separator\n4,x,y,-;NVRM: Xid (PCI:0000:18:00): 48, bad header\n")
	log := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	kl, err := ReadKernelXids(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(kl.Xids) != maxKernelXids || kl.Dropped != 10 || kl.Xids[0].Seq != 10 || kl.LastSeq != maxKernelXids+9 {
		t.Errorf("%d xids, %d dropped, first seq %d, last %d", len(kl.Xids), kl.Dropped, kl.Xids[0].Seq, kl.LastSeq)
	}
	if !samePCI("0000:18:00", "00000000:18:00.0") || samePCI("0000:18:00", "00000000:19:00.0") || samePCI("junk", "00000000:18:00.0") {
		t.Error("samePCI wrong")
	}
}
