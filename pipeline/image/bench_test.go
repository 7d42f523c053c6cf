package image

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// benchImage has 3 layers of 700 files each (about 64 MiB in all), the
// last one replacing and whiting out part of the first.
func benchImage(b *testing.B) (v1.Image, int64) {
	r := rand.New(rand.NewSource(1))
	var layers []v1.Layer
	var total int64
	for l := 0; l < 3; l++ {
		var ents []ent
		for d := 0; d < 20; d++ {
			ents = append(ents, dir(fmt.Sprintf("usr/lib%d/", d)))
		}
		for i := 0; i < 700; i++ {
			size := 1 << (8 + r.Intn(10)) // 256 B .. 128 KiB
			total += int64(size)
			ents = append(ents, file(fmt.Sprintf("usr/lib%d/f%d-%d", i%20, l, i), strings.Repeat(string(rune('a'+i%26)), size)))
		}
		if l == 2 {
			ents = append(ents, file("usr/lib0/.wh.f0-0", ""), file("usr/lib1/.wh..wh..opq", ""))
		}
		layers = append(layers, layerOf(b, ents...))
	}
	return imageOf(b, layers...), total
}

// BenchmarkExtract measures a cold extraction (new cache each time) and a
// cached one.
func BenchmarkExtract(b *testing.B) {
	img, total := benchImage(b)
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			if _, err := Extract(b.Context(), img, b.TempDir()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		cache := b.TempDir()
		if _, err := Extract(b.Context(), img, cache); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := Extract(b.Context(), img, cache); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkExtractNoSync is BenchmarkExtract/cold without the final syncfs,
// to show what durability costs.
func BenchmarkExtractNoSync(b *testing.B) {
	img, total := benchImage(b)
	syncFSHook = func(string) error { return nil }
	defer func() { syncFSHook = syncFS }()
	b.SetBytes(total)
	for b.Loop() {
		if _, err := Extract(b.Context(), img, b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
}
