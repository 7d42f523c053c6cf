package gpu

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/hardware"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/floors"
)

// CheckStatus is the outcome of one preflight check.
type CheckStatus string

// The outcomes of a preflight check.
const (
	CheckPassed CheckStatus = "passed"
	CheckFailed CheckStatus = "failed"
	CheckWarned CheckStatus = "warned"
)

// The names of the preflight checks.
const (
	CheckGPU               = "gpu"
	CheckDriver            = "driver"
	CheckComputeCapability = "compute-capability"
	CheckECC               = "ecc"
	CheckRetiredPages      = "retired-pages"
	CheckRowRemap          = "row-remap"
	CheckRecovery          = "recovery-action"
	CheckMIG               = "mig"
	CheckProcesses         = "processes"
	CheckMemory            = "memory"
	CheckPersistence       = "persistence"
	CheckFabric            = "fabric"
	CheckComputeMode       = "compute-mode"
	CheckXidHistory        = "xid-history"
	CheckFloors            = "floors"
)

// Check is one preflight check on one GPU (GPU set) or on the machine.
type Check struct {
	// Name is one of the Check* names.
	Name string `json:"name"`
	// GPU is the device index the check is about, absent for machine-wide
	// checks.
	GPU *int `json:"gpu,omitempty"`
	// Status is passed, failed or warned.
	Status CheckStatus `json:"status"`
	// Seen is the value found.
	Seen string `json:"seen,omitempty"`
	// Required is the value the pipeline asks for.
	Required string `json:"required,omitempty"`
	// Message is one line naming the check, the value seen and the value
	// required.
	Message string `json:"message"`
}

// Live is what a device query at preflight time sees: values that change
// from one moment to the next and so are not part of the Record.
type Live struct {
	// Simulated is true when the values come from simulated GPUs.
	Simulated bool `json:"simulated"`
	// GPUs are in NVML index order.
	GPUs []LiveGPU `json:"gpus"`
	// KernelXids are the Xids the driver logged in the kernel log since
	// boot (see ReadKernelXids), of every GPU; nil when it was not read.
	KernelXids []KernelXid `json:"kernel_xids,omitempty"`
	// KernelLog says why the kernel log was not read, when it was not
	// (not readable, or a simulated source given none).
	KernelLog string `json:"kernel_log,omitempty"`
}

// LiveGPU is the live state of one GPU.
type LiveGPU struct {
	// Index is the NVML device index.
	Index int `json:"index"`
	// UUID identifies the device (to match the record).
	UUID string `json:"uuid,omitempty"`
	// MemoryFreeBytes is the free device memory, nil when not reported.
	MemoryFreeBytes *uint64 `json:"memory_free_bytes,omitempty"`
	// MemoryUsedBytes is the used device memory, nil when not reported.
	MemoryUsedBytes *uint64 `json:"memory_used_bytes,omitempty"`
	// Processes are the compute processes on the GPU; nil when NVML does
	// not report them (ProcessesKnown false).
	Processes []Process `json:"processes,omitempty"`
	// ProcessesKnown is whether NVML reported the process list.
	ProcessesKnown bool `json:"processes_known"`
	// Lost says which query NVML answered GPU_IS_LOST or RESET_REQUIRED,
	// when one did.
	Lost string `json:"lost,omitempty"`
	// Error says why NVML could not open the GPU, when it could not.
	Error string `json:"error,omitempty"`
	// Fabric is the GPU's NVSwitch fabric registration (HGX Hopper and
	// later), nil when NVML does not report it (no fabric, older GPU or
	// driver).
	Fabric *Fabric `json:"fabric,omitempty"`
	// ComputeMode is NVML's compute mode (default, exclusive_process,
	// prohibited), empty when not reported.
	ComputeMode string `json:"compute_mode,omitempty"`
}

// Fabric is a GPU's NVSwitch fabric state as NVML reports it.
type Fabric struct {
	// State is not_started, in_progress or completed.
	State string `json:"state"`
	// Status is the registration result once completed ("success" or the
	// NVML error).
	Status string `json:"status,omitempty"`
}

// Process is a compute process using a GPU.
type Process struct {
	// PID is the process id (in the host's pid namespace).
	PID uint32 `json:"pid"`
	// UsedMemoryBytes is the device memory it holds, when reported.
	UsedMemoryBytes uint64 `json:"used_memory_bytes,omitempty"`
}

