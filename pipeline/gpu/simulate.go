//go:build linux && cgo

package gpu

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// SimulatedModels are the values Simulate accepts (optionally with ":N").
var SimulatedModels = []string{"h100", "a100", "h200"}

// MaxSimulatedGPUs is the largest count Simulate accepts.
const MaxSimulatedGPUs = 64

// simModel holds what go-nvml's mock servers leave unset, with values of
// the kind the real boards report. They are plausible, not measured on a
// particular board, and every record from them says simulated.
type simModel struct {
	key       string
	cfg       gpus.Config
	newServer func(...gpus.Config) *server.Server
	vbios     string
	powerMW   uint32 // enforced power limit
	maxSM     uint32 // MHz
	maxMem    uint32 // MHz
	idleSM    uint32 // MHz, current SM clock when idle
	pcieGen   int
	pcieWidth int
	fabric    bool // NVSwitch fabric info reported (Hopper HGX); A100 answers not supported
	idleTempC uint32
	idleMW    uint32
	baseUsed  uint64 // bytes the driver reserves with no process
	busIDs    []byte // PCI bus numbers of a DGX of this model
	nvlinks   int    // NVLinks per GPU
	slowdownC uint32 // core slowdown threshold
	memMaxC   uint32 // HBM maximum temperature
}

var simModels = map[string]simModel{
	"h100": {
		key: "h100", cfg: gpus.H100_SXM5_80GB, newServer: dgxh100.NewWithGPUs,
		vbios: "96.00.74.00.0D", powerMW: 700_000, maxSM: 1980, maxMem: 2619, idleSM: 345,
		pcieGen: 5, pcieWidth: 16, idleTempC: 33, idleMW: 71_000, baseUsed: 1 << 20,
		busIDs: []byte{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}, fabric: true,
		nvlinks: 18, slowdownC: 90, memMaxC: 95,
	},
	"a100": {
		key: "a100", cfg: gpus.A100_SXM4_40GB, newServer: dgxa100.NewWithGPUs,
		vbios: "92.00.45.00.03", powerMW: 400_000, maxSM: 1410, maxMem: 1215, idleSM: 210,
		pcieGen: 4, pcieWidth: 16, idleTempC: 30, idleMW: 54_000, baseUsed: 3 << 20,
		busIDs:  []byte{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd},
		nvlinks: 12, slowdownC: 90, memMaxC: 95,
	},
	"h200": {
		key: "h200", cfg: gpus.H200_SXM5_141GB, newServer: dgxh200.NewWithGPUs,
		vbios: "96.00.A5.00.01", powerMW: 700_000, maxSM: 1980, maxMem: 3201, idleSM: 345,
		pcieGen: 5, pcieWidth: 16, idleTempC: 32, idleMW: 75_000, baseUsed: 1 << 20,
		busIDs: []byte{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}, fabric: true,
		nvlinks: 18, slowdownC: 90, memMaxC: 95,
	},
}

// Simulated is a Source of simulated GPUs served from go-nvml's mock
// servers (pkg/nvml/mock/dgxh100, dgxa100, dgxh200). The mocks give name,
// architecture, compute capability, memory size, PCI device id, MIG mode
// and driver/CUDA/NVML versions; Simulate fills the rest (see
// SimulatedFilled) and replaces the mocks' random UUIDs by UUIDs derived
// from model and index, so two collections give the same record.
//
// Tests inject faults with InjectXid, InjectDoubleBitECC,
// InjectCorrectedECC, AddRemappedRows(Correctable), SetRemapFailure,
// SetClockEventReasons and AddProcess, or set the function fields of
// Device(i) directly (a function that blocks is a hung GPU).
type Simulated struct {
	spec   string
	model  simModel
	server *server.Server

	mu   sync.Mutex
	devs []*simDevice
	sets map[*simEventSet]struct{}
	kmsg string // kernel log file (SetKernelLog)
}

// SetKernelLog makes Probe and telemetry read the Xids logged since boot
// from path, a file of /dev/kmsg records, as they read /dev/kmsg for real
// GPUs; without it they read no kernel log.
func (s *Simulated) SetKernelLog(path string) {
	s.mu.Lock()
	s.kmsg = path
	s.mu.Unlock()
}

