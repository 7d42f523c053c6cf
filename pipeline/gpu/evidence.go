package gpu

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
)

// NVAttest is the NVIDIA command that collects a Blackwell GPU's
// evidence in any mode.
const NVAttest = "nvattest"

// EvidenceOption configures CollectEvidence.
type EvidenceOption func(*evidenceOptions) error

type evidenceOptions struct {
	nonceFor func(uuid string) gpuevidence.Nonce
	lookPath func(string) (string, error)
	timeout  time.Duration
}

// WithNoncePerGPU asks each GPU for its own nonce (FleetNonce with the
// GPU's UUID) instead of one for all.
func WithNoncePerGPU(f func(uuid string) gpuevidence.Nonce) EvidenceOption {
	return func(o *evidenceOptions) error {
		if f == nil {
			return errors.New("gpu.WithNoncePerGPU: nil function")
		}
		o.nonceFor = f
		return nil
	}
}

// WithLookPath finds nvattest with f instead of exec.LookPath; for
// tests.
func WithLookPath(f func(string) (string, error)) EvidenceOption {
	return func(o *evidenceOptions) error { o.lookPath = f; return nil }
}

// maxNVAttestOutput bounds what nvattest may print (its evidence for 8
// GPUs is about 100 KiB).
const maxNVAttestOutput = 8 << 20

// checkCollected parses what a GPU returned (not a verification: that
// is the verifier's) so that a garbled answer is a reason at collection.
func checkCollected(it *gpuevidence.Item, nonce gpuevidence.Nonce) error {
	raw, err := base64.StdEncoding.DecodeString(it.Evidence)
	if err != nil {
		return err
	}
	rep, err := gpuevidence.ParseAttestationReport(raw)
	if err != nil {
		return err
	}
	if rep.Request.Nonce != nonce {
		return fmt.Errorf("the report signs nonce %x, not the one asked for", rep.Request.Nonce)
	}
	return nil
}

// nvattestOutput is what nvattest collect-evidence --format json prints.
type nvattestOutput struct {
	ResultCode    int                `json:"result_code"`
	ResultMessage string             `json:"result_message"`
	Evidences     []gpuevidence.Item `json:"evidences"`
}

// nvattest collects the evidence of GPU index with NVIDIA's nvattest
// (every GPU answers; the index-th item is this GPU's).
func (o *evidenceOptions) nvattest(ctx context.Context, index int, nonce gpuevidence.Nonce) (*gpuevidence.Item, error) {
	path, err := o.lookPath(NVAttest)
	if err != nil {
		return nil, errors.New("nvattest not installed")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "collect-evidence", "--gpu-evidence-source", "corelib", "--gpu-architecture", "blackwell",
		"--nonce", hex.EncodeToString(nonce[:]), "--format", "json")
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxNVAttestOutput, 4096
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("nvattest collect-evidence: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if stdout.over {
		return nil, fmt.Errorf("nvattest collect-evidence: more than %d bytes of output", maxNVAttestOutput)
	}
	var res nvattestOutput
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("nvattest collect-evidence: output is not its JSON: %v", err)
	}
	if res.ResultCode != 0 {
		return nil, fmt.Errorf("nvattest collect-evidence: %s (code %d)", res.ResultMessage, res.ResultCode)
	}
	if index >= len(res.Evidences) {
		return nil, fmt.Errorf("nvattest collect-evidence: %d GPUs answered, none for GPU %d", len(res.Evidences), index)
	}
	it := res.Evidences[index]
	return &it, checkCollected(&it, nonce)
}

// limitedBuffer keeps at most max bytes and notes that more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
