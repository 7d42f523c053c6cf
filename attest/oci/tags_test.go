package oci_test

import (
	"slices"
	"testing"

	"github.com/gpuattest/gpuattest/attest/oci"
)

func TestCompareTags(t *testing.T) {
	t.Parallel()
	got := []string{"v1.10.0", "v1.9.0", "v1.2.0-rc1", "v1.2.0", "v2", "v1.02.1", "latest", "v1.9.10", "v1.9.9"}
	slices.SortStableFunc(got, oci.CompareTags)
	want := []string{"latest", "v1.2.0", "v1.2.0-rc1", "v1.02.1", "v1.9.0", "v1.9.9", "v1.9.10", "v1.10.0", "v2"}
	if !slices.Equal(got, want) {
		t.Errorf("sorted %q, want %q", got, want)
	}
	for _, tt := range []struct {
		a, b string
		want int
	}{{"v1.9", "v1.10", -1}, {"v1.10", "v1.9", 1}, {"a", "a", 0}, {"v01", "v1", 0}} {
		if got := oci.CompareTags(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareTags(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