// SimulatedFilled lists the record and telemetry values Simulate fills
// because the mock servers leave them unset.
var SimulatedFilled = []string{
	"uuid (derived from model and index)", "pci_bus_id (DGX bus numbers)", "vbios",
	"ecc_enabled (on)", "persistence_mode (on)", "power_limit_watts", "max_clocks_mhz",
	"pcie", "remapped_rows_failed and remapped_rows_pending (false)", "retired_pages_pending (not supported, as on row-remapping GPUs)",
	"memory used/free", "temperature", "power", "current clocks", "clock-event reasons (GPU idle)",
	"running processes (none)", "ECC counters (zero)", "Xid/ECC event sets",
	"NVSwitch fabric state (h100, h200: completed; a100: not reported)",
	"NVLinks (h100, h200: 18 active; a100: 12) and their error totals (zero)",
	"temperature thresholds (slowdown 90 C, HBM maximum 95 C)", "HBM temperature",
	"utilization (0 %: nothing runs on a simulated GPU)", "current PCIe link (the maximum)",
}

type simDevice struct {
	*server.Device
	index        int
	dbeVolatile  uint64
	dbeAggregate uint64
	sbeVolatile  uint64
	remapFailed  bool
	remapPending bool
	remapUnc     int // rows remapped for uncorrectable errors
	remapCorr    int // rows remapped for correctable errors
	recovery     *nvml.DeviceGpuRecoveryAction
	reasons      uint64
	procs        []nvml.ProcessInfo
	samples      uint32
	lost         nvml.Return // SUCCESS, or what every query answers (SetLost)
	openErr      nvml.Return // SUCCESS, or what opening the device answers (SetOpenError)
	fabricState  uint8       // nvml.GPU_FABRIC_STATE_*
	fabricStatus nvml.Return
	slowdownNS   map[uint32]uint64 // cumulative clock-event counters by field id
	computeMode  nvml.ComputeMode
	fields       map[uint32]uint64 // other field values (SetField)
	util         uint32            // GPU utilization, percent
	linksDown    map[int]bool      // NVLinks reported inactive
}

type simEventSet struct {
	mock.EventSet
	ch   chan nvml.EventData
	regs map[int]uint64 // device index -> registered event mask
}

// Simulate parses spec ("h100", "a100:2", "h200:8"; count 1 when omitted)
// and returns a Source serving that many simulated GPUs.
func Simulate(spec string) (*Simulated, error) {
	name, count, hasCount := strings.Cut(strings.ToLower(strings.TrimSpace(spec)), ":")
	m, ok := simModels[name]
	if !ok {
		return nil, fmt.Errorf("unknown simulated GPU %q\nhint: use one of %s, optionally with a count (h100:8)", spec, strings.Join(SimulatedModels, ", "))
	}
	n := 1
	if hasCount {
		v, err := strconv.Atoi(count)
		if err != nil || v < 1 || v > MaxSimulatedGPUs {
			return nil, fmt.Errorf("simulated GPU %q: count %q must be a whole number from 1 to %d\nhint: for example %s:8", spec, count, MaxSimulatedGPUs, name)
		}
		n = v
	}
	s := &Simulated{
		spec:   fmt.Sprintf("%s:%d", name, n),
		model:  m,
		server: m.newServer(gpus.Multiple(n, m.cfg)...),
		sets:   map[*simEventSet]struct{}{},
	}
	for i, d := range s.server.Devices {
		sd := &simDevice{Device: d.(*server.Device), index: i, reasons: nvml.ClocksEventReasonGpuIdle}
		if m.fabric {
			sd.fabricState = nvml.GPU_FABRIC_STATE_COMPLETED
		}
		s.fill(sd)
		s.guardLost(sd)
		s.devs = append(s.devs, sd)
	}
	s.server.EventSetCreateFunc = s.newEventSet
	// Confidential computing is off until EnableEvidence turns it on.
	s.server.SystemGetConfComputeStateFunc = func() (nvml.ConfComputeSystemState, nvml.Return) {
		return nvml.ConfComputeSystemState{Environment: nvml.CC_SYSTEM_ENVIRONMENT_UNAVAILABLE, CcFeature: nvml.CC_SYSTEM_FEATURE_DISABLED}, nvml.SUCCESS
	}
	s.server.SystemGetConfComputeSettingsFunc = func() (nvml.SystemConfComputeSettings, nvml.Return) {
		return nvml.SystemConfComputeSettings{MultiGpuMode: nvml.CC_SYSTEM_MULTIGPU_NONE}, nvml.SUCCESS
	}
	s.server.SystemGetCudaDriverVersion_v2Func = s.server.SystemGetCudaDriverVersionFunc
	byIndex := s.server.DeviceGetHandleByIndexFunc
	s.server.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		s.mu.Lock()
		ret := nvml.SUCCESS
		if i >= 0 && i < len(s.devs) {
			ret = s.devs[i].openErr
		}
		s.mu.Unlock()
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		return byIndex(i)
	}
	return s, nil
}

