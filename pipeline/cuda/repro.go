package cuda

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// ReproReport is the outcome of a reproducibility check: every output of
// two builds of the same inputs in different directories, compared byte
// for byte.
type ReproReport struct {
	// Reproducible is true when every output is identical.
	Reproducible bool `json:"reproducible"`
	// FirstDir and SecondDir are the directories of the two builds.
	FirstDir  string `json:"first_dir"`
	SecondDir string `json:"second_dir"`
	// Identical lists the outputs that matched.
	Identical []string `json:"identical"`
	// Differing explains each output that did not.
	Differing []*FileDiff `json:"differing"`
}

// FileDiff explains how two builds of one output differ.
type FileDiff struct {
	// Path is the output, relative to its build directory.
	Path string `json:"path"`
	// Identical is true when the bytes match.
	Identical bool `json:"identical"`
	// SHA256 and Size of the first and second build's file.
	FirstSHA256  string `json:"first_sha256"`
	SecondSHA256 string `json:"second_sha256"`
	FirstSize    int64  `json:"first_size"`
	SecondSize   int64  `json:"second_size"`
	// FirstDifference is the offset of the first differing byte, -1 when
	// identical.
	FirstDifference int64 `json:"first_difference"`
	// Sections lists the ELF sections whose contents differ (both files
	// ELF), by name.
	Sections []SectionDiff `json:"sections,omitempty"`
	// OnlyInFirst and OnlyInSecond are printable strings (at least
	// MinStringLen characters) found in one file but not the other,
	// sorted, at most MaxStrings each.
	OnlyInFirst  []string `json:"only_in_first,omitempty"`
	OnlyInSecond []string `json:"only_in_second,omitempty"`
	// Note is set when the files could not be compared as ELF.
	Note string `json:"note,omitempty"`
}

// SectionDiff is one ELF section whose contents differ between builds.
type SectionDiff struct {
	// Name is the section name (e.g. .nv_fatbin, .rodata).
	Name string `json:"name"`
	// Change is "differs", "only in first" or "only in second".
	Change string `json:"change"`
	// FirstSize and SecondSize are the section sizes in bytes.
	FirstSize  uint64 `json:"first_size"`
	SecondSize uint64 `json:"second_size"`
	// FirstSHA256 and SecondSHA256 digest the section contents.
	FirstSHA256  string `json:"first_sha256,omitempty"`
	SecondSHA256 string `json:"second_sha256,omitempty"`
}

// CompareBuilds compares the outputs (relative paths) of a build in first
// with those of a build of the same inputs in second.
func CompareBuilds(first, second string, outputs []string) (*ReproReport, error) {
	rep := &ReproReport{Reproducible: true, FirstDir: first, SecondDir: second, Identical: []string{}, Differing: []*FileDiff{}}
	for _, o := range outputs {
		d, err := CompareFiles(filepath.Join(first, filepath.FromSlash(o)), filepath.Join(second, filepath.FromSlash(o)))
		if err != nil {
			return nil, err
		}
		d.Path = o
		if d.Identical {
			rep.Identical = append(rep.Identical, o)
			continue
		}
		rep.Reproducible = false
		rep.Differing = append(rep.Differing, d)
	}
	return rep, nil
}

// MinStringLen is the shortest printable run CompareFiles reports.
const MinStringLen = 6

// MaxStrings caps the strings CompareFiles lists per side.
const MaxStrings = 50

// CompareFiles compares the output first with second. When they differ it
// finds the first differing offset, the differing ELF sections (when both
// are ELF files) and the printable strings present in only one of them.
// The returned diff's Path is first as given; callers set a relative path.
func CompareFiles(first, second string) (*FileDiff, error) {
	a, err := os.ReadFile(first)
	if err != nil {
		return nil, fmt.Errorf("comparing builds: %w", err)
	}
	b, err := os.ReadFile(second)
	if err != nil {
		return nil, fmt.Errorf("comparing builds: %w", err)
	}
	return compareBytes(first, a, b), nil
}

func compareBytes(name string, a, b []byte) *FileDiff {
	d := &FileDiff{Path: name, FirstSHA256: sum(a), SecondSHA256: sum(b), FirstSize: int64(len(a)), SecondSize: int64(len(b)), FirstDifference: -1}
	if bytes.Equal(a, b) {
		d.Identical = true
		return d
	}
	n := min(len(a), len(b))
	d.FirstDifference = int64(n)
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			d.FirstDifference = int64(i)
			break
		}
	}
	if isELF(a) && isELF(b) {
		secs, err := diffSections(a, b)
		if err != nil {
			d.Note = "not compared by ELF section: " + err.Error()
		}
		d.Sections = secs
	} else {
		d.Note = "not ELF: compared as bytes and strings"
	}
	d.OnlyInFirst, d.OnlyInSecond = diffStrings(a, b)
	return d
}

