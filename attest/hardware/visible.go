package hardware

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CUDAVisibleDevices is the environment variable that selects, and
// orders, the GPUs a CUDA process sees.
const CUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"

// ErrNotVisible matches the error of Visible when the variable's value
// names a device the record cannot be matched to (a MIG instance, an
// unknown UUID, an index past the record, a mixed machine CUDA may order
// differently from NVML).
var ErrNotVisible = errors.New("cuda-visible device not in the hardware record")

// Visible returns the positions in r.GPUs of the devices a CUDA process
// sees, in CUDA's order, given how getenv answers for CUDA_VISIBLE_DEVICES
// and CUDA_DEVICE_ORDER.
//
// Unset, every GPU is visible. Set, each comma-separated entry is an
// index (of the machine's GPUs, GPU.Index, whatever the record lists), a
// "GPU-" UUID or a unique prefix of one; as CUDA does, the list
// ends at the first entry that names no device. An empty list is an error
// (CUDA sees no device). An index counts in CUDA's enumeration order:
// CUDA_DEVICE_ORDER=PCI_BUS_ID is NVML's order; the default
// (FASTEST_FIRST) is the same only when every GPU is the same model, so
// on a mixed machine an index is an error matching ErrNotVisible. "MIG-"
// entries are errors matching ErrNotVisible: the record holds whole GPUs.
func (r *Record) Visible(getenv func(string) (string, bool)) ([]int, error) {
	v, set := getenv(CUDAVisibleDevices)
	if !set {
		all := make([]int, len(r.GPUs))
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	order, _ := getenv("CUDA_DEVICE_ORDER")
	var out []int
	seen := map[int]bool{}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		i, err := r.visibleEntry(e, order)
		if err != nil {
			if len(out) == 0 {
				return nil, fmt.Errorf("%s=%q: %w", CUDAVisibleDevices, v, err)
			}
			break // CUDA ignores the rest of the list
		}
		if seen[i] {
			break
		}
		seen[i] = true
		out = append(out, i)
	}
	return out, nil
}

// visibleEntry resolves one entry of CUDA_VISIBLE_DEVICES.
func (r *Record) visibleEntry(e, order string) (int, error) {
	switch {
	case e == "":
		return 0, fmt.Errorf("no device listed (CUDA sees none)\nhint: unset it to see every GPU, or list indices or GPU UUIDs")
	case strings.HasPrefix(e, "MIG-"):
		return 0, fmt.Errorf("%w: %s is a MIG instance; the record lists whole GPUs", ErrNotVisible, e)
	case strings.HasPrefix(e, "GPU-"):
		found := -1
		for i, g := range r.GPUs {
			if strings.HasPrefix(g.UUID, e) {
				if found >= 0 {
					return 0, fmt.Errorf("%w: %s is a prefix of more than one GPU's UUID", ErrNotVisible, e)
				}
				found = i
			}
		}
		if found < 0 {
			return 0, fmt.Errorf("%w: no GPU has UUID %s", ErrNotVisible, e)
		}
		return found, nil
	}
	n, err := strconv.Atoi(e)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %q is neither an index nor a GPU UUID", ErrNotVisible, e)
	}
	if order != "PCI_BUS_ID" && !r.sameModel() {
		return 0, fmt.Errorf("%w: index %d on a machine with different GPU models: CUDA orders them fastest first, NVML by PCI bus\nhint: set CUDA_DEVICE_ORDER=PCI_BUS_ID or name the GPU by UUID", ErrNotVisible, n)
	}
	for i, g := range r.GPUs {
		if g.Index == n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: the record has no GPU %d (its GPUs: %s)", ErrNotVisible, n, r.indices())
}

// indices lists the record's GPU indices for messages.
func (r *Record) indices() string {
	var s []string
	for _, g := range r.GPUs {
		s = append(s, strconv.Itoa(g.Index))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// sameModel reports whether every GPU that could be opened has the same
// name (an unopenable one is assumed to be of the same model: NVML lists
// it, and the driver enumerates it the same way).
func (r *Record) sameModel() bool {
	name := ""
	for _, g := range r.GPUs {
		switch {
		case g.Error != "":
		case name == "":
			name = g.Name
		case g.Name != name:
			return false
		}
	}
	return true
}