// Simulated reports true.
func (s *Simulated) Simulated() bool { return true }

// String names the source, e.g. "simulated h100:8".
func (s *Simulated) String() string { return "simulated " + s.spec }

// Open returns the mock server; its release function does nothing.
func (s *Simulated) Open() (nvml.Interface, func(), error) {
	return s.server, func() {}, nil
}

// Count returns the number of simulated GPUs.
func (s *Simulated) Count() int { return len(s.devs) }

// Device returns the mock device at index i, whose function fields
// (GetTemperatureFunc, GetRemappedRowsFunc, ...) a test may replace.
func (s *Simulated) Device(i int) *server.Device { return s.devs[i].Device }

// InjectXid delivers an Xid event for GPU i to every event set registered
// for Xid events on it, as the driver does after an Xid.
func (s *Simulated) InjectXid(i int, xid uint64) {
	s.deliver(i, nvml.EventTypeXidCriticalError, xid)
}

// InjectDoubleBitECC adds n uncorrected (double-bit) ECC errors to GPU i's
// volatile and aggregate counters and delivers a double-bit ECC event.
func (s *Simulated) InjectDoubleBitECC(i int, n uint64) {
	s.mu.Lock()
	s.devs[i].dbeVolatile += n
	s.devs[i].dbeAggregate += n
	s.mu.Unlock()
	s.deliver(i, nvml.EventTypeDoubleBitEccError, 0)
}

// SetRemapFailure marks GPU i's row remapping as failed.
func (s *Simulated) SetRemapFailure(i int, failed bool) {
	s.mu.Lock()
	s.devs[i].remapFailed = failed
	s.mu.Unlock()
}

// SetRemapPending marks GPU i's row remapping as pending (applied at
// the next GPU reset).
func (s *Simulated) SetRemapPending(i int, pending bool) {
	s.mu.Lock()
	s.devs[i].remapPending = pending
	s.mu.Unlock()
}

// AddRemappedRows adds n rows remapped for uncorrectable errors to GPU i.
func (s *Simulated) AddRemappedRows(i int, n int) {
	s.mu.Lock()
	s.devs[i].remapUnc += n
	s.mu.Unlock()
}

// AddRemappedRowsCorrectable adds n rows remapped for correctable errors
// to GPU i.
func (s *Simulated) AddRemappedRowsCorrectable(i int, n int) {
	s.mu.Lock()
	s.devs[i].remapCorr += n
	s.mu.Unlock()
}

// SetRecoveryAction makes GPU i answer the field value
// GET_GPU_RECOVERY_ACTION with a (by default the field is not supported,
// as on drivers that predate it).
func (s *Simulated) SetRecoveryAction(i int, a nvml.DeviceGpuRecoveryAction) {
	s.mu.Lock()
	s.devs[i].recovery = &a
	s.mu.Unlock()
}

// SetFabricState sets GPU i's NVSwitch fabric state
// (nvml.GPU_FABRIC_STATE_*) and registration status, as
// nvmlDeviceGetGpuFabricInfo reports them; simulated H100 and H200 GPUs
// start completed with success, A100s do not report the fabric.
func (s *Simulated) SetFabricState(i int, state uint8, status nvml.Return) {
	s.mu.Lock()
	s.devs[i].fabricState, s.devs[i].fabricStatus = state, status
	s.mu.Unlock()
}

// SetOpenError makes opening GPU i (nvmlDeviceGetHandleByIndex) answer
// ret, as NVML does for a GPU it lists but cannot open (lost, no
// permission); nvml.SUCCESS restores it.
func (s *Simulated) SetOpenError(i int, ret nvml.Return) {
	s.mu.Lock()
	s.devs[i].openErr = ret
	s.mu.Unlock()
}

// SetLost makes every health and telemetry query of GPU i, and every
// wait of an event set registered on it, answer ret
// (nvml.ERROR_GPU_IS_LOST after a GPU falls off the bus,
// nvml.ERROR_RESET_REQUIRED after a fault that needs a reset);
// nvml.SUCCESS restores it. Identity queries (name, UUID, PCI) still
// answer.
func (s *Simulated) SetLost(i int, ret nvml.Return) {
	s.mu.Lock()
	s.devs[i].lost = ret
	s.mu.Unlock()
}

