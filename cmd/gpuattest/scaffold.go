package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func init() { verbs = append(verbs, newInitCmd) }

// Bounds on what init reads of a repository.
const (
	scaffoldMaxEntries = 20000
	scaffoldMaxDepth   = 8
	scaffoldMaxRead    = 1 << 20
)

// project is what init found in a repository.
type project struct {
	name        string
	cu          []string // .cu files, slash paths relative to the root
	mains       []string // those of them with a main function
	cmake       bool     // CMakeLists.txt with the CUDA language
	cmakeExes   []string // its add_executable targets
	ctest       bool     // CMakeLists.txt enables tests
	torchExt    string   // setup.py or pyproject.toml building CUDA extensions
	pytest      bool
	goTests     bool
	skippedDirs int
}

var (
	cmakeCUDARE = regexp.MustCompile(`(?i)(LANGUAGES[^)]*\bCUDA\b|enable_language\s*\(\s*CUDA|find_package\s*\(\s*CUDAToolkit)`)
	cmakeExeRE  = regexp.MustCompile(`(?i)add_executable\s*\(\s*([A-Za-z0-9_.+-]+)`)
	cmakeTestRE = regexp.MustCompile(`(?i)(enable_testing\s*\(|add_test\s*\()`)
	cudaExtRE   = regexp.MustCompile(`CUDAExtension|torch\.utils\.cpp_extension`)
	cuMainRE    = regexp.MustCompile(`\bint\s+main\s*\(`)
)

func newInitCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write a starting pipeline for a repository (CUDA sources, CMake, setup.py, ctest, pytest)",
		Long: "init looks at DIR (default .) for .cu files, a CMakeLists.txt with the CUDA language, a setup.py or\n" +
			"pyproject.toml building CUDA extensions, and test runners (ctest, pytest), and writes DIR/gpuattest.yaml:\n" +
			"a pipeline that passes lint, with comments on what to fill in. The pinned targets come from --targets,\n" +
			"or are asked for on a terminal; they are never guessed from the local GPU. init never overwrites a file.",
		Args: cobra.MaximumNArgs(1),
	}
	targets := c.Flags().String("targets", "", "pinned SASS targets, comma-separated (sm_80,sm_90)")
	outFile := c.Flags().String("file", "gpuattest.yaml", "the pipeline file to write, relative to DIR")
	c.RunE = func(c *cobra.Command, args []string) error {
		dir := "."
		if len(args) == 1 {
			dir = args[0]
		}
		ts, err := initTargets(c, *targets)
		if err != nil {
			return withCode(exitUsage, err)
		}
		p, err := detectProject(dir)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, *outFile)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return withCode(exitUsage, fmt.Errorf("%s exists: init never overwrites a file\nhint: remove it, or give another name with --file", path))
			}
			return err
		}
		if _, err := io.WriteString(f, renderPipeline(p, ts)); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(c.OutOrStdout(), "wrote %s (%s)\nnext: fill in what its comments ask, then gpuattest lint %s && gpuattest run %s\n", path, p.summary(), path, path)
		return nil
	}
	return c
}

// initTargets parses --targets, or asks for them on a terminal.
func initTargets(c *cobra.Command, flag string) ([]pipeline.Target, error) {
	if flag == "" {
		f, ok := c.InOrStdin().(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			return nil, errors.New("no pinned targets: give --targets sm_80,sm_90 (the SASS architectures your release must carry)\nhint: init never guesses them from this machine's GPU")
		}
		fmt.Fprint(c.ErrOrStderr(), "pinned SASS targets your release must carry (e.g. sm_80,sm_90): ")
		line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
		if err != nil && line == "" {
			return nil, fmt.Errorf("reading the targets: %w", err)
		}
		flag = strings.TrimSpace(line)
	}
	var ts []pipeline.Target
	for _, s := range strings.Split(flag, ",") {
		t, err := pipeline.ParseTarget(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--targets %q: %w", s, err)
		}
		if t.Suffix != "" || slices.Contains(ts, t) {
			return nil, fmt.Errorf("--targets %q: expected distinct plain SASS targets such as sm_80", s)
		}
		ts = append(ts, t)
	}
	slices.SortFunc(ts, pipeline.CompareTargets)
	return ts, nil
}

// detectProject walks dir (bounded; hidden directories and build
// directories skipped) and reads the files that say what it builds.
func detectProject(dir string) (*project, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	p := &project{name: pipelineName(filepath.Base(abs))}
	n := 0
	err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable parts are left out
		}
		rel, _ := filepath.Rel(abs, path)
		rel = filepath.ToSlash(rel)
		if n++; n > scaffoldMaxEntries {
			return fs.SkipAll
		}
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "build" || name == "node_modules" || name == "__pycache__" || strings.Count(rel, "/") >= scaffoldMaxDepth) {
				p.skippedDirs++
				return filepath.SkipDir
			}
			if name == "tests" || name == "test" {
				p.pytest = p.pytest || hasPyTests(path)
			}
			return nil
		}
		p.file(path, rel, d.Name())
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(p.cu)
	slices.Sort(p.mains)
	return p, nil
}

// file notes one file of the repository.
func (p *project) file(path, rel, name string) {
	switch {
	case strings.HasSuffix(name, ".cu"):
		p.cu = append(p.cu, rel)
		if cuMainRE.Match(readHead(path)) {
			p.mains = append(p.mains, rel)
		}
	case rel == "CMakeLists.txt":
		b := readHead(path)
		p.cmake = cmakeCUDARE.Match(b)
		p.ctest = cmakeTestRE.Match(b)
		for _, m := range cmakeExeRE.FindAllSubmatch(b, -1) {
			p.cmakeExes = append(p.cmakeExes, string(m[1]))
		}
	case rel == "setup.py" || rel == "pyproject.toml":
		b := readHead(path)
		if cudaExtRE.Match(b) {
			p.torchExt = rel
		}
		p.pytest = p.pytest || strings.Contains(string(b), "[tool.pytest")
	case rel == "pytest.ini" || rel == "conftest.py":
		p.pytest = true
	case strings.HasSuffix(name, "_test.go"):
		p.goTests = true
	}
}

func hasPyTests(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "test_*.py"))
	return len(m) > 0
}

func readHead(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, scaffoldMaxRead))
	return b
}

// pipelineName makes a pipeline name of a directory name.
func pipelineName(base string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.TrimLeft(b.String(), "-_.")
	if s == "" {
		return "project"
	}
	return s
}

func (p *project) summary() string {
	var found []string
	if len(p.cu) > 0 {
		found = append(found, fmt.Sprintf("%d .cu file(s)", len(p.cu)))
	}
	if p.cmake {
		found = append(found, "CMake with CUDA")
	}
	if p.ctest {
		found = append(found, "ctest")
	}
	if p.torchExt != "" {
		found = append(found, "CUDA extensions in "+p.torchExt)
	}
	if p.pytest {
		found = append(found, "pytest")
	}
	if len(found) == 0 {
		return "no CUDA sources found: a skeleton"
	}
	return "found " + strings.Join(found, ", ")
}
