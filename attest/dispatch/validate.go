package dispatch

import (
	"fmt"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/jsonstrict"
)

// required adds a problem at path when v is empty.
func required(probs problem.List, path, v, what string) problem.List {
	if v == "" {
		probs = append(probs, problem.Problem{Path: path, Message: "missing: expected " + what})
	}
	return probs
}

// Validate reports the fields of a dispatch predicate without which it
// names nothing: its ID, the pipeline's digest, and each
// job's name, class, nonce and public key. What the values mean (a job
// reported once, a key that signed) is Verify's.
func (d *Dispatch) Validate() problem.List {
	var probs problem.List
	probs = required(probs, "id", d.ID, "the dispatch's ID")
	probs = required(probs, "pipeline.digest", d.Pipeline.Digest, "the pipeline file's digest")
	for i, j := range d.Jobs {
		at := fmt.Sprintf("jobs[%d].", i)
		probs = required(probs, at+"name", j.Name, "the job's name")
		probs = required(probs, at+"class", j.Class, "the job's class")
		probs = required(probs, at+"nonce", j.Nonce, "the job's nonce")
		probs = required(probs, at+"publicKey", j.PublicKey, "the job's PEM public key")
	}
	return probs
}

// Validate reports the fields of a node predicate without which it
// answers no job: the dispatch's digest, the job, its nonce, and a
// result of passed or failed.
func (n *Node) Validate() problem.List {
	var probs problem.List
	probs = required(probs, "dispatch", n.Dispatch, "the dispatch statement's digest")
	probs = required(probs, "job", n.Job, "the job's name")
	probs = required(probs, "nonce", n.Nonce, "the job's nonce")
	if n.Result != ResultPassed && n.Result != ResultFailed {
		probs = append(probs, problem.Problem{Path: "result", Message: fmt.Sprintf("%q: expected %s or %s", n.Result, ResultPassed, ResultFailed)})
	}
	return probs
}

// readPredicate reads a predicate the way gpuattest reads every document
// others wrote: bounded, strict syntax (a duplicate key refused), the
// shape of out's type (an unknown field refused), then out.Validate.
func readPredicate(what string, raw []byte, out jsonstrict.Validator) error {
	if len(raw) > attest.DefaultMaxStatementSize {
		return fmt.Errorf("%s: %d bytes, over the %d-byte bound of a statement", what, len(raw), attest.DefaultMaxStatementSize)
	}
	probs := jsonstrict.Read(what, raw, attest.MaxStatementDepth, out)
	if len(probs) > 0 {
		probs[len(probs)-1].Hint = "the predicate is gpuattest's own; one that does not read as written is not one gpuattest signed"
	}
	return probs.Err()
}

// ReadNode reads a node predicate that is not yet signed (the node
// container's report, which the sign container signs) as strictly as
// DecodeNode reads a signed one; what names it in errors.
func ReadNode(what string, data []byte) (*Node, error) {
	var n Node
	if err := readPredicate(what, data, &n); err != nil {
		return nil, err
	}
	return &n, nil
}
