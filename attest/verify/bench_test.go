package verify_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// BenchmarkVerify measures the library's part of one gpuattest verify
// call (no process start): building the verifier (policy compile),
// hashing the artifact and verifying the bundles.
func BenchmarkVerify(b *testing.B) {
	for _, tc := range []struct {
		bundles int
		size    int
	}{{1, 10 << 20}, {100, 64 << 10}} {
		b.Run(fmt.Sprintf("bundles=%d/artifact=%dKiB", tc.bundles, tc.size>>10), func(b *testing.B) {
			dir := b.TempDir()
			kp, pubPath := newKey(b, dir, "bench")
			var lines [][]byte
			var paths []string
			for i := range tc.bundles {
				p := filepath.Join(dir, fmt.Sprintf("k%d", i))
				buf := make([]byte, tc.size)
				_, _ = rand.Read(buf)
				if err := os.WriteFile(p, buf, 0o644); err != nil {
					b.Fatal(err)
				}
				a, err := verify.DigestFile(context.Background(), p)
				if err != nil {
					b.Fatal(err)
				}
				paths = append(paths, p)
				lines = append(lines, signRun(b, kp, attesttest.Run(false, a.SHA256)))
			}
			jsonl := filepath.Join(dir, "all.jsonl")
			if err := sign.AppendJSONL(jsonl, lines); err != nil {
				b.Fatal(err)
			}
			pub := mustPub(b, pubPath)
			b.ResetTimer()
			for b.Loop() {
				v, err := verify.New(verify.WithKey(pub, pubPath))
				if err != nil {
					b.Fatal(err)
				}
				data, err := os.ReadFile(jsonl)
				if err != nil {
					b.Fatal(err)
				}
				entries, err := verify.ParseBundles(jsonl, data)
				if err != nil {
					b.Fatal(err)
				}
				var arts []verify.Artifact
				for _, p := range paths {
					a, err := verify.DigestFile(context.Background(), p)
					if err != nil {
						b.Fatal(err)
					}
					arts = append(arts, a)
				}
				if r := v.Verify(b.Context(), entries, arts); !r.Verified {
					b.Fatalf("not verified: %s", strings.Join(failedChecks(r), "; "))
				}
			}
		})
	}
}