// SetClockEventReasons sets GPU i's current clock-event (throttle)
// reasons mask (nvml.ClocksEventReason*).
func (s *Simulated) SetClockEventReasons(i int, reasons uint64) {
	s.mu.Lock()
	s.devs[i].reasons = reasons
	s.mu.Unlock()
}

// AddSlowdown adds d to GPU i's cumulative clock-event counter of reason
// (one bit of nvml.ClocksEventReason*: sw_power_cap, SW/HW thermal
// slowdown or HW power brake), as the driver counts time spent in it.
func (s *Simulated) AddSlowdown(i int, reason uint64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range slowdownCounters {
		if c.bit == reason {
			if s.devs[i].slowdownNS == nil {
				s.devs[i].slowdownNS = map[uint32]uint64{}
			}
			s.devs[i].slowdownNS[c.field] += uint64(d)
		}
	}
}

// SetComputeMode sets GPU i's compute mode (default at start).
func (s *Simulated) SetComputeMode(i int, m nvml.ComputeMode) {
	s.mu.Lock()
	s.devs[i].computeMode = m
	s.mu.Unlock()
}

// SetField makes GPU i answer NVML field value id with v (an unsigned
// 64-bit value), e.g. nvml.FI_DEV_MEMORY_TEMP or the NVLink error totals
// nvml.FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL.
func (s *Simulated) SetField(i int, id uint32, v uint64) {
	s.mu.Lock()
	if s.devs[i].fields == nil {
		s.devs[i].fields = map[uint32]uint64{}
	}
	s.devs[i].fields[id] = v
	s.mu.Unlock()
}

// SetUtilization sets GPU i's utilization (percent) as NVML reports it.
func (s *Simulated) SetUtilization(i int, pct uint32) {
	s.mu.Lock()
	s.devs[i].util = pct
	s.mu.Unlock()
}

// SetNVLinkDown reports GPU i's NVLink link inactive (down) or active.
func (s *Simulated) SetNVLinkDown(i, link int, down bool) {
	s.mu.Lock()
	if s.devs[i].linksDown == nil {
		s.devs[i].linksDown = map[int]bool{}
	}
	s.devs[i].linksDown[link] = down
	s.mu.Unlock()
}

// InjectCorrectedECC adds n corrected (single-bit) ECC errors to GPU i's
// volatile count.
func (s *Simulated) InjectCorrectedECC(i int, n uint64) {
	s.mu.Lock()
	s.devs[i].sbeVolatile += n
	s.mu.Unlock()
}

func isSlowdownField(id uint32) bool {
	for _, c := range slowdownCounters {
		if c.field == id {
			return true
		}
	}
	return false
}

// AddProcess makes a compute process with pid use usedBytes of GPU i's
// memory.
func (s *Simulated) AddProcess(i int, pid uint32, usedBytes uint64) {
	s.mu.Lock()
	s.devs[i].procs = append(s.devs[i].procs, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: usedBytes, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF})
	s.mu.Unlock()
}

func (s *Simulated) deliver(i int, typ uint64, data uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for set := range s.sets {
		if set.regs[i]&typ == 0 {
			continue
		}
		select {
		case set.ch <- nvml.EventData{Device: s.devs[i].Device, EventType: typ, EventData: data, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}:
		default: // a full set drops events, as NVML's does
		}
	}
}

