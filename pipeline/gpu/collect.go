package gpu

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/attest/hardware"
)

// FakeGPUEnv is the environment variable the CLI reads to serve simulated
// GPUs instead of the real ones (see Simulate).
const FakeGPUEnv = "GPUATTEST_FAKE_GPU"

// Option configures Collect.
type Option func(*options) error

type options struct {
	src    Source
	logger *slog.Logger
	root   string
	getenv func(string) (string, bool)
}

// WithSource reads devices from src (default: NVML("")).
func WithSource(src Source) Option {
	return func(o *options) error {
		if src == nil {
			return errors.New("gpu.WithSource: nil source")
		}
		o.src = src
		return nil
	}
}

// WithLogger sends diagnostics (unsupported metrics, fallbacks) to l.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler) // nil: discard, as everywhere
		}
		o.logger = l
		return nil
	}
}

// WithVisibleDevices honours CUDA_VISIBLE_DEVICES (and
// CUDA_DEVICE_ORDER) as getenv answers them (os.LookupEnv, or a run's
// base environment): when set, the record lists only the GPUs it leaves
// visible, with their machine-wide indices, and carries the value. A
// value that names a device the record cannot match (a MIG instance, an
// unknown UUID) keeps every GPU and is logged.
func WithVisibleDevices(getenv func(string) (string, bool)) Option {
	return func(o *options) error {
		o.getenv = getenv
		return nil
	}
}

// WithHostRoot reads host facts (/proc, /etc/os-release) under root
// instead of "/"; for tests.
func WithHostRoot(root string) Option {
	return func(o *options) error {
		o.root = root
		return nil
	}
}

// Collect reads the hardware record: host facts, driver versions and every
// GPU. With no usable GPU the record has empty GPUs and a Reason, and the
// error is nil: "no GPU" is a fact to record, not a failure. Errors are
// for bad options and a cancelled ctx.
func Collect(ctx context.Context, opts ...Option) (*hardware.Record, error) {
	o := options{logger: slog.New(slog.DiscardHandler), root: "/"}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.src == nil {
		o.src = NVML("")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec := &hardware.Record{
		Simulated: o.src.Simulated(),
		Host:      readHost(o.root, o.logger),
		GPUs:      []hardware.GPU{},
	}
	if err := collectGPUs(ctx, &o, rec); err != nil {
		return nil, err
	}
	if err := rec.Seal(); err != nil {
		return nil, err
	}
	return rec, nil
}

// restrictVisible keeps the GPUs CUDA_VISIBLE_DEVICES leaves visible, in
// NVML order.
func restrictVisible(rec *hardware.Record, getenv func(string) (string, bool), log *slog.Logger) {
	v, set := getenv(hardware.CUDAVisibleDevices)
	if !set {
		return
	}
	pos, err := rec.Visible(getenv)
	if err != nil {
		log.Warn("recording every GPU", "reason", err)
		return
	}
	slices.Sort(pos)
	keep := make([]hardware.GPU, 0, len(pos))
	for _, p := range pos {
		keep = append(keep, rec.GPUs[p])
	}
	rec.GPUs, rec.CUDAVisibleDevices = keep, &v
	if len(keep) == 0 {
		rec.Reason = "CUDA_VISIBLE_DEVICES=" + v + " leaves no GPU visible"
	}
}

// query logs metrics a device does not report and says whether ret is a
// success.
type query struct{ log *slog.Logger }

func ptr[T any](v T) *T { return &v }

// cString converts a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// readHost reads host facts under root; a fact it cannot read is left
// empty (and logged), never guessed.
func readHost(root string, log *slog.Logger) hardware.Host {
	var h hardware.Host
	if f, err := os.Open(filepath.Join(root, "proc/cpuinfo")); err == nil {
		h.CPUModel, h.CPUCores = parseCPUInfo(f)
		f.Close()
	} else {
		log.Debug("host cpu", "err", err)
	}
	if h.CPUCores == 0 && root == "/" {
		h.CPUCores = runtime.NumCPU()
	}
	if f, err := os.Open(filepath.Join(root, "proc/meminfo")); err == nil {
		h.MemoryBytes = parseMemTotal(f)
		f.Close()
	} else {
		log.Debug("host memory", "err", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/osrelease")); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	} else {
		log.Debug("host kernel", "err", err)
	}
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		if f, err := os.Open(filepath.Join(root, p)); err == nil {
			h.OS = parseOSRelease(f)
			f.Close()
			break
		}
	}
	return h
}

func parseCPUInfo(r io.Reader) (model string, cores int) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			cores++
		case "model name", "Model", "cpu model":
			if model == "" {
				model = strings.TrimSpace(v)
			}
		}
	}
	return model, cores
}

func parseMemTotal(r io.Reader) uint64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

func parseOSRelease(r io.Reader) string {
	var name string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch k {
		case "PRETTY_NAME":
			return v
		case "NAME":
			name = v
		}
	}
	return name
}