// PreflightError is returned by Err when a check failed; its message
// lists every failed check.
type PreflightError struct {
	// Failed are the failed checks.
	Failed []Check
}

// Error is the failed check's message, or the count of failed checks
// followed by their messages, one per line.
func (e *PreflightError) Error() string {
	if len(e.Failed) == 1 {
		return e.Failed[0].Message
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d checks failed:", len(e.Failed))
	for _, c := range e.Failed {
		b.WriteString("\n  ")
		b.WriteString(c.Message)
	}
	return b.String()
}

// Err returns a *PreflightError naming every failed check, or nil when
// none failed (warned checks do not fail).
func Err(checks []Check) error {
	var failed []Check
	for _, c := range checks {
		if c.Status == CheckFailed {
			failed = append(failed, c)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &PreflightError{Failed: failed}
}

// BuildCode returns the code a build for targets embeds: SASS for each
// target and, when ptx is set, PTX for the highest one (plain compute_XY,
// see [pipeline.PTXTarget]), as cuda-build does by default. Preflight
// takes this list.
func BuildCode(targets []string, ptx bool) []string {
	out := slices.Clone(targets)
	if !ptx {
		return out
	}
	var sass []pipeline.Target
	for _, s := range targets {
		if t, isPTX, err := pipeline.ParseCode(s); err == nil && !isPTX {
			sass = append(sass, t)
		}
	}
	if hi, ok := pipeline.PTXTarget(sass); ok {
		out = append(out, hi.Compute())
	}
	return out
}

// code is one nvcc code target: sm_XY[a|f] (SASS) or compute_XY[a|f] (PTX).
type code struct {
	name     string
	cc       int  // 10*major + minor
	ptx      bool // compute_XY
	specific bool // sm_90a / sm_100f: runs only on exactly that cc
}

func parseCode(s string) (code, error) {
	t, ptx, err := pipeline.ParseCode(s)
	if err != nil {
		return code{name: s}, err
	}
	return code{name: s, cc: t.CC(), ptx: ptx, specific: t.Specific()}, nil
}

func ccString(cc int) string { return fmt.Sprintf("%d.%d", cc/10, cc%10) }

func parseCC(s string) (int, bool) {
	maj, min, ok := strings.Cut(s, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if !ok || err1 != nil || err2 != nil || b > 9 {
		return 0, false
	}
	return a*10 + b, true
}

// compareVersions compares dotted numeric versions ("550.54.15").
func compareVersions(a, b []int) int {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

func parseVersion(s string) ([]int, bool) {
	if s == "" {
		return nil, false
	}
	var v []int
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

// Preflight checks rec (and live, from Probe right before the GPU steps)
// against spec and the step's needs. embedded lists what the build embeds
// (see BuildCode: sm_XY SASS, compute_XY PTX); memory is the step's
// declared device memory ("" for none).
//
// Each device check yields one Check per GPU. Checks that need live values
// fall back to the record with a warning when live is nil. The error is
// for bad input only (a bad minDriver, target or memory size), naming the
// field; failed checks are in the result (see Err).
func Preflight(rec *hardware.Record, spec *pipeline.Preflight, embedded []string, memory pipeline.Size, live *Live, opts ...PreflightOption) ([]Check, error) {
	if spec == nil {
		spec = &pipeline.Preflight{}
	}
	var o preflightOptions
	for _, opt := range opts {
		opt(&o)
	}
	in, err := parsePreflightInputs(spec, embedded, memory)
	if err != nil {
		return nil, err
	}
	p := &preflightRun{rec: rec, spec: spec, toolkit: o.toolkit}
	if !p.gpus() {
		return p.out, nil
	}
	if in.minDriver != nil {
		p.driver(in.minDriver)
	}
	var liveBy map[int]LiveGPU
	if live != nil {
		liveBy = map[int]LiveGPU{}
		for _, g := range live.GPUs {
			liveBy[g.Index] = g
		}
	}
	for i := range rec.GPUs {
		g := &rec.GPUs[i]
		lg, haveLive := liveBy[g.Index]
		if why := cmp.Or(g.Error, lg.Error); why != "" {
			p.add(CheckGPU, g, CheckFailed, "not opened", "reachable", "NVML cannot open the GPU this step sees: "+why+fmt.Sprintf(" (hint: nvidia-smi -i %d shows its state; exclude it with CUDA_VISIBLE_DEVICES, or reset it)", g.Index))
			continue
		}
		if len(in.codes) > 0 {
			checkCC(g, in.codes, p.add, p.ptxTooNew)
		}
		p.ecc(g)
		p.memoryHealth(g)
		p.mig(g)
		p.floors(g)
		if haveLive && lg.Lost != "" {
			p.add(CheckGPU, g, CheckFailed, "lost", "reachable", "NVML reports the GPU"+uuidText(cmp.Or(g.UUID, lg.UUID))+" lost or needing a reset ("+lg.Lost+") (hint: nvidia-smi -i "+strconv.Itoa(g.Index)+"; reset the GPU or reboot)")
			continue
		}
		if haveLive && lg.UUID != "" && g.UUID != "" && lg.UUID != g.UUID {
			p.add(CheckGPU, g, CheckFailed, lg.UUID, g.UUID, "the GPU at this index changed since the hardware record was taken: seen "+lg.UUID+", required "+g.UUID)
			continue
		}
		if haveLive && lg.Fabric != nil {
			p.fabric(g, lg.Fabric)
		}
		p.processes(g, lg, haveLive)
		if !memory.IsZero() {
			p.memory(g, lg, haveLive, memory.Bytes, memory.String())
		}
		if haveLive {
			p.computeMode(g, lg.ComputeMode)
		}
		if live != nil {
			p.xidHistory(g, live)
		}
		switch {
		case spec.RequirePersistence:
			p.persistence(g)
		case g.PersistenceMode != nil && !*g.PersistenceMode:
			p.add(CheckPersistence, g, CheckWarned, "disabled", "enabled (warned; preflight.requirePersistence fails it)",
				"persistence mode is off: the driver tears the GPU down between processes, so every step pays the initialisation again and a burn-in starts cold (hint: nvidia-smi -pm 1, or run nvidia-persistenced)")
		}
	}
	return p.out, nil
}

// preflightInputs are Preflight's arguments parsed.
type preflightInputs struct {
	minDriver []int  // nil: no minimum
	codes     []code // what the build embeds

}

// parsePreflightInputs parses the minimum driver, the embedded code and
// the step's memory, naming the field of each that does not parse.
func parsePreflightInputs(spec *pipeline.Preflight, embedded []string, memory pipeline.Size) (preflightInputs, error) {
	var in preflightInputs
	var errs []error
	if spec.MinDriver != "" {
		v, ok := parseVersion(spec.MinDriver)
		if !ok {
			errs = append(errs, fmt.Errorf("preflight.minDriver: %q: expected a driver version such as 535.104.05", spec.MinDriver))
		}
		in.minDriver = v
	}
	for _, t := range embedded {
		c, err := parseCode(t)
		if err != nil {
			errs = append(errs, fmt.Errorf("targets: %w", err))
			continue
		}
		in.codes = append(in.codes, c)
	}
	return in, errors.Join(errs...)
}

// preflightRun collects the checks of one Preflight call.
type preflightRun struct {
	rec     *hardware.Record
	spec    *pipeline.Preflight
	toolkit string // the build's CUDA release, "" when unknown
	out     []Check
}

// PreflightOption configures Preflight.
type PreflightOption func(*preflightOptions)

type preflightOptions struct{ toolkit string }

// WithToolkit says which CUDA release ("12.4") built the code, so that
// a GPU that must JIT-compile its PTX on a driver of an older CUDA
// version fails: the driver cannot load PTX newer than itself
// (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). An empty release checks nothing.
func WithToolkit(release string) PreflightOption {
	return func(o *preflightOptions) { o.toolkit = release }
}

// ToolkitRelease returns the CUDA release of a run record's toolchain
// fingerprint (pipeline/cuda.Toolchain, or its JSON decoded into a map
// when a run is resumed): its "release" field, "" when it has none.
func ToolkitRelease(toolchain any) string {
	if toolchain == nil {
		return ""
	}
	raw, err := json.Marshal(toolchain)
	if err != nil {
		return ""
	}
	var tc struct {
		Release string `json:"release"`
	}
	if json.Unmarshal(raw, &tc) != nil {
		return ""
	}
	return tc.Release
}

// ptxTooNew says why the driver cannot JIT-compile PTX the build's
// toolkit wrote: the toolkit is a newer CUDA release than the driver
// supports; "" when it can, or when either version is unknown.
func (p *preflightRun) ptxTooNew() string {
	tk, ok1 := parseVersion(p.toolkit)
	drv, ok2 := parseVersion(p.rec.CUDADriverVersion)
	if !ok1 || !ok2 || compareVersions(tk[:min(2, len(tk))], drv[:min(2, len(drv))]) <= 0 {
		return ""
	}
	return fmt.Sprintf("the build's PTX comes from CUDA %s but the driver %s supports CUDA %s and cannot JIT-compile newer PTX (CUDA_ERROR_UNSUPPORTED_PTX_VERSION) (hint: install a driver for CUDA %s or newer, or build SASS for this GPU's target)",
		p.toolkit, cmp.Or(p.rec.DriverVersion, "here"), p.rec.CUDADriverVersion, p.toolkit)
}

// add records one check (of gpu, or of the machine when gpu is nil); an
// empty msg says "seen X, required Y".
func (p *preflightRun) add(name string, gpu *hardware.GPU, st CheckStatus, seen, required, msg string) {
	c := Check{Name: name, Status: st, Seen: seen, Required: required}
	prefix := name
	if gpu != nil {
		c.GPU = ptr(gpu.Index)
		prefix = fmt.Sprintf("%s: gpu %d (%s)", name, gpu.Index, gpu.Name)
		if gpu.Name == "" {
			prefix = fmt.Sprintf("%s: gpu %d", name, gpu.Index)
		}
	}
	if msg == "" {
		msg = fmt.Sprintf("seen %s, required %s", seen, required)
	}
	c.Message = prefix + ": " + msg
	if p.rec.Simulated {
		c.Message += " [simulated]"
	}
	p.out = append(p.out, c)
}

// gpus checks that the record has GPUs (real ones, or warns); false when
// it has none and no other check applies.
func (p *preflightRun) gpus() bool {
	rec := p.rec
	switch {
	case len(rec.GPUs) == 0:
		p.add(CheckGPU, nil, CheckFailed, "no GPU", "at least one GPU", "seen no GPU ("+rec.Reason+"), required at least one GPU")
		return false
	case rec.Simulated:
		p.add(CheckGPU, nil, CheckWarned, fmt.Sprintf("%d simulated GPU(s)", len(rec.GPUs)), "real GPU", "devices are simulated (GPUATTEST_FAKE_GPU): results say nothing about real hardware")
	default:
		p.add(CheckGPU, nil, CheckPassed, fmt.Sprintf("%d GPU(s)", len(rec.GPUs)), "at least one GPU", "")
	}
	return true
}

// driver checks the driver version against preflight.minDriver.
func (p *preflightRun) driver(minDriver []int) {
	req := ">= " + p.spec.MinDriver
	if have, ok := parseVersion(p.rec.DriverVersion); !ok {
		p.add(CheckDriver, nil, CheckFailed, "unknown", req, "driver version not reported, required "+req)
	} else if compareVersions(have, minDriver) < 0 {
		p.add(CheckDriver, nil, CheckFailed, p.rec.DriverVersion, req, "")
	} else {
		p.add(CheckDriver, nil, CheckPassed, p.rec.DriverVersion, req, "")
	}
}

// floors checks that g's model has floors in gpuattest's table
// (pipeline/floors): one that has none is not judged against them, a
// warning, and a failure with preflight.requireFloors.
func (p *preflightRun) floors(g *hardware.GPU) {
	if m, ok := floors.Lookup(g.Name); ok {
		p.add(CheckFloors, g, CheckPassed, m.Name, "a model with floors",
			fmt.Sprintf("floors of %s: power %v of the limit, memory bandwidth %v, tensor fp16 %v", m.Name, m.Power.Min, m.MemoryBandwidth.Min, m.TensorFP16.Min))
		return
	}
	if p.spec.RequireFloors {
		p.add(CheckFloors, g, CheckFailed, "no floors", "a model with floors (preflight.requireFloors)",
			fmt.Sprintf("%s has no floors in gpuattest's table (%s), and preflight.requireFloors fails it (hint: run it without requireFloors, where its floors are not judged, or add its model to pipeline/floors with its datasheet)", orModel(g.Name), floors.NotJudged))
		return
	}
	p.add(CheckFloors, g, CheckWarned, "no floors", "not required", fmt.Sprintf("%s has no floors in gpuattest's table: %s (preflight.requireFloors fails it)", orModel(g.Name), floors.NotJudged))
}

func orModel(name string) string {
	if name == "" {
		return "the GPU's model (unnamed)"
	}
	return name
}

// ecc checks g's ECC mode against preflight.requireECC.
func (p *preflightRun) ecc(g *hardware.GPU) {
	requireECC := p.spec.RequireECC != nil && *p.spec.RequireECC
	switch {
	case g.ECCEnabled == nil && requireECC:
		p.add(CheckECC, g, CheckFailed, "not reported", "enabled", "")
	case g.ECCEnabled == nil:
		p.add(CheckECC, g, CheckWarned, "not reported", "not required", "ECC mode not reported (not required)")
	case *g.ECCEnabled && requireECC:
		p.add(CheckECC, g, CheckPassed, "enabled", "enabled", "")
	case *g.ECCEnabled:
		p.add(CheckECC, g, CheckPassed, "enabled", "not required", "ECC enabled (not required)")
	case requireECC:
		p.add(CheckECC, g, CheckFailed, "disabled", "enabled", "")
	default:
		p.add(CheckECC, g, CheckWarned, "disabled", "not required", "ECC disabled (not required): memory errors go undetected")
	}
}

// memoryHealth checks g's retired pages and row remapping.
func (p *preflightRun) memoryHealth(g *hardware.GPU) {
	switch {
	case g.RetiredPagesPending == nil:
		// Row-remapping GPUs (A100 and later) do not report it; the
		// row-remap check covers them.
	case *g.RetiredPagesPending:
		p.add(CheckRetiredPages, g, CheckFailed, "page retirement pending", "none pending", "seen page retirement pending (reboot or reset the GPU), required none pending")
	default:
		p.add(CheckRetiredPages, g, CheckPassed, "none pending", "none pending", "")
	}
	switch {
	case g.RemappedRowsFailed == nil:
		if g.RetiredPagesPending == nil {
			p.add(CheckRowRemap, g, CheckWarned, "not reported", "no failure", "neither row remapping nor page retirement reported: memory health unknown")
		}
	case *g.RemappedRowsFailed:
		p.add(CheckRowRemap, g, CheckFailed, "row remap failure", "no failure", "seen a row-remap failure (the GPU needs service), required no failure")
	case g.RemappedRowsPending != nil && *g.RemappedRowsPending:
		p.add(CheckRowRemap, g, CheckFailed, "row remap pending", "none pending", "seen a row remapping pending: a faulty memory row is not yet replaced (hint: reset the GPU with nvidia-smi -r -i "+strconv.Itoa(g.Index)+", or reboot), required none pending")
	default:
		p.add(CheckRowRemap, g, CheckPassed, "no failure", "no failure", "")
	}
	switch a := g.RecoveryAction; a {
	case "":
	case "none":
		p.add(CheckRecovery, g, CheckPassed, a, "none", "")
	default:
		p.add(CheckRecovery, g, CheckFailed, a, "none", "the driver asks for recovery action "+a+" (NVML GET_GPU_RECOVERY_ACTION), required none (hint: carry it out, then run again)")
	}
}

// mig checks g's MIG mode against preflight.allowMIG.
func (p *preflightRun) mig(g *hardware.GPU) {
	migReq := "disabled"
	if p.spec.AllowMIG {
		migReq = "allowed"
	}
	switch {
	case g.MIGEnabled == nil:
		p.add(CheckMIG, g, CheckPassed, "not supported", migReq, "")
	case *g.MIGEnabled && !p.spec.AllowMIG:
		p.add(CheckMIG, g, CheckFailed, "enabled", "disabled", "seen MIG enabled, required disabled (hint: set preflight.allowMIG or disable MIG with nvidia-smi -mig 0)")
	case *g.MIGEnabled:
		p.add(CheckMIG, g, CheckWarned, "enabled", "allowed", "MIG enabled (allowed): the step sees one MIG instance, not the whole GPU")
	default:
		p.add(CheckMIG, g, CheckPassed, "disabled", migReq, "")
	}
}

// fabric checks that g's NVSwitch fabric registration completed: until
// the fabric manager has registered the GPU, cuInit fails with
// CUDA_ERROR_SYSTEM_NOT_READY (802).
func (p *preflightRun) fabric(g *hardware.GPU, f *Fabric) {
	switch {
	case f.State != "completed":
		p.add(CheckFabric, g, CheckFailed, f.State, "completed", "fabric manager not ready: the GPU's NVSwitch fabric registration is "+strings.ReplaceAll(f.State, "_", " ")+" (CUDA fails with CUDA_ERROR_SYSTEM_NOT_READY until it completes) (hint: systemctl status nvidia-fabricmanager)")
	case f.Status != "success":
		p.add(CheckFabric, g, CheckFailed, "completed, "+f.Status, "completed, success", "fabric manager not ready: the GPU's NVSwitch fabric registration failed: "+f.Status+" (hint: journalctl -u nvidia-fabricmanager)")
	default:
		p.add(CheckFabric, g, CheckPassed, "completed", "completed", "")
	}
}

// processes checks the other compute processes live saw on g against
// preflight.allowOtherProcesses.
func (p *preflightRun) processes(g *hardware.GPU, lg LiveGPU, haveLive bool) {
	procReq := "none"
	if p.spec.AllowOtherProcess {
		procReq = "allowed"
	}
	switch {
	case !haveLive || !lg.ProcessesKnown:
		p.add(CheckProcesses, g, CheckWarned, "not probed", procReq, "running processes not reported: cannot tell whether the GPU is shared")
	case len(lg.Processes) == 0:
		p.add(CheckProcesses, g, CheckPassed, "none", procReq, "")
	default:
		var pids []string
		for _, pr := range lg.Processes {
			pids = append(pids, fmt.Sprintf("pid %d (%s)", pr.PID, pipeline.FormatSize(pr.UsedMemoryBytes)))
		}
		seen := fmt.Sprintf("%d other compute process(es): %s", len(lg.Processes), strings.Join(pids, ", "))
		if p.spec.AllowOtherProcess {
			p.add(CheckProcesses, g, CheckWarned, seen, procReq, "seen "+seen+" (allowed): timings may be disturbed")
		} else {
			p.add(CheckProcesses, g, CheckFailed, seen, procReq, "seen "+seen+", required none (hint: stop them or set preflight.allowOtherProcesses)")
		}
	}
}

// memory checks g's free memory (live) or total memory (the record)
// against the need bytes the step declares as memory.
func (p *preflightRun) memory(g *hardware.GPU, lg LiveGPU, haveLive bool, need uint64, memory string) {
	req := ">= " + pipeline.FormatSize(need) + " free"
	switch {
	case haveLive && lg.MemoryFreeBytes != nil:
		free := *lg.MemoryFreeBytes
		seen := pipeline.FormatSize(free) + " free"
		if free < need {
			p.add(CheckMemory, g, CheckFailed, seen, req, fmt.Sprintf("seen %s, required %s (the step declares memory: %s)", seen, req, memory))
		} else {
			p.add(CheckMemory, g, CheckPassed, seen, req, "")
		}
	case g.MemoryTotalBytes != nil && *g.MemoryTotalBytes < need:
		seen := pipeline.FormatSize(*g.MemoryTotalBytes) + " total"
		p.add(CheckMemory, g, CheckFailed, seen, req, fmt.Sprintf("seen %s, required %s (the step declares memory: %s)", seen, req, memory))
	case g.MemoryTotalBytes != nil:
		seen := pipeline.FormatSize(*g.MemoryTotalBytes) + " total"
		p.add(CheckMemory, g, CheckWarned, seen, req, "free memory not probed; total "+pipeline.FormatSize(*g.MemoryTotalBytes)+" is enough for "+memory)
	default:
		p.add(CheckMemory, g, CheckWarned, "not reported", req, "device memory not reported: cannot check the step's "+memory)
	}
}

// computeMode fails a GPU in compute mode PROHIBITED, on which no CUDA
// context can be created: the harness would fail on it with an opaque
// CUDA error (or, with --devices all, name it only as unusable). Other
// modes add no check.
func (p *preflightRun) computeMode(g *hardware.GPU, mode string) {
	if mode == "prohibited" {
		p.add(CheckComputeMode, g, CheckFailed, mode, "default or exclusive_process",
			fmt.Sprintf("compute mode PROHIBITED: no CUDA context can be created on this GPU, so nothing can run on it (hint: nvidia-smi -i %d -c DEFAULT, as root)", g.Index))
	}
}

// persistence checks that g runs in persistence mode
// (preflight.requirePersistence).
func (p *preflightRun) persistence(g *hardware.GPU) {
	switch {
	case g.PersistenceMode == nil:
		p.add(CheckPersistence, g, CheckFailed, "not reported", "enabled", "")
	case *g.PersistenceMode:
		p.add(CheckPersistence, g, CheckPassed, "enabled", "enabled", "")
	default:
		p.add(CheckPersistence, g, CheckFailed, "disabled", "enabled", "seen disabled, required enabled (hint: nvidia-smi -pm 1 or nvidia-persistenced)")
	}
}

// checkCC decides whether g can run the build's code: exact SASS, SASS of
// a lower minor of the same major (binary compatibility), or else PTX the
// driver JIT-compiles (warned).
func checkCC(g *hardware.GPU, codes []code, add func(string, *hardware.GPU, CheckStatus, string, string, string), ptxTooNew func() string) {
	var names []string
	for _, c := range codes {
		names = append(names, c.name)
	}
	required := "one of " + strings.Join(names, ", ")
	cc, ok := parseCC(g.ComputeCapability)
	if !ok {
		add(CheckComputeCapability, g, CheckFailed, "not reported", required, "compute capability not reported, required a GPU that runs "+required)
		return
	}
	seen := "cc " + ccString(cc)
	var compat, jit *code
	for i := range codes {
		c := &codes[i]
		switch {
		case !c.ptx && c.cc == cc:
			add(CheckComputeCapability, g, CheckPassed, seen, required, fmt.Sprintf("%s SASS on cc %s", c.name, ccString(cc)))
			return
		case !c.ptx && !c.specific && c.cc/10 == cc/10 && c.cc < cc:
			if compat == nil || c.cc > compat.cc {
				compat = c
			}
		case c.ptx && (c.cc == cc || (!c.specific && c.cc < cc)):
			if jit == nil || c.cc > jit.cc {
				jit = c
			}
		}
	}
	if compat != nil {
		add(CheckComputeCapability, g, CheckPassed, seen, required, fmt.Sprintf("%s SASS runs on %s via binary compatibility", compat.name, ccString(cc)))
		return
	}
	if jit != nil && ptxTooNew() != "" {
		add(CheckComputeCapability, g, CheckFailed, seen, required, fmt.Sprintf("no SASS for cc %s, so the driver must JIT-compile PTX %s: %s", ccString(cc), jit.name, ptxTooNew()))
		return
	}
	if jit != nil {
		add(CheckComputeCapability, g, CheckWarned, seen, required, fmt.Sprintf("no SASS for cc %s; PTX %s will be JIT-compiled by the driver at load (slower first launch, code not the one the build tested)", ccString(cc), jit.name))
		return
	}
	add(CheckComputeCapability, g, CheckFailed, seen, required, fmt.Sprintf("seen %s, required a GPU that runs %s (no SASS for this major version and no PTX at or below %s)", seen, strings.Join(names, ", "), ccString(cc)))
}

// xidHistory reports the Xids the driver logged for g since boot: none
// passes, any warns, naming the fatal ones. It warns and does not fail:
// a reset may have cleared what a fatal Xid reported, and only a reboot
// clears the log; telemetry fails a step on an Xid during it. When the
// kernel log was not readable the check says why (warned).
func (p *preflightRun) xidHistory(g *hardware.GPU, live *Live) {
	if live.KernelXids == nil && live.KernelLog == noSimulatedLog {
		return // a simulated source given no kernel log has no history
	}
	if live.KernelXids == nil {
		p.add(CheckXidHistory, g, CheckWarned, "not read", "none since boot", "Xids since boot not known: "+live.KernelLog)
		return
	}
	var seen []string
	fatal := 0
	for _, x := range live.KernelXids {
		if g.PCIBusID == "" || !samePCI(x.PCIBusID, g.PCIBusID) {
			continue
		}
		if x.Fatal {
			fatal++
		}
		if len(seen) < 8 {
			seen = append(seen, fmt.Sprintf("Xid %d (%s) at %s after boot", x.Xid, XidDescription(x.Xid), x.SinceBoot.Round(time.Second)))
		}
	}
	if len(seen) == 0 {
		p.add(CheckXidHistory, g, CheckPassed, "none since boot", "none since boot", "")
		return
	}
	msg := fmt.Sprintf("the driver logged Xids for this GPU since boot (%d fatal): %s (hint: sudo dmesg | grep -i xid; a fatal one needs the GPU reset and checked)", fatal, strings.Join(seen, "; "))
	p.add(CheckXidHistory, g, CheckWarned, strings.Join(seen, "; "), "none since boot", msg)
}

// noSimulatedLog is Live.KernelLog for a simulated source given no
// kernel log.
const noSimulatedLog = "simulated GPUs: no kernel log given"
