package coordinate

import (
	"cmp"
	"debug/elf"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	ad "github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
)

// elfMachines are the ELF machines of the architectures a class may name.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// binaries stages the gpuattest of each platform the fleet's classes
// run (binaries: platform to path), each at stagefs.BinaryPathFor, and
// checks each staged copy is an ELF executable for its machine. A class
// whose platform has no binary is an error naming the class.
func (st *stager) binaries(spec *fleet.Spec, binaries map[string]string) error {
	var platforms []string
	for _, c := range spec.Classes {
		p := c.Platform()
		if slices.Contains(platforms, p) {
			continue
		}
		src, ok := binaries[p]
		if !ok || src == "" {
			return fmt.Errorf("%s: class %s runs on %s nodes, but no gpuattest for %s was given\nhint: build one (CGO_ENABLED=0 GOOS=%s GOARCH=%s go build ./cmd/gpuattest, or make release) and name it with --node-binary %s=PATH",
				spec.Path, c.Name, p, p, "linux", c.Architecture(), p)
		}
		rel := stagefs.BinaryPathFor(p)
		if err := st.file(src, rel, 0o755); err != nil {
			return err
		}
		if err := checkELF(filepath.Join(st.dir, filepath.FromSlash(rel)), c.Architecture()); err != nil {
			return fmt.Errorf("the gpuattest for %s (%s, class %s): %w\nhint: --node-binary %s=PATH names a linux/%s build of gpuattest", p, src, c.Name, err, p, c.Architecture())
		}
		platforms = append(platforms, p)
	}
	return nil
}

// checkELF checks the file at path is a 64-bit ELF executable for arch's
// machine.
func checkELF(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	want, ok := elfMachines[arch]
	switch {
	case !ok:
		return fmt.Errorf("no ELF machine known for architecture %s", arch)
	case f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN:
		return fmt.Errorf("an ELF file of type %s, not an executable", f.Type)
	case f.Class != elf.ELFCLASS64 || f.Machine != want:
		return fmt.Errorf("an ELF executable for %s (%s), expected %s (%s)", f.Machine, f.Class, want, arch)
	}
	return nil
}

// binarySelection is the job script's choice of the staged gpuattest:
// the first class's platform's binary, and for the classes of other
// platforms a case on the class ($1) that picks theirs. files are the
// staged files, with the binaries' digests.
func binarySelection(jobs []ad.Job, files []ad.File) (bin, sum, cases string) {
	digest := func(rel string) string {
		for _, f := range files {
			if f.Path == rel {
				return f.SHA256
			}
		}
		return ""
	}
	byPlatform := map[string][]string{}
	var order []string
	for _, j := range jobs {
		p := "linux/" + cmp.Or(j.Arch, fleet.DefaultArch)
		if !slices.Contains(byPlatform[p], j.Class) {
			if byPlatform[p] == nil {
				order = append(order, p)
			}
			byPlatform[p] = append(byPlatform[p], j.Class)
		}
	}
	if len(order) == 0 {
		return stagefs.BinaryPath, digest(stagefs.BinaryPath), ""
	}
	bin = stagefs.BinaryPathFor(order[0])
	var b strings.Builder
	for _, p := range order[1:] {
		rel := stagefs.BinaryPathFor(p)
		fmt.Fprintf(&b, "\t%s) bin=%s bin_sha256=%s ;;\n", strings.Join(byPlatform[p], "|"), rel, digest(rel))
	}
	if b.Len() > 0 {
		cases = "case \"$1\" in\n" + b.String() + "esac\n"
	}
	return bin, digest(bin), cases
}
