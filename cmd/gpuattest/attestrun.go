package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/collect"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
)

// attestation is what run --key wrote.
type attestation struct {
	File       string   `json:"file"`
	Signer     string   `json:"signer"`
	Statements []string `json:"predicate_types"`
	Subjects   int      `json:"subjects"`
	Result     string   `json:"result"`
}

// attestRun builds the run's statements (GPU validation, and SLSA
// provenance when it built something), signs them, and writes
// attestations.intoto.jsonl into the run directory, replacing an older one.
func attestRun(ctx context.Context, signer *sign.Signer, p *pipeline.Pipeline, res *engine.Result) (*attestation, error) {
	rd, err := rundir.Open(res.Dir)
	if err != nil {
		return nil, err
	}
	// A verdict is signed only when the files behind it still give it: a
	// run.json edited before a --resume does not become a claim.
	if err := rd.Recheck(p); err != nil {
		return nil, fmt.Errorf("refusing to sign: %w", err)
	}
	run, err := collect.FromRun(rd, p)
	if err != nil {
		return nil, err
	}
	if len(run.Artifacts) == 0 {
		return nil, errors.New("the run released no artifacts, so there is nothing to attest\nhint: cuda-build steps report their fatbins/cubins as artifacts")
	}
	val, err := attest.ValidationStatement(run)
	if err != nil {
		return nil, err
	}
	stmts := []*attest.Statement{val}
	if run.Build != nil {
		prov, err := attest.ProvenanceStatement(run)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, prov)
	}
	bundles, err := sign.SignStatements(ctx, signer, stmts)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(res.Dir, "attestations.intoto.jsonl")
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := sign.AppendJSONL(file, bundles); err != nil {
		return nil, err
	}
	out := &attestation{File: file, Signer: signer.Identity(), Subjects: len(run.Artifacts), Result: "passed"}
	if run.RunError != "" {
		out.Result = "failed"
	}
	for _, st := range stmts {
		out.Statements = append(out.Statements, st.PredicateType)
	}
	return out, nil
}
