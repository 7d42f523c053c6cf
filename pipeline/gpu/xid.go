package gpu

import (
	"fmt"
	"slices"
)

// fatalXids are the Xid codes that fail a GPU step whatever its results
// say: they report memory corruption, a lost or hung GPU, or interconnect
// errors (NVIDIA's Xid catalog):
//
//	32  invalid or corrupted push buffer stream (a PCIe or
//	    memory-interface fault as often as a driver one)
//	38  driver firmware error
//	48  double-bit ECC error
//	61  internal micro-controller breakpoint/warning
//	62  internal micro-controller halt
//	63  ECC page retirement or row remapping recording event
//	64  ECC page retirement or row remapper recording failure
//	74  NVLink error
//	79  GPU has fallen off the bus
//	92  high single-bit ECC error rate
//	94  contained ECC error
//	95  uncontained ECC error
//	109 context switch timeout
//	119 GSP RPC timeout
//	120 GSP error
//	140 unrecovered ECC error
//	144 NVLink SAW error        (NVLINK_SAW_ERROR)
//	145 NVLink RLW error        (NVLINK_RLW_ERROR)
//	146 NVLink TLW error        (NVLINK_TLW_ERROR)
//	147 NVLink TREX error       (NVLINK_TREX_ERROR)
//	148 NVLink NVLPW_CTRL error (NVLINK_NVLPW_CTRL_ERROR)
//	149 NVLink NETIR error      (NVLINK_NETIR_ERROR)
//	150 NVLink MSE error        (NVLINK_MSE_ERROR)
//	154 GPU recovery action changed (the driver asks for a reset, a
//	    drain or a reboot; telemetry reads the action)
//
// Other Xids (13, 31, 43, 45: usually the application's own fault) are
// recorded and reported but do not fail the step on their own.
var fatalXids = map[uint64]string{
	32:  "invalid or corrupted push buffer stream",
	38:  "driver firmware error",
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint/warning",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recording event",
	64:  "ECC page retirement or row remapper recording failure",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	109: "context switch timeout",
	119: "GSP RPC timeout",
	120: "GSP error",
	140: "unrecovered ECC error",
	// The NVLink errors of the R555+ drivers (NVLink 4 and 5: NVSwitch
	// systems of Hopper and later), which split what Xid 74 reported.
	144: "NVLink SAW error (NVLINK_SAW_ERROR)",
	145: "NVLink RLW error (NVLINK_RLW_ERROR)",
	146: "NVLink TLW error (NVLINK_TLW_ERROR)",
	147: "NVLink TREX error (NVLINK_TREX_ERROR)",
	148: "NVLink NVLPW_CTRL error (NVLINK_NVLPW_CTRL_ERROR)",
	149: "NVLink NETIR error (NVLINK_NETIR_ERROR)",
	150: "NVLink MSE error (NVLINK_MSE_ERROR)",
	154: "GPU recovery action changed (reset, drain or reboot required)",
}

var otherXids = map[uint64]string{
	13: "graphics engine exception (usually an application error)",
	31: "GPU memory page fault (usually an application error)",
	43: "GPU stopped processing (usually an application error)",
	45: "preemptive cleanup, due to previous errors",
	68: "video processor exception",
	69: "graphics engine class error",
}

// FatalXids returns the Xid codes that fail a step, in ascending order.
func FatalXids() []uint64 {
	out := make([]uint64, 0, len(fatalXids))
	for x := range fatalXids {
		out = append(out, x)
	}
	slices.Sort(out)
	return out
}

// XidFatal reports whether Xid x fails a GPU step.
func XidFatal(x uint64) bool { _, ok := fatalXids[x]; return ok }

// XidDescription returns what Xid x means, or "Xid x" for codes not in
// the table.
func XidDescription(x uint64) string {
	if d, ok := fatalXids[x]; ok {
		return d
	}
	if d, ok := otherXids[x]; ok {
		return d
	}
	return fmt.Sprintf("Xid %d", x)
}
