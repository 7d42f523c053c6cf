package oci

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestEachDescriptor(t *testing.T) {
	t.Parallel()
	d := `{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:` + strings.Repeat("a", 64) + `","size":7,"artifactType":"x"}`
	tests := []struct {
		name    string
		index   string
		want    int
		wantErr string
	}{
		{"two", `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[` + d + `,` + d + `]}`, 2, ""},
		{"keys after the list", `{"manifests":[` + d + `],"annotations":{"a":"b"},"schemaVersion":2}`, 1, ""},
		{"null list", `{"schemaVersion":2,"manifests":null}`, 0, ""},
		{"no list", `{"schemaVersion":2}`, 0, ""},
		{"not an object", `[` + d + `]`, 0, "expected {"},
		{"list of strings", `{"manifests":["a"]}`, 0, "decoding image index"},
		{"manifests a number", `{"manifests":3}`, 0, "expected a list"},
		{"truncated", `{"manifests":[` + d, 1, "decoding image index"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			err := eachDescriptor(iotest.OneByteReader(strings.NewReader(tt.index)), func(got v1.Descriptor) error {
				if got.Size != 7 || got.ArtifactType != "x" {
					t.Errorf("descriptor %+v", got)
				}
				n++
				return nil
			})
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if n != tt.want {
				t.Errorf("%d descriptors, want %d", n, tt.want)
			}
		})
	}
	stop := errors.New("stop")
	err := eachDescriptor(strings.NewReader(`{"manifests":[`+d+`,`+d+`]}`), func(v1.Descriptor) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("the callback's error: %v", err)
	}
}

func TestCapReader(t *testing.T) {
	t.Parallel()
	b, err := io.ReadAll(&capReader{r: strings.NewReader("12345"), left: 5, limit: 5, what: "list"})
	if err != nil || string(b) != "12345" {
		t.Errorf("at the limit: %q, %v", b, err)
	}
	_, err = io.ReadAll(&capReader{r: strings.NewReader("123456"), left: 5, limit: 5, what: "list"})
	if err == nil || err.Error() != "list larger than 5 bytes" {
		t.Errorf("over the limit: %v", err)
	}
}

func TestNextPage(t *testing.T) {
	t.Parallel()
	tests := []struct{ link, want string }{
		{``, ``},
		{`</v2/r/referrers/sha256:ab?n=10&last=x>; rel="next"`, `/v2/r/referrers/sha256:ab?n=10&last=x`},
		{`</v2/r/a>; rel="prev", </v2/r/b>; rel="next"`, `/v2/r/b`},
		{`<https://elsewhere.example/v2/r/b>; rel="next"`, ``},
		{`</etc/passwd>; rel="next"`, ``},
		{`</v2/r/b>; rel="prev"`, ``},
	}
	for _, tt := range tests {
		if got := nextPage(tt.link); got != tt.want {
			t.Errorf("nextPage(%q) = %q, want %q", tt.link, got, tt.want)
		}
	}
}
