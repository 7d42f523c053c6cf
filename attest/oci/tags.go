package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/internal/textsafe"
)

// Bounds of a tag listing.
const (
	// MaxTags is the most tags Tags lists.
	MaxTags = 10_000
	// maxTagsPage is the largest page of the tag list read.
	maxTagsPage = 1 << 20
	// maxTagsPages is the most pages followed.
	maxTagsPages = 100
)

// referrersTag matches the OCI tag schema's referrer index tags
// (sha256-<hex>), which name no release.
var referrersTag = lazyregexp.New(`^sha(256|512)-[0-9a-f]{64,128}$`)

// Tags lists the tags of the repository repo (REGISTRY/NAME) over the
// distribution API, following its pages, with the same transport,
// credentials and timeouts as Verify. The OCI tag schema's referrer
// tags (sha256-<hex>) are left out. The tags come sorted by
// CompareTags. A repository of more than MaxTags tags is an error.
func Tags(ctx context.Context, repo string, opts ...Option) ([]string, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(repo, LayoutPrefix) {
		return nil, fmt.Errorf("%s: listing tags needs a registry repository (REGISTRY/NAME), not a layout", textsafe.Line(repo))
	}
	if strings.ContainsAny(repo, "@") || strings.Count(repo[strings.LastIndex(repo, "/")+1:], ":") > 0 {
		return nil, fmt.Errorf("%s: expected a repository (REGISTRY/NAME) without a tag or digest", textsafe.Line(repo))
	}
	ctx, cancel := o.withDeadline(ctx, timeoutSource(repo, o))
	defer cancel()
	tags, err := listTags(ctx, repo, o)
	return tags, timedOut(ctx, err)
}

func listTags(ctx context.Context, repo string, o *options) ([]string, error) {
	src, err := openRegistry(ctx, repo, o)
	if err != nil {
		return nil, err
	}
	var tags []string
	next := fmt.Sprintf("/v2/%s/tags/list?n=1000", src.repo.RepositoryStr())
	for page := 0; next != ""; page++ {
		if page == maxTagsPages {
			return nil, fmt.Errorf("the tags of %s run to more than %d pages", src.name(), maxTagsPages)
		}
		resp, err := src.getPath(ctx, next, "application/json")
		if err != nil {
			return nil, fmt.Errorf("listing the tags of %s: %w", src.name(), err)
		}
		if err := transport.CheckError(resp, http.StatusOK); err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("listing the tags of %s: %w", src.name(), err)
		}
		b, err := readLimited(resp.Body, maxTagsPage, "tag list")
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("listing the tags of %s: %w", src.name(), err)
		}
		var list struct {
			Tags []string `json:"tags"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("listing the tags of %s: the registry's tag list: %w", src.name(), err)
		}
		for _, t := range list.Tags {
			if referrersTag.MatchString(t) {
				continue
			}
			if len(tags) == MaxTags {
				return nil, fmt.Errorf("%s has more than %d tags, the most one listing reads\nhint: --since or --limit do not bound the listing; ask for a repository of releases", src.name(), MaxTags)
			}
			tags = append(tags, t)
		}
		next = nextPage(resp.Header.Get("Link"))
	}
	sort.SliceStable(tags, func(i, j int) bool { return CompareTags(tags[i], tags[j]) < 0 })
	return tags, nil
}

// CompareTags orders release tags as versions: runs of digits compare
// as numbers (v1.10 after v1.9), the rest byte by byte.
func CompareTags(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmpInt(int(a[0]), int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmpInt(len(a), len(b))
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
