// Command attestonly links every package of attest/ (what a verifier
// needs: statements, sign, verify, policy, oci) and prints one line: its
// start-up is the floor of any verify-only binary, since a Go program
// runs the init of every package it links before main. bench/verify
// times it beside gpuattest version and a minimal Go program, to say
// what a lean verifier (ggcr's krane beside crane) would save.
package main

import (
	"fmt"

	_ "github.com/gpuattest/gpuattest/attest"
	_ "github.com/gpuattest/gpuattest/attest/dispatch"
	_ "github.com/gpuattest/gpuattest/attest/hardware"
	_ "github.com/gpuattest/gpuattest/attest/oci"
	_ "github.com/gpuattest/gpuattest/attest/policy"
	_ "github.com/gpuattest/gpuattest/attest/sign"
	_ "github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/initgc"
)

func main() {
	initgc.Restore() // as gpuattest does: no collection during init
	fmt.Println("attest/... linked")
}