func (s *Simulated) newEventSet() (nvml.EventSet, nvml.Return) {
	set := &simEventSet{ch: make(chan nvml.EventData, 256), regs: map[int]uint64{}}
	set.WaitFunc = func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
		if ret := s.setLost(set); ret != nvml.SUCCESS {
			return nvml.EventData{}, ret
		}
		select { // a queued event wins over an expired timeout
		case e := <-set.ch:
			return e, nvml.SUCCESS
		default:
		}
		t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
		defer t.Stop()
		select {
		case e := <-set.ch:
			return e, nvml.SUCCESS
		case <-t.C:
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	set.FreeFunc = func() nvml.Return {
		s.mu.Lock()
		delete(s.sets, set)
		s.mu.Unlock()
		return nvml.SUCCESS
	}
	s.mu.Lock()
	s.sets[set] = struct{}{}
	s.mu.Unlock()
	return set, nvml.SUCCESS
}

// setLost returns what a wait on set answers when a GPU registered on it
// is lost (SUCCESS when none is).
func (s *Simulated) setLost(set *simEventSet) nvml.Return {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range set.regs {
		if ret := s.devs[i].lost; ret != nvml.SUCCESS {
			return ret
		}
	}
	return nvml.SUCCESS
}

// guardLost wraps the health and telemetry queries of sd so that they
// answer sd.lost while it is set (SetLost).
func (s *Simulated) guardLost(sd *simDevice) {
	d := sd.Device
	lost := func() nvml.Return {
		s.mu.Lock()
		defer s.mu.Unlock()
		return sd.lost
	}
	temp, power, clock, mem := d.GetTemperatureFunc, d.GetPowerUsageFunc, d.GetClockInfoFunc, d.GetMemoryInfoFunc
	ecc, remap, retired, procs := d.GetTotalEccErrorsFunc, d.GetRemappedRowsFunc, d.GetRetiredPagesPendingStatusFunc, d.GetComputeRunningProcessesFunc
	events, throttle, fields := d.GetCurrentClocksEventReasonsFunc, d.GetCurrentClocksThrottleReasonsFunc, d.GetFieldValuesFunc
	d.GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
		if r := lost(); r != nvml.SUCCESS {
			return r
		}
		return fields(fv)
	}
	d.GetTemperatureFunc = func(x nvml.TemperatureSensors) (uint32, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return 0, r
		}
		return temp(x)
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return 0, r
		}
		return power()
	}
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return 0, r
		}
		return clock(c)
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return nvml.Memory{}, r
		}
		return mem()
	}
	memV2 := d.GetMemoryInfo_v2Func
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return nvml.Memory_v2{}, r
		}
		return memV2()
	}
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return 0, r
		}
		return ecc(t, c)
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return 0, 0, false, false, r
		}
		return remap()
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return 0, r
		}
		return retired()
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return nil, r
		}
		return procs()
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return 0, r
		}
		return events()
	}
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
		if r := lost(); r != nvml.SUCCESS {
			return 0, r
		}
		return throttle()
	}
}

// simUUID derives a stable UUID-shaped id from model and index.
func simUUID(model string, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("gpuattest simulated %s %d", model, i)))
	h[6] = h[6]&0x0f | 0x80 // version 8 (custom)
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func (s *Simulated) fill(sd *simDevice) {
	m, d, i := s.model, sd.Device, sd.index
	bus := byte(i)
	if i < len(m.busIDs) {
		bus = m.busIDs[i]
	}
	d.UUID = simUUID(m.key, i)
	d.PciBusID = fmt.Sprintf("00000000:%02X:00.0", bus)

	d.GetUUIDFunc = func() (string, nvml.Return) { return d.UUID, nvml.SUCCESS }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{Domain: 0, Bus: uint32(bus), Device: 0, PciDeviceId: d.Config.PciDeviceId, PciSubSystemId: 0x16C110DE}
		copy(p.BusId[:], toC(d.PciBusID))
		copy(p.BusIdLegacy[:], toC(fmt.Sprintf("0000:%02X:00.0", bus)))
		return p, nvml.SUCCESS
	}
	d.GetVbiosVersionFunc = func() (string, nvml.Return) { return m.vbios, nvml.SUCCESS }
	d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_ENABLED, nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return m.powerMW, nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return m.powerMW, nvml.SUCCESS }
	d.GetMaxClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		switch c {
		case nvml.CLOCK_SM, nvml.CLOCK_GRAPHICS:
			return m.maxSM, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return m.maxMem, nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		switch c {
		case nvml.CLOCK_SM, nvml.CLOCK_GRAPHICS:
			return m.idleSM, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return m.maxMem, nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return m.pcieGen, nvml.SUCCESS }
	d.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return m.pcieWidth, nvml.SUCCESS }
	d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return m.pcieGen, nvml.SUCCESS }
	d.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return m.pcieWidth, nvml.SUCCESS }
	s.fillHealth(sd)
	s.fillLive(sd)
	s.fillLinks(sd)
}

