package report_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/gpuattest/gpuattest/internal/reportfixture"
	"github.com/gpuattest/gpuattest/pipeline/report"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
)

// Read a run directory and write its HTML report and Markdown summary.
func Example() {
	dir, _ := os.MkdirTemp("", "run-")
	defer os.RemoveAll(dir)
	if err := reportfixture.Write(dir, reportfixture.Options{}); err != nil {
		panic(err)
	}
	run, err := rundir.Open(dir)
	if err != nil {
		panic(err)
	}
	rep, err := report.FromRun(run)
	if err != nil {
		panic(err)
	}
	var page, summary bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		panic(err)
	}
	if err := rep.WriteMarkdown(&summary, report.WithHTMLPath("report.html")); err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(page.String(), "<!DOCTYPE html>"), page.Len() < 2<<20)
	fmt.Println(strings.SplitN(summary.String(), "\n", 2)[0])
	// Output:
	// true true
	// ## ❌ gpuattest release: FAILED
}
