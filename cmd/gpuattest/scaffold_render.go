package main

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
)

// renderPipeline writes the starting pipeline for p and the pinned
// targets ts, with comments on what to fill in.
func renderPipeline(p *project, ts []pipeline.Target) string {
	var b strings.Builder
	var sms, gencode, cmakeArchs, torchArchs []string
	for _, t := range ts {
		sms = append(sms, t.SM())
		gencode = append(gencode, fmt.Sprintf("-gencode arch=%s,code=%s", t.Compute(), t.SM()))
		cmakeArchs = append(cmakeArchs, fmt.Sprintf("%d%d-real", t.Major, t.Minor))
		torchArchs = append(torchArchs, fmt.Sprintf("%d.%d", t.Major, t.Minor))
	}
	fmt.Fprintf(&b, "# Written by gpuattest init (%s).\n", p.summary())
	b.WriteString("# Fill in what the TODO comments ask, then:\n#   gpuattest lint gpuattest.yaml && gpuattest run gpuattest.yaml\n")
	fmt.Fprintf(&b, "apiVersion: %s\nkind: %s\nname: %s\n", pipeline.APIVersion, pipeline.KindPipeline, p.name)
	b.WriteString("# The SASS targets every released artifact must carry (given to init, never\n# guessed from this machine's GPU). Outputs holding device code are checked.\n")
	fmt.Fprintf(&b, "targets: [%s]\nsteps:\n", strings.Join(sms, ", "))
	var builds []string
	switch {
	case p.cmake:
		builds = append(builds, "build")
		b.WriteString("  # CMake's CUDA language, CMAKE_CUDA_ARCHITECTURES from the pinned targets.\n  - id: build\n")
		fmt.Fprintf(&b, "    run: %s\n", strconv.Quote(fmt.Sprintf("cmake -S . -B build '-DCMAKE_CUDA_ARCHITECTURES=%s' && cmake --build build", strings.Join(cmakeArchs, ";"))))
		writeInputs(&b, append([]string{"CMakeLists.txt"}, p.cu...))
		if len(p.cmakeExes) > 0 {
			b.WriteString("    # The programs CMake builds: released, and checked for the pinned targets.\n    # TODO: add the libraries you release; mark host-only outputs with hostOnly: true.\n    outputs:\n")
			for _, e := range p.cmakeExes {
				fmt.Fprintf(&b, "      - build/%s\n", e)
			}
		} else {
			b.WriteString("    # TODO: outputs: the executables and libraries you release (build/...).\n")
		}
	case len(p.cu) > 0:
		builds = append(builds, "kernels")
		b.WriteString("  # Every .cu file's device code as a fatbin (build/<name>.fatbin), checked by\n  # cuobjdump for the pinned targets and built twice to check reproducibility.\n  - id: kernels\n    kind: cuda-build\n    sources:\n")
		for _, s := range p.cu {
			fmt.Fprintf(&b, "      - %s\n", strconv.Quote(s))
		}
		b.WriteString("    reproducible: check\n")
		if len(p.mains) > 0 {
			builds = append(builds, "programs")
			b.WriteString("  # The programs (a .cu with main), built as nvcc -o would: released and checked\n  # for the pinned targets. TODO: add the libraries they link (-lcublas, ...).\n  - id: programs\n")
			var cmds, outs []string
			for _, m := range p.mains {
				out := "build/bin/" + strings.TrimSuffix(path.Base(m), ".cu")
				cmds = append(cmds, fmt.Sprintf("nvcc %s -o %s %s", strings.Join(gencode, " "), out, m))
				outs = append(outs, out)
			}
			fmt.Fprintf(&b, "    run: %s\n", strconv.Quote("mkdir -p build/bin && "+strings.Join(cmds, " && ")))
			writeInputs(&b, p.mains)
			b.WriteString("    outputs:\n")
			for _, o := range outs {
				fmt.Fprintf(&b, "      - %s\n", strconv.Quote(o))
			}
		}
	}
	if p.torchExt != "" {
		builds = append(builds, "extension")
		cmd := "python setup.py build_ext --inplace"
		if p.torchExt == "pyproject.toml" {
			cmd = "python -m pip install --no-build-isolation -e ."
		}
		fmt.Fprintf(&b, "  # The CUDA extensions of %s, for the pinned targets.\n  - id: extension\n    run: %s\n    env:\n      TORCH_CUDA_ARCH_LIST: %s\n", p.torchExt, strconv.Quote(cmd), strconv.Quote(strings.Join(torchArchs, ";")))
		b.WriteString("    # TODO: outputs: the extension modules it builds (e.g. pkg/_C*.so): released and\n    # checked for the pinned targets.\n")
	}
	if len(builds) == 0 {
		builds = append(builds, "build")
		b.WriteString("  # TODO: no CUDA sources, CMake or setup.py found: write the build command.\n  - id: build\n    run: \"echo TODO: build the project\"\n")
	}
	needs := "[" + strings.Join(builds, ", ") + "]"
	tests := 0
	if p.cmake && p.ctest {
		tests++
		fmt.Fprintf(&b, "  # ctest's cases, judged from its JUnit report (ctest --output-junit, CMake 3.21+).\n  - id: ctest\n    kind: test\n    needs: %s\n    run: \"ctest --test-dir build --output-on-failure --output-junit junit.xml\"\n    results: build/junit.xml\n", needs)
	}
	if p.pytest {
		tests++
		fmt.Fprintf(&b, "  # pytest's cases, judged from its JUnit report. For coverage add\n  # --cov=PKG --cov-report=xml:out/coverage.xml and coverage: [out/coverage.xml].\n  - id: pytest\n    kind: test\n    needs: %s\n    run: \"python -m pytest --junitxml=out/pytest.xml\"\n    results: out/pytest.xml\n", needs)
	}
	if tests == 0 {
		b.WriteString("  # TODO: a test step (kind: test) whose command writes JUnit XML or gpuattest\n  # results (results: FILE); a test passes on its results, never on its exit code.\n")
	}
	return b.String()
}

// writeInputs writes an inputs list with the note on the build cache.
func writeInputs(b *strings.Builder, files []string) {
	b.WriteString("    # TODO: list every file the build reads (headers too), then drop cache: false:\n    # the inputs key the build cache.\n    cache: false\n    inputs:\n")
	for _, f := range files {
		fmt.Fprintf(b, "      - %s\n", strconv.Quote(f))
	}
}
