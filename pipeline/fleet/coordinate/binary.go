package coordinate

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
)

// elfMachines are the ELF machines of the architectures a class may name.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// CheckBinaries checks, before anything is built, that every class of
// spec has a gpuattest of its platform in binaries (platform to path),
// an ELF executable for its machine, when the fleet's staging stages
// one (Prepare checks the staged copies again).
func CheckBinaries(spec *fleet.Spec, binaries map[string]string) error {
	t, err := transportFor(spec)
	if err != nil || !t.stagesBinary() {
		return err
	}
	nbs, err := nodeBinaries(spec, binaries)
	for _, nb := range nbs {
		if err == nil {
			err = nb.check(nb.src)
		}
	}
	return err
}

// nodeBinary is the gpuattest of one platform the fleet's classes run:
// its path here, and the first class that runs it.
type nodeBinary struct {
	platform, src string
	class         *fleet.Class
}

// nodeBinaries are the binaries of the platforms spec's classes run, in
// the order of the classes, from binaries (platform to path). A class
// whose platform has none is an error naming the class and the flag.
func nodeBinaries(spec *fleet.Spec, binaries map[string]string) ([]nodeBinary, error) {
	var out []nodeBinary
	for i := range spec.Classes {
		c := &spec.Classes[i]
		p := c.Platform()
		if slices.ContainsFunc(out, func(nb nodeBinary) bool { return nb.platform == p }) {
			continue
		}
		src := binaries[p]
		if src == "" {
			return nil, fmt.Errorf("%s: class %s runs on %s nodes, but no gpuattest for %s was given\nhint: build one (CGO_ENABLED=0 GOOS=linux GOARCH=%s go build ./cmd/gpuattest, or make release) and name it with --node-binary %s=PATH",
				spec.Path, c.Name, p, p, c.Architecture(), p)
		}
		out = append(out, nodeBinary{platform: p, src: src, class: c})
	}
	return out, nil
}

// check checks the file at path is the binary's: an ELF executable for
// its class's machine.
func (nb nodeBinary) check(path string) error {
	if err := checkELF(path, nb.class.Architecture()); err != nil {
		return fmt.Errorf("the gpuattest for %s (%s, class %s): %w\nhint: --node-binary %s=PATH names a %s build of gpuattest", nb.platform, nb.src, nb.class.Name, err, nb.platform, nb.platform)
	}
	return nil
}

// binaries stages the gpuattest of each platform the fleet's classes
// run (binaries: platform to path), each at stagefs.BinaryPathFor, and
// checks each staged copy (nodeBinaries, nodeBinary.check).
func (st *stager) binaries(spec *fleet.Spec, binaries map[string]string) error {
	nbs, err := nodeBinaries(spec, binaries)
	if err != nil {
		return err
	}
	for _, nb := range nbs {
		rel := stagefs.BinaryPathFor(nb.platform)
		if err := st.file(nb.src, rel, 0o755); err != nil {
			return err
		}
		if err := nb.check(filepath.Join(st.dir, filepath.FromSlash(rel))); err != nil {
			return err
		}
	}
	return nil
}

// checkELF checks the file at path is a 64-bit ELF executable for arch's
// machine. It opens the file through limits.Open: a FIFO or device left
// on the shared directory in place of the staged copy is refused, never
// waited on.
func checkELF(path, arch string) error {
	r, err := limits.Open(path, "gpuattest binary")
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
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
func binarySelection(jobs []dispatch.Job, files []dispatch.File) (bin, sum, cases string) {
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
		p := fleet.Platform(j.Arch)
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
