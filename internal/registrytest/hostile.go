package registrytest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ServeInProcess is StartInProcess for benchmarks: it returns the
// registry's host:port and the function that stops it.
func ServeInProcess(wrap func(http.Handler) http.Handler) (string, func()) {
	var h http.Handler = registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	s := httptest.NewServer(h)
	return strings.TrimPrefix(s.URL, "http://"), s.Close
}

// Junk adds junk referrers to a registry's referrers list of one
// manifest: a third listed as SPDX SBOMs and a third listed as 4 MiB
// manifests (a reader can drop both unread), a third listed with the
// empty config's artifactType, as go-containerregistry's registry lists
// every artifact (a reader must fetch those to see): half are small
// manifests of another artifactType, half 60 KB that do not match their
// digest. It counts what was fetched.
type Junk struct {
	n       int
	subject string
	byHex   map[string]int
	listed  []v1.Descriptor

	// Fetched counts junk manifests served, Unfit those of them whose
	// listing showed they are not bundles.
	Fetched, Unfit atomic.Int64
	// MaxInFlight is the most junk manifests requested at once.
	MaxInFlight atomic.Int64
	inFlight    atomic.Int64
}

// NewJunk makes n junk referrers of the manifest with digest subject.
func NewJunk(n int, subject string) *Junk {
	j := &Junk{n: n, subject: subject, byHex: map[string]int{}}
	for i := range n {
		d := v1.Descriptor{MediaType: types.OCIManifestSchema1}
		body := j.body(i)
		d.Size = int64(len(body))
		switch i % 3 {
		case 0:
			d.ArtifactType = "application/spdx+json"
		case 1:
			d.Size = 4 << 20
		case 2:
			d.ArtifactType = "application/vnd.oci.empty.v1+json"
		}
		sum := sha256.Sum256(body)
		if i%6 == 5 {
			sum = sha256.Sum256([]byte("not the body " + strconv.Itoa(i)))
		}
		d.Digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
		j.byHex[d.Digest.Hex] = i
		j.listed = append(j.listed, d)
	}
	return j
}

// Fetchable is how many junk referrers a reader has to fetch: those
// listed with the empty config's artifactType.
func (j *Junk) Fetchable() int { return j.n / 3 }

// body is junk referrer i's manifest.
func (j *Junk) body(i int) []byte {
	pad := ""
	if i%6 == 5 {
		pad = strings.Repeat("x", 60_000)
	}
	return fmt.Appendf(nil, `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.example.junk","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[],"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":%q,"size":1},"annotations":{"n":"%d","pad":"%s"}}`, j.subject, i, pad)
}

// Wrap serves the junk around a registry's handler: the referrers list
// of the subject is the registry's with the junk appended, and each
// junk manifest is made when asked for.
func (j *Junk) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, id, _ := strings.Cut(r.URL.Path, "/manifests/sha256:")
		if i, ok := j.byHex[id]; ok && r.Method == http.MethodGet {
			n := j.inFlight.Add(1)
			defer j.inFlight.Add(-1)
			for m := j.MaxInFlight.Load(); n > m && !j.MaxInFlight.CompareAndSwap(m, n); m = j.MaxInFlight.Load() {
			}
			j.Fetched.Add(1)
			if i%3 != 2 {
				j.Unfit.Add(1)
			}
			time.Sleep(time.Millisecond) // so that requests overlap
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
			_, _ = w.Write(j.body(i))
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/referrers/"+j.subject) {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var idx v1.IndexManifest
		if err := json.Unmarshal(rec.Body.Bytes(), &idx); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", string(types.OCIImageIndex))
		bw := bufio.NewWriter(w)
		_, _ = bw.WriteString(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[`)
		enc := json.NewEncoder(bw)
		for k, d := range append(idx.Manifests, j.listed...) {
			if k > 0 {
				_ = bw.WriteByte(',')
			}
			_ = enc.Encode(d)
		}
		_, _ = bw.WriteString("]}")
		_ = bw.Flush()
	})
}

// Stub is a registry that serves one manifest under every tag and
// digest, no referrers, and an endless stream for every blob, counting
// the blob bytes it sent.
type Stub struct {
	// Host is its host:port on 127.0.0.1.
	Host string
	// Served counts the blob bytes sent.
	Served   atomic.Int64
	manifest []byte
}

// ServeStub starts a Stub serving manifest and returns it with the
// function that stops it.
func ServeStub(manifest []byte) (*Stub, func()) {
	s := &Stub{manifest: manifest}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == "/v2/":
		case strings.Contains(p, "/manifests/"):
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
			_, _ = w.Write(s.manifest)
		case strings.Contains(p, "/referrers/"):
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			_, _ = w.Write([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`))
		case strings.Contains(p, "/blobs/"):
			chunk := bytes.Repeat([]byte{'x'}, 64<<10)
			for r.Context().Err() == nil {
				n, err := w.Write(chunk)
				s.Served.Add(int64(n))
				if err != nil {
					return
				}
			}
		default:
			http.NotFound(w, r)
		}
	}))
	s.Host = strings.TrimPrefix(srv.URL, "http://")
	return s, srv.Close
}

// ServeTrickle starts a registry that answers /v2/ and then sends every
// other answer one byte every gap, or with gap 0 never answers; it
// returns its host:port and the function that stops it.
func ServeTrickle(gap time.Duration) (string, func()) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		if gap == 0 {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte(" ")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
	}))
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close
}

// LyingHeader is a ResponseWriter that sends Digest as every response's
// Docker-Content-Digest.
type LyingHeader struct {
	http.ResponseWriter
	Digest string
}

// WriteHeader implements http.ResponseWriter.
func (w LyingHeader) WriteHeader(code int) {
	w.Header().Set("Docker-Content-Digest", w.Digest)
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w LyingHeader) Write(b []byte) (int, error) {
	w.Header().Set("Docker-Content-Digest", w.Digest)
	return w.ResponseWriter.Write(b)
}
