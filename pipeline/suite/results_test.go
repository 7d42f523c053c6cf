package suite

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadResultsJSON(t *testing.T) {
	t.Parallel()
	r, err := ReadResults("testdata/good.json")
	if err != nil {
		t.Fatal(err)
	}
	if r.Format != FormatGpuattest || r.Backend != "cpu" || len(r.Cases) != 2 {
		t.Fatalf("read %+v", r)
	}
	if diff := cmp.Diff([]float64{1234, 1201, 1210}, r.Cases[0].SamplesNS); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Counts{Total: 2, Passed: 1, Skipped: 1}, r.Count()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

func TestReadResultsJUnit(t *testing.T) {
	t.Parallel()
	type c struct{ Name, Status, Message string }
	tests := []struct {
		file string
		want []c
	}{
		{"testdata/pytest.xml", []c{
			{"tests.test_kernels.test_vector_add[1024]", "passed", ""},
			{"tests.test_kernels.test_matmul", "failed", "AssertionError: max abs error 0.5 > 1e-06"},
			{"tests.test_kernels.test_fp8", "skipped", "needs sm_90"},
			{"tests.test_kernels.test_setup", "error", `failed on setup with "RuntimeError: no device"`},
		}},
		{"testdata/ctest.xml", []c{
			{"harness_cpu", "passed", ""},
			{"harness_tolerance", "failed", "Failed"},
			{"harness_cuda", "skipped", "Disabled"},
		}},
		{"testdata/gotestsum.xml", []c{
			{"example.com/kern.TestAdd", "passed", ""},
			{"example.com/kern.TestScale", "failed", "Failed"},
			{"example.com/kern.TestGPU", "skipped", "=== RUN   TestGPU\n    kern_test.go:20: no GPU\n--- SKIP: TestGPU (0.00s)"},
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			r, err := ReadResults(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			var got []c
			for _, k := range r.Cases {
				got = append(got, c{k.Name, k.Status, k.Message})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cases (-want +got):\n%s", diff)
			}
			if r.Format != FormatJUnit {
				t.Errorf("format %q", r.Format)
			}
		})
	}
}

func TestReadResultsErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const head = `{"schema": "https://gpuattest.dev/results/v1", "tool": "t", "backend": "cpu", "cases": [`
	tests := []struct {
		name    string
		path    string
		format  string
		wantErr []string
	}{
		{"missing", filepath.Join(dir, "nope.json"), "", []string{"does not exist", "hint:"}},
		{"empty", write("empty.json", "  \n"), "", []string{"empty results file"}},
		{"syntax", write("syntax.json", "{\n  \"schema\": \"x\",\n  \"tool\" \"t\"\n}"), "", []string{"syntax.json:3:10:", "expected ':' after the object key"}},
		{"wrong type", write("type.json", head+`{"name": "a", "status": "passed", "samples_ns": "fast"}]}`), "", []string{"cases[0].samples_ns: expected an array, got a string"}},
		{"bad status", write("status.json", head+`{"name": "a", "status": "ok"}]}`), "", []string{"cases[0].status: \"ok\": expected passed, failed, skipped or error"}},
		{"unknown field", write("unknown.json", head+`{"name": "a", "status": "passed", "sampels_ns": [1]}]}`), "", []string{"cases[0]: unknown field \"sampels_ns\""}},
		{"wrong schema id", write("id.json", `{"schema": "v0", "tool": "t", "backend": "cpu", "cases": []}`), "", []string{`schema: "v0": expected https://gpuattest.dev/results/v1`}},
		{"missing backend", write("nobackend.json", `{"schema": "https://gpuattest.dev/results/v1", "tool": "t", "cases": []}`), "", []string{"backend"}},
		{"duplicate case", write("dup.json", head+`{"name": "a", "status": "passed"}, {"name": "a", "status": "passed"}]}`), "", []string{`cases[1].name: "a" repeats cases[0]`}},
		{"zero sample", write("zero.json", head+`{"name": "a", "status": "passed", "samples_ns": [3, 0]}]}`), "", []string{"cases[0].samples_ns[1]: 0 is not a positive duration"}},
		{"xml root", write("html.xml", "<html><body/></html>"), "", []string{"html.xml:1:", "root element <html>", "testsuites"}},
		{"xml syntax", write("broken.xml", "<testsuites>\n<testsuite>\n<testcase name='a'>\n</testsuites>"), "", []string{"broken.xml:4:"}},
		{"xml no name", write("noname.xml", "<testsuite><testcase classname='x'/></testsuite>"), "", []string{"testcase 1 has no name"}},
		{"bad format", write("f.json", "{}"), "yaml", []string{`format "yaml"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadResultsFormat(tt.path, tt.format)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestWriteJUnitRoundTrip(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	cases := []JUnitCase{
		{Name: "a", Classname: "bench", Seconds: 0.5, Status: StatusPassed},
		{Name: "b", Classname: "bench", Status: StatusFailed, Message: "SLOWER by 10%", Output: "details"},
		{Name: "c", Classname: "bench", Status: StatusSkipped, Message: "no samples"},
		{Name: "d", Classname: "bench", Status: StatusError, Message: "crashed"},
	}
	if err := WriteJUnit(&b, "gpuattest", cases); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadResults(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Counts{Total: 4, Passed: 1, Failed: 1, Skipped: 1, Errored: 1}, r.Count()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if r.Cases[1].Name != "bench.b" || r.Cases[1].Message != "SLOWER by 10%" {
		t.Errorf("case %+v", r.Cases[1])
	}
}
