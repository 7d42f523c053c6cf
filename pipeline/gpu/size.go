package gpu

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "kib": 1 << 10, "ki": 1 << 10,
	"m": 1e6, "mb": 1e6, "mib": 1 << 20, "mi": 1 << 20,
	"g": 1e9, "gb": 1e9, "gib": 1 << 30, "gi": 1 << 30,
	"t": 1e12, "tb": 1e12, "tib": 1 << 40, "ti": 1 << 40,
}

// ParseSize parses a byte size such as "8GiB", "512MiB", "1.5GiB", "8GB"
// (decimal) or "1048576". Units are case-insensitive; KiB/MiB/GiB/TiB are
// powers of 1024, kB/MB/GB/TB powers of 1000.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult, ok := sizeUnits[unit]
	v, err := strconv.ParseFloat(num, 64)
	if num == "" || err != nil || !ok || v < 0 {
		return 0, fmt.Errorf("size %q: expected a number with an optional unit, such as 8GiB, 512MiB or 2GB", s)
	}
	b := v * mult
	if b >= math.MaxUint64 || math.IsInf(b, 0) {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return uint64(math.Round(b)), nil
}

// FormatSize renders n bytes with a binary unit and at most two decimals,
// rounded down so a size just short of a limit never prints as the limit:
// "80 GiB", "39.99 GiB".
func FormatSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, exp := float64(n), 0
	for v >= unit && exp < 4 {
		v /= unit
		exp++
	}
	s := strconv.FormatFloat(math.Floor(v*100)/100, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " " + []string{"B", "KiB", "MiB", "GiB", "TiB"}[exp]
}
