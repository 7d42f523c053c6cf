package coverage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const lcovInfo = `TN:
SF:src/a.c
FN:1,main
DA:1,1
DA:2,0
DA:3,4
BRDA:2,0,0,1
BRDA:2,0,1,-
LF:3
LH:2
BRF:2
BRH:1
end_of_record
SF:src/b.c
DA:1,1
DA:2,1
end_of_record
`

const coberturaXML = `<?xml version="1.0" ?>
<coverage line-rate="0.8" branch-rate="0.5" lines-covered="8" lines-valid="10" branches-covered="2" branches-valid="4" version="7.4" timestamp="1">
  <packages><package name="p"><classes><class name="m.py" filename="m.py"><lines>
    <line number="1" hits="1"/>
  </lines></class></classes></package></packages>
</coverage>
`

const goProfile = `mode: atomic
example.com/m/a.go:3.14,5.2 2 1
example.com/m/a.go:7.14,9.2 3 0
example.com/m/b.go:3.14,5.2 5 0
example.com/m/b.go:3.14,5.2 5 2
`

func TestParse(t *testing.T) {
	t.Parallel()
	half := 0.5
	tests := []struct {
		name string
		data string
		want Totals
	}{
		{"lcov", lcovInfo, Totals{Format: FormatLcov, LinesFound: 5, LinesHit: 4, Lines: 0.8, BranchesFound: 2, BranchesHit: 1, Branches: &half}},
		{"cobertura", coberturaXML, Totals{Format: FormatCobertura, LinesFound: 10, LinesHit: 8, Lines: 0.8, BranchesFound: 4, BranchesHit: 2, Branches: &half}},
		{"cobertura counted from lines", `<coverage><packages><package><classes><class><lines><line number="1" hits="0"/><line number="2" hits="3"/></lines></class></classes></package></packages></coverage>`,
			Totals{Format: FormatCobertura, LinesFound: 2, LinesHit: 1, Lines: 0.5}},
		{"go coverprofile, a block listed twice counted once", goProfile, Totals{Format: FormatGo, LinesFound: 10, LinesHit: 7, Lines: 0.7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse("cov", []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tt.want.Format || got.LinesFound != tt.want.LinesFound || got.LinesHit != tt.want.LinesHit ||
				got.Lines != tt.want.Lines || got.BranchesFound != tt.want.BranchesFound || got.BranchesHit != tt.want.BranchesHit ||
				(got.Branches == nil) != (tt.want.Branches == nil) || (got.Branches != nil && *got.Branches != *tt.want.Branches) {
				t.Fatalf("Parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("<a>", MaxDepth+5) + strings.Repeat("</a>", MaxDepth+5)
	bomb := `<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<coverage lines-valid="1" lines-covered="1">&lol2;</coverage>`
	tests := []struct {
		name, data, want string
	}{
		{"lcov bad count", "SF:a\nDA:1,x\nend_of_record\n", "cov:2: \"x\": expected a count"},
		{"lcov truncated", "SF:a\nDA:1,1\n", "no end_of_record"},
		{"lcov not lcov", "hello world\n", `cov:1:1: "hello world": not an lcov line`},
		{"lcov more hit than found", "SF:a\nLF:1\nLH:2\nend_of_record\n", "cov:4: the record counts more"},
		{"go bad mode", "mode: fast\n", `cov:1:7: mode "fast"`},
		{"go bad line", "mode: set\na.go:1.1,2.2 x 1\n", "cov:2: "},
		{"xml deep nesting", "<coverage>" + deep + "</coverage>", "nested deeper than 32"},
		{"xml entity bomb", bomb, "cov:2:"},
		{"xml malformed", "<coverage lines-valid=\"1\" lines-covered=\"1\"><x></coverage>", "cov:1: malformed XML"},
		{"xml wrong root", "<report/>", "root element <report>: expected <coverage>"},
		{"xml bad count", `<coverage lines-valid="-1" lines-covered="0"/>`, `lines-valid="-1": expected a count`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("cov", []byte(tt.data))
			var ce *Error
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want a positioned error containing %q", err, tt.want)
			}
		})
	}
}

// TestReadFileBounds: a report over MaxBytes is refused without being
// parsed; a long line is a positioned problem.
func TestReadFileBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := filepath.Join(dir, "big.info")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadFile(big, "big.info"); err == nil || !strings.Contains(err.Error(), "big.info: larger than") {
		t.Fatalf("ReadFile(huge) = %v", err)
	}
	long := filepath.Join(dir, "long.info")
	if err := os.WriteFile(long, []byte("SF:"+strings.Repeat("a", maxLine+1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(long, "long.info"); err == nil || !strings.Contains(err.Error(), "long.info:1: a line longer than") {
		t.Fatalf("ReadFile(long line) = %v", err)
	}
}

// FuzzParse: any bytes give totals or an error, never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{lcovInfo, coberturaXML, goProfile} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if tot, err := Parse("f", data); err == nil && (tot.Lines < 0 || tot.Lines > 1) {
			t.Fatalf("lines ratio %v out of [0, 1]", tot.Lines)
		}
	})
}
