package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/runfixture"
)

// rejected are the exit codes of a verification failure: signature or
// identity (10), an artifact that is not a subject (11), policy,
// predicate type or statement (12).
var rejected = []int{10, 11, 12}

// bundleLab holds two signed fixture runs and two keys.
type bundleLab struct {
	*lab
	dir    string
	lines  [2][][]byte // each run's attestations.intoto.jsonl, by line
	arts   [2][]string // each run's released files
	signer *sign.Signer
}

// keyPair makes an unencrypted key pair dir/name.{key,pub} with
// gpuattest key generate.
func (l *lab) keyPair(ctx context.Context, dir, name string) (string, error) {
	prefix := filepath.Join(dir, name)
	u, out, err := l.call(ctx, dir, []string{"GPUATTEST_PASSWORD="}, "key", "generate", "--output-key-prefix", prefix, "--no-password")
	if err != nil || u.Exit != 0 {
		return "", fmt.Errorf("key generate: exit %d, %v\n%s", u.Exit, err, out)
	}
	return prefix, nil
}

// newBundleLab writes two signed runs (internal/runfixture, signed by
// key a) whose artifacts differ, and a second key b.
func newBundleLab(ctx context.Context, l *lab) (*bundleLab, error) {
	b := &bundleLab{lab: l, dir: filepath.Join(l.dir, "bundles")}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, err
	}
	for _, k := range []string{"a", "b"} {
		if _, err := l.keyPair(ctx, b.dir, k); err != nil {
			return nil, err
		}
	}
	kp, err := sign.LoadPrivateKey(filepath.Join(b.dir, "a.key"), nil)
	if err != nil {
		return nil, err
	}
	if b.signer, err = sign.NewKeySigner(kp); err != nil {
		return nil, err
	}
	for i := range 2 {
		run := filepath.Join(b.dir, fmt.Sprintf("run%d", i))
		files := []runfixture.File{{Name: "build/k.fatbin", Size: int64(4096 + i)}, {Name: "build/m.fatbin", Size: 2048}}
		if i == 1 {
			files[1].Data = []byte("the second run's other kernel")
		}
		if _, err := runfixture.Write(ctx, filepath.Join(b.dir, fmt.Sprintf("src%d", i)), run, files, b.signer); err != nil {
			return nil, err
		}
		raw, err := os.ReadFile(filepath.Join(run, "attestations.intoto.jsonl"))
		if err != nil {
			return nil, err
		}
		b.lines[i] = bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
		for _, f := range files {
			b.arts[i] = append(b.arts[i], filepath.Join(run, "steps", "kernels", "outputs", f.Name))
		}
	}
	return b, nil
}

// bundleCase is one verify call on a generated input.
type bundleCase struct {
	name  string
	jsonl [][]byte // the bundle file's lines
	raw   []byte   // or the file's bytes, when set
	key   string   // public key file name in the lab (default a.pub)
	arts  []string // artifacts (default run 0's)
	want  []int
	// policy is verify's --policy (default builtin:cpu-tier: the signed
	// runs ran on the CPU backend).
	policy string
}

// verify writes c's bundle file and runs gpuattest verify on it.
func (b *bundleLab) verify(ctx context.Context, i int, c bundleCase) (result, error) {
	file := filepath.Join(b.dir, fmt.Sprintf("case%05d.jsonl", i))
	data := c.raw
	if data == nil {
		data = append(bytes.Join(c.jsonl, []byte("\n")), '\n')
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return result{}, err
	}
	defer os.Remove(file)
	key := c.key
	if key == "" {
		key = "a.pub"
	}
	arts := c.arts
	if arts == nil {
		arts = b.arts[0]
	}
	policy := c.policy
	if policy == "" {
		policy = "builtin:cpu-tier"
	}
	args := append([]string{"verify", "--bundle", file, "--key", filepath.Join(b.dir, key), "--policy", policy}, arts...)
	u, out, err := b.call(ctx, b.dir, nil, args...)
	if err != nil {
		return result{}, err
	}
	right, why := exitIn(u, out, c.want...)
	if bad := unsafeText(out); right && bad != "" {
		right, why = false, bad+tail(out) // issue 15 item 4: a bundle must not draw on the terminal
	}
	return result{name: c.name, right: right, why: why, usage: u, large: len(data) > 10_500_000}, nil
}

