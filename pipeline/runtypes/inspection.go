package runtypes

// Inspection is what a built file holds, as cuobjdump sees it.
type Inspection struct {
	// Path is the file inspected, as given.
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the file's bytes.
	SHA256 string `json:"sha256"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// SASS lists the architectures of the embedded cubins (sm_80, ...),
	// unique and sorted by compute capability (sm_90 before sm_100).
	SASS []string `json:"sass"`
	// PTX lists the virtual architectures of embedded PTX (compute_90,
	// ...), unique and sorted like SASS.
	PTX []string `json:"ptx"`
	// Cubins are the embedded cubins, in cuobjdump's order.
	Cubins []Cubin `json:"cubins"`
}

// Cubin is one embedded device ELF.
type Cubin struct {
	// Name is the name cuobjdump gave it (e.g. vector_add.1.sm_80.cubin).
	Name string `json:"name"`
	// Arch is the SASS architecture read from the ELF header (sm_80; sm_90a
	// and sm_100f name the a and f variants).
	Arch string `json:"arch"`
	// SHA256 is the hex sha256 of the cubin's bytes.
	SHA256 string `json:"sha256"`
	// Size is the cubin's size in bytes.
	Size int64 `json:"size"`
}

// CubinDigests returns arch -> sha256 of each embedded cubin; archs with
// more than one cubin (executables of several translation units) get
// their digests joined with commas, in cuobjdump's order.
func (in *Inspection) CubinDigests() map[string]string {
	m := map[string]string{}
	for _, c := range in.Cubins {
		if m[c.Arch] != "" {
			m[c.Arch] += "," + c.SHA256
		} else {
			m[c.Arch] = c.SHA256
		}
	}
	return m
}
