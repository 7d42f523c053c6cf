package suite

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/gpuattest/gpuattest/pipeline/coverage"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// CoverageFile is one coverage report a test step named (coverage:),
// with its totals.
type CoverageFile struct {
	// File is the report as the step names it; Copy is its copy in the
	// run directory (steps/<id>/coverage-<n><ext>), the file hashed
	// into the claim.
	File string `json:"file"`
	Copy string `json:"copy"`
	// SHA256 is the hex sha256 of its bytes.
	SHA256 string `json:"sha256"`
	coverage.Totals
}

// coverageFiles are the step's coverage reports.
func coverageFiles(s *step.Context) ([]*rootedFile, error) {
	var out []*rootedFile
	for i, c := range s.Step.Coverage {
		f, err := namedResultsFile(s, fmt.Sprintf("coverage[%d]", i), c)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// readCoverage reads each coverage report after the step's command ran,
// copies it into the step directory and records it with out.Results.
// A missing, unreadable or malformed report fails the step: its reason
// says which file and where.
func readCoverage(s *step.Context, files []*rootedFile, out *step.Outcome) ([]CoverageFile, string, error) {
	var got []CoverageFile
	for i, f := range files {
		b, err := f.read()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Sprintf("coverage file %s does not exist\nhint: the step's command must write it (coverage: names it, relative to the step's workdir)", f.name), nil
			}
			return nil, fmt.Sprintf("coverage file %s: %v", f.name, err), nil
		}
		t, err := coverage.Parse(f.name, b)
		if err != nil {
			return nil, "coverage: " + err.Error(), nil
		}
		cp, err := writeBytesToStep(s, fmt.Sprintf("coverage-%d%s", i, filepath.Ext(f.rel)), "coverage", b)
		if err != nil {
			return nil, "", err
		}
		out.Results = append(out.Results, cp)
		got = append(got, CoverageFile{File: f.name, Copy: cp.Path, SHA256: cp.SHA256, Totals: *t})
	}
	return got, "", nil
}