// bundleCases generates the bundle and statement cases and runs them.
func bundleCases(ctx context.Context, l *lab) ([]result, error) {
	b, err := newBundleLab(ctx, l)
	if err != nil {
		return nil, err
	}
	rng := l.rng("bundles")
	cs := []bundleCase{
		{name: "the untouched run verifies", jsonl: b.lines[0], want: []int{0}},
		{name: "the untouched CPU run fails the default policy (no GPU coverage)", jsonl: b.lines[0], want: []int{12}, policy: "builtin:default"},
	}
	gens := []func(*rand.Rand) ([]bundleCase, error){b.flips, b.material, b.reencoded, b.lineCases, b.artifactCases}
	for _, g := range gens {
		more, err := g(rng)
		if err != nil {
			return nil, err
		}
		cs = append(cs, more...)
	}
	resigned, err := b.resigned(ctx)
	if err != nil {
		return nil, err
	}
	cs = append(cs, resigned...)
	return parallel(ctx, len(cs), func(ctx context.Context, i int) (result, error) { return b.verify(ctx, i, cs[i]) })
}

// bundleJSON is the part of a Sigstore bundle the mutations touch.
type bundleJSON map[string]any

func parseBundle(line []byte) (bundleJSON, error) {
	var m bundleJSON
	return m, json.Unmarshal(line, &m)
}

func (m bundleJSON) envelope() map[string]any {
	e, _ := m["dsseEnvelope"].(map[string]any)
	return e
}

func (m bundleJSON) signature() map[string]any {
	sigs, _ := m.envelope()["signatures"].([]any)
	if len(sigs) == 0 {
		return nil
	}
	s, _ := sigs[0].(map[string]any)
	return s
}

func (m bundleJSON) marshal() []byte {
	out, err := json.Marshal(m)
	if err != nil {
		panic(err) // a map of decoded JSON always encodes
	}
	return out
}

// flipB64 decodes the base64 field key of obj, flips one random bit of
// it and encodes it back: the bytes always change.
func flipB64(rng *rand.Rand, obj map[string]any, key string) error {
	s, _ := obj[key].(string)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) == 0 {
		return fmt.Errorf("field %s is not base64: %v", key, err)
	}
	raw[rng.IntN(len(raw))] ^= 1 << rng.IntN(8)
	obj[key] = base64.StdEncoding.EncodeToString(raw)
	return nil
}

// withLine returns lines with line i replaced.
func withLine(lines [][]byte, i int, line []byte) [][]byte {
	out := append([][]byte(nil), lines...)
	out[i] = line
	return out
}

// flips are bit flips in the signed payload and in the signature.
func (b *bundleLab) flips(rng *rand.Rand) ([]bundleCase, error) {
	var cs []bundleCase
	for _, f := range []struct {
		field  string
		n      int
		target func(bundleJSON) map[string]any
	}{
		{"payload", b.n(60, 800), bundleJSON.envelope},
		{"sig", b.n(20, 300), bundleJSON.signature},
	} {
		for k := range f.n {
			i := rng.IntN(len(b.lines[0]))
			m, err := parseBundle(b.lines[0][i])
			if err != nil {
				return nil, err
			}
			if err := flipB64(rng, f.target(m), f.field); err != nil {
				return nil, err
			}
			cs = append(cs, bundleCase{name: fmt.Sprintf("bit flip in %s of line %d (#%d)", f.field, i+1, k), jsonl: withLine(b.lines[0], i, m.marshal()), want: rejected})
		}
	}
	return cs, nil
}

