package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The spec's typed scalars (Size, Percent, Duration) are parsed once, when
// the pipeline is decoded, with the position of a bad value; executors use
// the parsed value and never parse again. Each keeps the text the pipeline
// gave, which is what it marshals back to.

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
		return 0, fmt.Errorf("invalid size %q: expected a number with an optional unit, such as 8GiB, 512MiB or 2GB", s)
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

// ParsePercent parses "3%" (or "0.03") into a fraction.
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	div := 1.0
	if strings.HasSuffix(t, "%") {
		t, div = strings.TrimSuffix(t, "%"), 100
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid percentage %q: expected a number such as 3%% or 0.03", s)
	}
	return v / div, nil
}

// Size is a byte size as a pipeline writes it ("8GiB", "512MiB", 4096).
type Size struct {
	// Bytes is the size.
	Bytes uint64
	text  string
}

// NewSize parses text (see ParseSize).
func NewSize(text string) (Size, error) {
	b, err := ParseSize(text)
	return Size{Bytes: b, text: strings.TrimSpace(text)}, err
}

// MustSize is NewSize for constants and tests; it panics on bad input.
func MustSize(text string) Size { return must(NewSize(text)) }

// IsZero reports whether the size was left out.
func (s Size) IsZero() bool { return s.text == "" && s.Bytes == 0 }

// String returns the size as the pipeline wrote it.
func (s Size) String() string {
	if s.text == "" && s.Bytes > 0 {
		return FormatSize(s.Bytes)
	}
	return s.text
}

// UnmarshalYAML parses a size string or a byte count.
func (s *Size) UnmarshalYAML(unmarshal func(any) error) error {
	return unmarshalText(unmarshal, s, NewSize)
}

// MarshalJSON writes the size as the pipeline wrote it.
func (s Size) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON parses a size string or a byte count.
func (s *Size) UnmarshalJSON(b []byte) error { return unmarshalJSONText(b, s, NewSize) }

// Percent is a fraction as a pipeline writes it ("3%" or 0.03).
type Percent struct {
	// Fraction is the value: 0.03 for 3%.
	Fraction float64
	text     string
}

// NewPercent parses text (see ParsePercent).
func NewPercent(text string) (Percent, error) {
	f, err := ParsePercent(text)
	return Percent{Fraction: f, text: strings.TrimSpace(text)}, err
}

// MustPercent is NewPercent for constants and tests; it panics on bad
// input.
func MustPercent(text string) Percent { return must(NewPercent(text)) }

// IsZero reports whether the percentage was left out.
func (p Percent) IsZero() bool { return p.text == "" && p.Fraction == 0 }

// String returns the percentage as the pipeline wrote it.
func (p Percent) String() string {
	if p.text == "" && p.Fraction != 0 {
		return strconv.FormatFloat(100*p.Fraction, 'g', -1, 64) + "%"
	}
	return p.text
}

// UnmarshalYAML parses "3%" or 0.03.
func (p *Percent) UnmarshalYAML(unmarshal func(any) error) error {
	return unmarshalText(unmarshal, p, NewPercent)
}

// MarshalJSON writes the percentage as the pipeline wrote it.
func (p Percent) MarshalJSON() ([]byte, error) { return json.Marshal(p.String()) }

// UnmarshalJSON parses "3%" or 0.03.
func (p *Percent) UnmarshalJSON(b []byte) error { return unmarshalJSONText(b, p, NewPercent) }

// Duration is a duration as a pipeline writes it ("90s", "1h30m").
type Duration struct {
	// D is the duration.
	D    time.Duration
	text string
}

// NewDuration parses text, a Go duration such as 90s, 10m or 1h30m.
func NewDuration(text string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(text))
	if err != nil {
		return Duration{text: text}, fmt.Errorf("unparsable duration %q", text)
	}
	return Duration{D: d, text: strings.TrimSpace(text)}, nil
}

// MustDuration is NewDuration for constants and tests; it panics on bad
// input.
func MustDuration(text string) Duration { return must(NewDuration(text)) }

// Value returns the duration (zero when left out).
func (d Duration) Value() time.Duration { return d.D }

// IsZero reports whether the duration was left out.
func (d Duration) IsZero() bool { return d.text == "" && d.D == 0 }

// String returns the duration as the pipeline wrote it.
func (d Duration) String() string {
	if d.text == "" && d.D != 0 {
		return d.D.String()
	}
	return d.text
}

// UnmarshalYAML parses a duration string.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	return unmarshalText(unmarshal, d, NewDuration)
}

// MarshalJSON writes the duration as the pipeline wrote it.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON parses a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error { return unmarshalJSONText(b, d, NewDuration) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// unmarshalText decodes a YAML scalar as text and parses it into dst.
func unmarshalText[T any](unmarshal func(any) error, dst *T, parse func(string) (T, error)) error {
	var text string
	if err := unmarshal(&text); err != nil {
		var n float64
		if err := unmarshal(&n); err != nil {
			return err
		}
		text = strconv.FormatFloat(n, 'f', -1, 64)
	}
	v, err := parse(text)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// unmarshalJSONText decodes a JSON string or number and parses it into
// dst.
func unmarshalJSONText[T any](b []byte, dst *T, parse func(string) (T, error)) error {
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		text = n.String()
	}
	v, err := parse(text)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}
