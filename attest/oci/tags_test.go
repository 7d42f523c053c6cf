package oci_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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

// TestTagsPages: Tags follows the registry's Link pages, leaves out the
// tag schema's referrer tags and orders the rest as versions; a tag list
// that is not JSON is an error naming the repository.
func TestTagsPages(t *testing.T) {
	t.Parallel()
	pages := map[string]string{
		"":     `{"name":"k","tags":["v1.10","sha256-` + strings.Repeat("a", 64) + `","v1.9"]}`,
		"v1.9": `{"name":"k","tags":["v1.2"]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case r.URL.Path == "/v2/k/tags/list":
			last := r.URL.Query().Get("last")
			if last == "" {
				w.Header().Set("Link", `</v2/k/tags/list?n=1000&last=v1.9>; rel="next"`)
			}
			fmt.Fprint(w, pages[last])
		case r.URL.Path == "/v2/bad/tags/list":
			fmt.Fprint(w, "<html>")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	got, err := oci.Tags(t.Context(), host+"/k")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"v1.2", "v1.9", "v1.10"}; !slices.Equal(got, want) {
		t.Errorf("tags %q, want %q", got, want)
	}
	if _, err := oci.Tags(t.Context(), host+"/bad"); err == nil || !strings.Contains(err.Error(), "tag list") {
		t.Errorf("a tag list that is not JSON: err = %v", err)
	}
	for _, repo := range []string{host + "/k:v1", host + "/k@sha256:" + strings.Repeat("a", 64), "oci-layout:/tmp/x"} {
		if _, err := oci.Tags(t.Context(), repo); err == nil {
			t.Errorf("Tags(%q): no error, want one (not a repository)", repo)
		}
	}
}