// material mutates the verification material: the public key hint and
// the DSSE keyid are advisory (docs/verify.md: key hints are advisory), so a
// changed one verifies; a missing or replaced key material, a bundle
// media type of another version, or a certificate in place of the key
// is refused.
func (b *bundleLab) material(rng *rand.Rand) ([]bundleCase, error) {
	var cs []bundleCase
	mutations := []struct {
		name string
		want []int
		edit func(m bundleJSON)
	}{
		{"random public key hint", []int{0}, func(m bundleJSON) {
			vm, _ := m["verificationMaterial"].(map[string]any)
			vm["publicKey"] = map[string]any{"hint": base64.StdEncoding.EncodeToString(randBytes(rng, 32))}
		}},
		{"empty public key hint", []int{0}, func(m bundleJSON) {
			vm, _ := m["verificationMaterial"].(map[string]any)
			vm["publicKey"] = map[string]any{"hint": ""}
		}},
		{"random DSSE keyid", []int{0}, func(m bundleJSON) { m.signature()["keyid"] = fmt.Sprintf("%x", randBytes(rng, 16)) }},
		{"no verification material", rejected, func(m bundleJSON) { delete(m, "verificationMaterial") }},
		{"junk certificate for the key", rejected, func(m bundleJSON) {
			m["verificationMaterial"] = map[string]any{"certificate": map[string]any{"rawBytes": base64.StdEncoding.EncodeToString(randBytes(rng, 300))}}
		}},
		{"media type of bundle v0.1 (not signed; a v0.1 bundle of the same content verifies)", []int{0}, func(m bundleJSON) {
			m["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.1"
		}},
		{"junk media type with terminal escapes", rejected, func(m bundleJSON) {
			m["mediaType"] = "application/x-evil\x1b[2K\x1b[1A\rPASS \u202e"
		}},
		{"subject name with terminal escapes (re-encoded)", rejected, func(m bundleJSON) {
			st, _ := statementOf(m.marshal())
			st["subject"].([]any)[0].(map[string]any)["name"] = "k\x1b[2K\x1b[1A\rVerified OK"
			raw, _ := json.Marshal(st)
			m.envelope()["payload"] = base64.StdEncoding.EncodeToString(raw)
		}},
		{"payload type changed", rejected, func(m bundleJSON) { m.envelope()["payloadType"] = "application/json" }},
		{"second signature, junk", rejected, func(m bundleJSON) {
			e := m.envelope()
			e["signatures"] = append(e["signatures"].([]any), map[string]any{"sig": base64.StdEncoding.EncodeToString(randBytes(rng, 70))})
		}},
		{"no signatures", rejected, func(m bundleJSON) { m.envelope()["signatures"] = []any{} }},
		{"message signature instead of DSSE", rejected, func(m bundleJSON) {
			delete(m, "dsseEnvelope")
			m["messageSignature"] = map[string]any{"messageDigest": map[string]any{"algorithm": "SHA2_256", "digest": base64.StdEncoding.EncodeToString(randBytes(rng, 32))},
				"signature": base64.StdEncoding.EncodeToString(randBytes(rng, 70))}
		}},
	}
	for k := range b.n(2, 10) {
		for _, mu := range mutations {
			i := rng.IntN(len(b.lines[0]))
			m, err := parseBundle(b.lines[0][i])
			if err != nil {
				return nil, err
			}
			mu.edit(m)
			cs = append(cs, bundleCase{name: fmt.Sprintf("%s, line %d (#%d)", mu.name, i+1, k), jsonl: withLine(b.lines[0], i, m.marshal()), want: mu.want})
		}
	}
	return cs, nil
}

func randBytes(rng *rand.Rand, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(rng.UintN(256))
	}
	return out
}

// statementOf decodes a bundle line's statement, unverified.
func statementOf(line []byte) (map[string]any, error) {
	m, err := parseBundle(line)
	if err != nil {
		return nil, err
	}
	p, _ := m.envelope()["payload"].(string)
	raw, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return nil, err
	}
	var st map[string]any
	return st, json.Unmarshal(raw, &st)
}

// withStatement re-encodes st into line's payload, keeping the
// signature.
func withStatement(line []byte, st map[string]any) ([]byte, error) {
	m, err := parseBundle(line)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	m.envelope()["payload"] = base64.StdEncoding.EncodeToString(raw)
	return m.marshal(), nil
}

// statementEdits are changes to a statement a forger would want.
var statementEdits = []struct {
	name string
	edit func(rng *rand.Rand, st map[string]any)
}{
	{"subject digest", func(rng *rand.Rand, st map[string]any) {
		s := st["subject"].([]any)[0].(map[string]any)
		s["digest"] = map[string]any{"sha256": fmt.Sprintf("%x", randBytes(rng, 32))}
	}},
	{"subject name", func(_ *rand.Rand, st map[string]any) {
		st["subject"].([]any)[0].(map[string]any)["name"] = "build/evil.fatbin"
	}},
	{"subject added", func(rng *rand.Rand, st map[string]any) {
		st["subject"] = append(st["subject"].([]any), map[string]any{"name": "x", "digest": map[string]any{"sha256": fmt.Sprintf("%x", randBytes(rng, 32))}})
	}},
	{"subject dropped", func(_ *rand.Rand, st map[string]any) { st["subject"] = st["subject"].([]any)[1:] }},
	{"predicate type", func(_ *rand.Rand, st map[string]any) { st["predicateType"] = attest.ValidationPredicateType + "x" }},
	{"statement type", func(_ *rand.Rand, st map[string]any) { st["_type"] = "https://in-toto.io/Statement/v0.1" }},
	{"predicate result", func(_ *rand.Rand, st map[string]any) { setPredicate(st, "result", "passed") }},
	{"predicate simulated", func(_ *rand.Rand, st map[string]any) { setPredicate(st, "simulated", true) }},
	{"predicate field added", func(_ *rand.Rand, st map[string]any) { setPredicate(st, "approved_by", "release-manager") }},
	{"predicate random field", func(rng *rand.Rand, st map[string]any) { mutateRandomLeaf(rng, st["predicate"]) }},
	{"unknown statement field", func(_ *rand.Rand, st map[string]any) { st["PredicateType"] = "x" }},
}