func diffSections(a, b []byte) ([]SectionDiff, error) {
	fa, err := openELF(a)
	if err != nil {
		return nil, fmt.Errorf("first: %w", err)
	}
	fb, err := openELF(b)
	if err != nil {
		return nil, fmt.Errorf("second: %w", err)
	}
	type sec struct {
		size uint64
		sum  string
	}
	read := func(f *elf.File) (map[string]sec, []string) {
		m := map[string]sec{}
		var order []string
		for _, s := range f.Sections {
			if s.Name == "" {
				continue
			}
			var digest string
			if s.Type != elf.SHT_NOBITS {
				data, err := s.Data()
				if err != nil {
					digest = "unreadable: " + err.Error()
				} else {
					digest = sum(data)
				}
			}
			name := s.Name
			for i := 2; ; i++ { // repeated names (several .text.x) stay distinct
				if _, dup := m[name]; !dup {
					break
				}
				name = fmt.Sprintf("%s#%d", s.Name, i)
			}
			m[name] = sec{size: s.Size, sum: digest}
			order = append(order, name)
		}
		return m, order
	}
	ma, oa := read(fa)
	mb, ob := read(fb)
	var out []SectionDiff
	for _, n := range oa {
		x := ma[n]
		y, ok := mb[n]
		switch {
		case !ok:
			out = append(out, SectionDiff{Name: n, Change: "only in first", FirstSize: x.size, FirstSHA256: x.sum})
		case x != y:
			out = append(out, SectionDiff{Name: n, Change: "differs", FirstSize: x.size, SecondSize: y.size, FirstSHA256: x.sum, SecondSHA256: y.sum})
		}
	}
	for _, n := range ob {
		if _, ok := ma[n]; !ok {
			y := mb[n]
			out = append(out, SectionDiff{Name: n, Change: "only in second", SecondSize: y.size, SecondSHA256: y.sum})
		}
	}
	return out, nil
}

// printableRuns returns the set of runs of printable ASCII at least
// MinStringLen long, as strings(1) would find them.
func printableRuns(b []byte) map[string]bool {
	m := map[string]bool{}
	start := -1
	for i := 0; i <= len(b); i++ {
		if i < len(b) && (b[i] >= 0x20 && b[i] < 0x7f || b[i] == '\t') {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start >= MinStringLen {
			m[string(b[start:i])] = true
		}
		start = -1
	}
	return m
}

func diffStrings(a, b []byte) (onlyA, onlyB []string) {
	sa, sb := printableRuns(a), printableRuns(b)
	for s := range sa {
		if !sb[s] {
			onlyA = append(onlyA, s)
		}
	}
	for s := range sb {
		if !sa[s] {
			onlyB = append(onlyB, s)
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	if len(onlyA) > MaxStrings {
		onlyA = onlyA[:MaxStrings]
	}
	if len(onlyB) > MaxStrings {
		onlyB = onlyB[:MaxStrings]
	}
	return onlyA, onlyB
}

// Summary renders d in one line per fact, for logs and text reports.
func (d *FileDiff) Summary() string {
	if d.Identical {
		return fmt.Sprintf("%s: identical (sha256 %s)", d.Path, d.FirstSHA256)
	}
	var bb bytes.Buffer
	fmt.Fprintf(&bb, "%s: differs (sha256 %s vs %s, first difference at byte %d)", d.Path, short(d.FirstSHA256), short(d.SecondSHA256), d.FirstDifference)
	for _, s := range d.Sections {
		fmt.Fprintf(&bb, "\n  section %s %s", s.Name, s.Change)
	}
	for _, s := range d.OnlyInFirst {
		fmt.Fprintf(&bb, "\n  only in first:  %q", s)
	}
	for _, s := range d.OnlyInSecond {
		fmt.Fprintf(&bb, "\n  only in second: %q", s)
	}
	if d.Note != "" {
		fmt.Fprintf(&bb, "\n  note: %s", d.Note)
	}
	return bb.String()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Summary renders the report for logs and text output: one line per
// identical output, a block per differing one.
func (r *ReproReport) Summary() string {
	var b bytes.Buffer
	if r.Reproducible {
		fmt.Fprintf(&b, "reproducible: %d outputs identical across two builds", len(r.Identical))
	} else {
		fmt.Fprintf(&b, "NOT reproducible: %d of %d outputs differ between two builds", len(r.Differing), len(r.Differing)+len(r.Identical))
	}
	for _, p := range r.Identical {
		fmt.Fprintf(&b, "\n%s: identical", p)
	}
	for _, d := range r.Differing {
		b.WriteString("\n")
		b.WriteString(d.Summary())
	}
	return b.String()
}
