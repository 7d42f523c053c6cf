package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// metaschemasAtInit is how many JSON Schema drafts had their metaschemas
// compiled once every package gpuattest links was initialised: a package
// variable of package main is set after all its dependencies' init.
var metaschemasAtInit = sjs.MetaschemaCompiles()

// TestNoSchemaCompiledAtInit keeps schema compilation out of start-up
// (issue 13 item 15): upstream santhosh-tekuri/jsonschema compiles the
// metaschemas of five drafts in its init, on every gpuattest start, so
// go.mod replaces it with third_party/jsonschema, which compiles a draft's
// metaschemas when a schema of that draft is first compiled; gpuattest's
// own schemas are compiled in sync.OnceValues on first use.
func TestNoSchemaCompiledAtInit(t *testing.T) {
	if metaschemasAtInit != 0 {
		t.Errorf("%d JSON Schema drafts compiled during package init, want 0\nhint: compile schemas on first use (sync.OnceValues), and keep go.mod's replace of santhosh-tekuri/jsonschema/v6 by third_party/jsonschema", metaschemasAtInit)
	}
}

// maxInitAllocs bounds the allocations of any one package's init. Before
// issue 13 item 15, santhosh-tekuri/jsonschema's made about 21,000 and
// asaskevich/govalidator's (through Rekor) about 6,200; the largest left
// is about 1,000 (go-openapi/strfmt).
const maxInitAllocs = 2000

// TestInitAllocations runs this test binary again with
// GODEBUG=inittrace=1, which prints every package init's allocations
// (counts, not times: they do not depend on the machine), and fails on a
// package whose init allocates more than maxInitAllocs: work that belongs
// in a sync.OnceValue, paid by every gpuattest start.
func TestInitAllocations(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("running the test binary: %v\n%s", err, stderr.Bytes())
	}
	n := 0
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init PKG @0.5 ms, 0.1 ms clock, 9216 bytes, 3 allocs
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != "init" || f[len(f)-1] != "allocs" {
			continue
		}
		n++
		allocs, err := strconv.Atoi(f[len(f)-2])
		if err != nil {
			t.Fatalf("unexpected inittrace line %q", sc.Text())
		}
		if allocs > maxInitAllocs {
			t.Errorf("package %s allocates %d objects in its init, want at most %d\nhint: compile or build it on first use (sync.OnceValue); for a dependency, see third_party/", f[1], allocs, maxInitAllocs)
		}
	}
	if n < 100 {
		t.Fatalf("read %d init lines from GODEBUG=inittrace=1, want the hundreds gpuattest links:\n%s", n, stderr.Bytes())
	}
}