func setPredicate(st map[string]any, key string, v any) {
	if p, ok := st["predicate"].(map[string]any); ok {
		p[key] = v
	}
}

// mutateRandomLeaf changes one random scalar of v (a decoded JSON
// value) and reports whether it found one.
func mutateRandomLeaf(rng *rand.Rand, v any) bool {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortStrings(keys)
		for _, j := range rng.Perm(len(keys)) {
			k := keys[j]
			switch c := x[k].(type) {
			case map[string]any, []any:
				if mutateRandomLeaf(rng, c) {
					return true
				}
			default:
				x[k] = changed(c)
				return true
			}
		}
	case []any:
		for _, j := range rng.Perm(len(x)) {
			switch c := x[j].(type) {
			case map[string]any, []any:
				if mutateRandomLeaf(rng, c) {
					return true
				}
			default:
				x[j] = changed(c)
				return true
			}
		}
	}
	return false
}

// changed is a scalar JSON value other than v.
func changed(v any) any {
	switch x := v.(type) {
	case string:
		return x + "x"
	case float64:
		return x + 1
	case bool:
		return !x
	default:
		return "x"
	}
}

// reencoded are statements changed and re-encoded under the old
// signature.
func (b *bundleLab) reencoded(rng *rand.Rand) ([]bundleCase, error) {
	var cs []bundleCase
	for k := range b.n(2, 20) {
		for _, e := range statementEdits {
			i := rng.IntN(len(b.lines[0]))
			st, err := statementOf(b.lines[0][i])
			if err != nil {
				return nil, err
			}
			e.edit(rng, st)
			line, err := withStatement(b.lines[0][i], st)
			if err != nil {
				return nil, err
			}
			cs = append(cs, bundleCase{name: fmt.Sprintf("re-encoded, %s changed, line %d (#%d)", e.name, i+1, k), jsonl: withLine(b.lines[0], i, line), want: rejected})
		}
	}
	return cs, nil
}