// fillLive serves sd's live readings: memory, processes, temperature,
// power, clock-event reasons and event registration.
func (s *Simulated) fillLive(sd *simDevice) {
	m, d, i := s.model, sd.Device, sd.index
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		used := m.baseUsed
		for _, p := range sd.procs {
			used += p.UsedGpuMemory
		}
		total := d.MemoryInfo.Total
		used = min(used, total)
		return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
	}
	// Version 2 splits what the driver reserves (Reserved) from what
	// processes use (Used); version 1 counts both as used.
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		total := d.MemoryInfo.Total
		reserved, used := min(m.baseUsed, total), uint64(0)
		for _, p := range sd.procs {
			used += p.UsedGpuMemory
		}
		used = min(used, total-reserved)
		return nvml.Memory_v2{Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2), Total: total, Reserved: reserved, Used: used, Free: total - reserved - used}, nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Clone(sd.procs), nvml.SUCCESS
	}
	// Temperature and power wander deterministically over a few samples so
	// telemetry of a simulated GPU is not a flat line; both stay idle-like
	// because nothing runs on a simulated GPU.
	d.GetTemperatureFunc = func(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
		if sensor != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		sd.samples++
		return m.idleTempC + sd.samples%4, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return m.idleMW + (sd.samples%5)*1_250, nvml.SUCCESS
	}
	reasons := func() (uint64, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return sd.reasons, nvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = reasons
	d.GetCurrentClocksThrottleReasonsFunc = reasons
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(mask uint64, es nvml.EventSet) nvml.Return {
		set, ok := es.(*simEventSet)
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		set.regs[i] |= mask
		return nvml.SUCCESS
	}
}

// fillHealth serves sd's memory health: row remapping, ECC counters,
// the recovery action field and the NVSwitch fabric state.
func (s *Simulated) fillHealth(sd *simDevice) {
	m, d := s.model, sd.Device
	// Ampere and Hopper replace page retirement by row remapping; NVML
	// reports the retired-pages queries as not supported there.
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return sd.remapCorr, sd.remapUnc, sd.remapPending, sd.remapFailed, nvml.SUCCESS
	}
	d.GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !m.fabric || sd.lost != nvml.SUCCESS {
			return nvml.GpuFabricInfo_v4{}, cmp.Or(sd.lost, nvml.ERROR_NOT_SUPPORTED)
		}
		return nvml.GpuFabricInfo_v4{State: sd.fabricState, Status: uint32(sd.fabricStatus)}, nvml.SUCCESS
	}
	d.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return sd.computeMode, nvml.SUCCESS
	}
	d.GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
		s.mu.Lock()
		defer s.mu.Unlock()
		for k := range fv {
			fv[k].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			if isSlowdownField(fv[k].FieldId) {
				fv[k].NvmlReturn, fv[k].ValueType = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(fv[k].Value[:], sd.slowdownNS[fv[k].FieldId])
			}
			if v, ok := sd.fieldValue(m, fv[k].FieldId); ok {
				fv[k].NvmlReturn, fv[k].ValueType = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(fv[k].Value[:], v)
			}
			if fv[k].FieldId == nvml.FI_DEV_GET_GPU_RECOVERY_ACTION && sd.recovery != nil {
				fv[k].NvmlReturn, fv[k].ValueType = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
				fv[k].Value = [8]byte{byte(*sd.recovery)}
			}
		}
		return nvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.VOLATILE_ECC:
			return sd.dbeVolatile, nvml.SUCCESS
		case t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.AGGREGATE_ECC:
			return sd.dbeAggregate, nvml.SUCCESS
		case t == nvml.MEMORY_ERROR_TYPE_CORRECTED:
			return sd.sbeVolatile, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
}

// fieldValue is sd's value of field id among those SetField sets and the
// defaults: the HBM temperature a few degrees above the core's idle one
// and zero NVLink error totals on a GPU with NVLink; s.mu is held.
func (sd *simDevice) fieldValue(m simModel, id uint32) (uint64, bool) {
	if v, ok := sd.fields[id]; ok {
		return v, true
	}
	switch id {
	case nvml.FI_DEV_MEMORY_TEMP:
		return uint64(m.idleTempC + 4 + sd.samples%3), true
	case nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL:
		return 0, m.nvlinks > 0
	}
	return 0, false
}

// fillLinks serves sd's NVLink states, temperature thresholds and
// utilization.
func (s *Simulated) fillLinks(sd *simDevice) {
	m, d := s.model, sd.Device
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case link < 0 || link >= m.nvlinks:
			return 0, nvml.ERROR_INVALID_ARGUMENT
		case sd.linksDown[link]:
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetTemperatureThresholdFunc = func(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
		switch t {
		case nvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
			return m.slowdownC, nvml.SUCCESS
		case nvml.TEMPERATURE_THRESHOLD_MEM_MAX:
			return m.memMaxC, nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return nvml.Utilization{Gpu: sd.util, Memory: sd.util / 2}, nvml.SUCCESS
	}
}

func toC(s string) []int8 {
	b := make([]int8, len(s))
	for i := range len(s) {
		b[i] = int8(s[i])
	}
	return b
}
