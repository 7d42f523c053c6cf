package suite

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/internal/limits"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Recheck re-derives the verdict of a test or benchmark step that run.json
// records as passed, from the files the step left in its step directory
// (s.StepDir) and the step's spec (s.Step): every recorded result file is
// checked against the digest recorded for it, the results are parsed and
// judged again as the executor judges them. It returns nil when the files
// give the passing verdict the record claims, and an error saying what
// disagrees otherwise; nothing is run and nothing is written. exitCode is
// the recorded exit code of the step's command.
func Recheck(s *step.Context, recorded []step.File, exitCode *int) error {
	files, err := checkRecordedFiles(s, recorded)
	if err != nil {
		return err
	}
	switch s.Step.Kind {
	case pipeline.KindTest:
		return recheckTest(s, files, exitCode)
	case pipeline.KindBenchmark:
		if err := recheckRelease(s, files); err != nil {
			return err
		}
		return recheckBenchmark(s, files)
	}
	return nil
}

// recordedFile is a recorded result file as found in the step directory.
type recordedFile struct {
	step.File
	name string // its name in the step directory
	data []byte
}

// checkRecordedFiles reads every recorded result file from the step
// directory and checks it against its recorded digest. A test's results
// are recorded by their workdir path; their copy in the step directory is
// results<ext>.
func checkRecordedFiles(s *step.Context, recorded []step.File) ([]recordedFile, error) {
	prefix := "steps/" + s.Step.ID + "/"
	var out []recordedFile
	for _, f := range recorded {
		name, ok := strings.CutPrefix(f.Path, prefix)
		if !ok {
			name = "results" + path.Ext(f.Path)
		}
		if name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("recorded file %s is not in the step directory", f.Path)
		}
		b, err := limits.ReadFile(filepath.Join(s.StepDir, name), limits.ResultsBytes, "results copy")
		if err != nil {
			return nil, fmt.Errorf("recorded file %s: %w", f.Path, err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != f.SHA256 {
			return nil, fmt.Errorf("%s: sha256 %s, but run.json records %s for %s", filepath.Join(s.StepDir, name), got[:12], short12(f.SHA256), f.Path)
		}
		out = append(out, recordedFile{File: f, name: name, data: b})
	}
	return out, nil
}

func short12(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func recheckTest(s *step.Context, files []recordedFile, exitCode *int) error {
	var res *recordedFile
	for i := range files {
		if files[i].Kind == "results" || files[i].Kind == "junit" {
			res = &files[i]
			break
		}
	}
	if res == nil {
		return errors.New("run.json records no results file for it")
	}
	r, err := parseResults(filepath.Join(s.StepDir, res.name), res.data, s.Step.Format)
	if err != nil {
		return err
	}
	code := 0
	if exitCode != nil {
		code = *exitCode
	}
	_, status, reason, err := judgeTest(s.Step, r, code)
	if err != nil {
		return err
	}
	if status != step.Passed {
		return fmt.Errorf("its results say %s: %s", status, reason)
	}
	return nil
}

// invocationName is the name of an invocation's results copy in a
// benchmark's step directory (see copyName).
var invocationName = lazyregexp.New(`^(?:(candidate|reference)-(\d+)|results(?:-seed(\d+))?)\.[A-Za-z0-9]+$`)

func recheckBenchmark(s *step.Context, files []recordedFile) error {
	st := s.Step
	d := &BenchmarkDetails{Hardware: HardwareFromRecord(s.Hardware), Warmup: st.Warmup, Repeats: st.Repeats.String(), Seeds: st.Seeds}
	if st.Repeats.Auto {
		d.Precision = st.Precision.Fraction
	}
	br := &benchRun{s: s, d: d, out: &step.Outcome{}}
	for _, f := range files {
		if f.Kind != "results" && f.Kind != "junit" || f.name == "junit.xml" {
			continue
		}
		m := invocationName.FindStringSubmatch(f.name)
		if m == nil {
			return fmt.Errorf("recorded results %s: not a name a benchmark writes", f.Path)
		}
		r, err := parseResults(filepath.Join(s.StepDir, f.name), f.data, st.Format)
		if err != nil {
			return err
		}
		inv := invocation{side: sideCandidate, seed: -1, res: r}
		switch {
		case m[1] != "":
			inv.side = m[1]
			n, _ := strconv.Atoi(m[2])
			inv.index = n - 1
		case m[3] != "":
			inv.seed, _ = strconv.Atoi(m[3])
		}
		if inv.side == sideReference {
			inv.index = len(br.ref)
			br.ref = append(br.ref, inv)
		} else {
			inv.index = len(br.cand)
			br.cand = append(br.cand, inv)
		}
	}
	if len(br.cand) == 0 {
		return errors.New("run.json records no results of the candidate")
	}
	if st.Reference != nil {
		if len(br.ref) != len(br.cand) {
			return fmt.Errorf("run.json records %d candidate and %d reference invocations", len(br.cand), len(br.ref))
		}
		d.Reference = &ReferenceResult{Run: st.Reference.Run.String(), Results: st.Reference.Results, Rounds: len(br.ref)}
	}
	if err := br.judge(); err != nil {
		return err
	}
	if len(br.failures) > 0 {
		return fmt.Errorf("its results say failed: %s", strings.Join(br.failures, "; "))
	}
	return nil
}