// lineCases swap, repeat, drop and truncate lines of the JSONL.
func (b *bundleLab) lineCases(rng *rand.Rand) ([]bundleCase, error) {
	l0, l1 := b.lines[0], b.lines[1]
	rev := append([][]byte(nil), l0...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	cs := []bundleCase{
		{name: "lines in reverse order (nothing signed changed)", jsonl: rev, want: []int{0}},
		{name: "every line twice (nothing signed changed)", jsonl: append(append([][]byte(nil), l0...), l0...), want: []int{0}},
		{name: "run 1's validation line in place of run 0's", jsonl: withLine(l0, 0, l1[0]), want: rejected},
		{name: "run 1's JSONL for run 0's artifacts", jsonl: l1, want: rejected},
		{name: "run 0's JSONL for run 1's artifacts", jsonl: l0, arts: b.arts[1], want: rejected},
		{name: "run 0's JSONL, one artifact of each run", jsonl: l0, arts: []string{b.arts[0][0], b.arts[1][1]}, want: rejected},
		{name: "only the provenance line", jsonl: l0[1:], want: rejected},
		{name: "wrong key", jsonl: l0, key: "b.pub", want: rejected},
		{name: "private key as the public key", jsonl: l0, key: "a.key", want: []int{1, 10}},
	}
	lines := append(append([][]byte(nil), l0...), []byte("{}"))
	cs = append(cs, bundleCase{name: "a line {} after the bundles", jsonl: lines, want: rejected})
	whole := append(bytes.Join(l0, []byte("\n")), '\n')
	for k := range b.n(12, 150) {
		cut := 1 + rng.IntN(len(whole)-2)
		if whole[cut-1] == '\n' || whole[cut] == '\n' {
			cut++ // inside a line, so that a bundle is cut
		}
		cs = append(cs, bundleCase{name: fmt.Sprintf("truncated at byte %d of %d (#%d)", cut, len(whole), k), raw: whole[:cut], want: rejected})
	}
	// More lines than verify reads (MaxBundles): refused as over a limit
	// (exit 1) before any is parsed.
	big := bytes.Repeat([]byte("{}\n"), 100_000)
	cs = append(cs,
		bundleCase{name: "100k lines of {} then the bundles", raw: append(big, whole...), want: []int{1}},
		bundleCase{name: "the bundles then 100k lines of {}", raw: append(append([]byte(nil), whole...), big...), want: []int{1}},
		bundleCase{name: "100k blank lines around the bundles", raw: append(append(bytes.Repeat([]byte("\n"), 100_000), whole...), bytes.Repeat([]byte(" \n"), 100_000)...), want: []int{0}})
	if b.long {
		// 200 MB: over the bundle file size limit, refused unread.
		cs = append(cs, bundleCase{name: "100k lines of a bundle with a flipped payload", raw: bytes.Repeat(append(b.flippedLine(rng), '\n'), 100_000), want: []int{1}})
	}
	return cs, nil
}

// flippedLine is run 0's first line with a bit of its payload flipped.
func (b *bundleLab) flippedLine(rng *rand.Rand) []byte {
	m, err := parseBundle(b.lines[0][0])
	if err != nil {
		panic(err)
	}
	if err := flipB64(rng, m.envelope(), "payload"); err != nil {
		panic(err)
	}
	return m.marshal()
}

// artifactCases change the artifacts handed to verify.
func (b *bundleLab) artifactCases(rng *rand.Rand) ([]bundleCase, error) {
	orig, err := os.ReadFile(b.arts[0][0])
	if err != nil {
		return nil, err
	}
	var cs []bundleCase
	write := func(name string, data []byte) (string, error) {
		p := filepath.Join(b.dir, "artifacts", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		return p, os.WriteFile(p, data, 0o644)
	}
	var errs []error
	add := func(name string, data []byte) {
		p, err := write(fmt.Sprintf("%03d-k.fatbin", len(cs)), data)
		errs = append(errs, err)
		cs = append(cs, bundleCase{name: "artifact " + name, jsonl: b.lines[0], arts: []string{p, b.arts[0][1]}, want: rejected})
	}
	for k := range b.n(8, 100) {
		d := append([]byte(nil), orig...)
		d[rng.IntN(len(d))] ^= 1 << rng.IntN(8)
		add(fmt.Sprintf("bit flip (#%d)", k), d)
	}
	add("truncated by one byte", orig[:len(orig)-1])
	add("one byte appended", append(append([]byte(nil), orig...), 0))
	add("empty", nil)
	add("of the other run", mustRead(b.arts[1][0]))
	return cs, errors.Join(errs...)
}

func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}

// resigned are statements a holder of the right key signed with gpuattest
// sign, which the artifacts or the default policy refute.
func (b *bundleLab) resigned(ctx context.Context) ([]bundleCase, error) {
	edits := []struct {
		name string
		edit func(st map[string]any)
		want int
	}{
		{"subject digest of another file", func(st map[string]any) {
			st["subject"].([]any)[0].(map[string]any)["digest"] = map[string]any{"sha256": strings.Repeat("ab", 32)}
		}, 11},
		{"predicate type of another kind", func(st map[string]any) { st["predicateType"] = "https://example.com/other/v1" }, 12},
		{"subject name with terminal escapes (verifies, printed escaped)", func(st map[string]any) {
			st["subject"].([]any)[0].(map[string]any)["name"] = "k\x1b[2K\x1b[1A\rFAKE \u202e"
		}, 0},
		{"result failed", func(st map[string]any) { setPredicate(st, "result", "failed") }, 12},
		{"simulated hardware", func(st map[string]any) { setPredicate(st, "simulated", true) }, 12},
		{"a step failed", func(st map[string]any) {
			p := st["predicate"].(map[string]any)
			p["steps"].([]any)[0].(map[string]any)["verdict"] = "failed"
		}, 12},
	}
	var cs []bundleCase
	for k, e := range edits {
		st, err := statementOf(b.lines[0][0])
		if err != nil {
			return nil, err
		}
		e.edit(st)
		raw, err := json.Marshal(st)
		if err != nil {
			return nil, err
		}
		in := filepath.Join(b.dir, fmt.Sprintf("resigned%d.json", k))
		out := filepath.Join(b.dir, fmt.Sprintf("resigned%d.bundle.json", k))
		if err := os.WriteFile(in, raw, 0o644); err != nil {
			return nil, err
		}
		u, o, err := b.call(ctx, b.dir, []string{"GPUATTEST_PASSWORD="}, "sign", "--key", filepath.Join(b.dir, "a.key"), in, "-o", out)
		if err != nil || u.Exit != 0 {
			return nil, fmt.Errorf("signing %s: exit %d, %v\n%s", e.name, u.Exit, err, o)
		}
		line, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		cs = append(cs, bundleCase{name: "signed by the right key, " + e.name, jsonl: withLine(b.lines[0], 0, bytes.TrimSpace(line)), want: []int{e.want}})
	}
	return cs, nil
}
