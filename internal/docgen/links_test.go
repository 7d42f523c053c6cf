package docgen

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#+ (.*)$`)
)

// TestDocLinks: every relative link of README.md, bench/README.md and
// docs/ names a file that exists and, with a #fragment, a heading of it
// (the reference moved out of README.md into docs/, and pages link into
// each other).
func TestDocLinks(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pages := []string{filepath.Join(root, "README.md"), filepath.Join(root, "bench", "README.md")}
	for _, glob := range []string{"docs/*.md", "docs/cli/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	if len(pages) < 15 {
		t.Fatalf("found %d pages, want README.md and docs/", len(pages))
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), path)
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				if _, serr := os.Stat(target); serr == nil {
					continue // a directory
				}
				t.Errorf("%s: link %s: no such file", page, link)
				continue
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !hasHeading(tb, frag) {
				t.Errorf("%s: link %s: no heading #%s in %s", page, link, frag, target)
			}
		}
	}
}

// hasHeading reports whether the Markdown page b has a heading whose
// GitHub anchor is frag.
func hasHeading(b []byte, frag string) bool {
	for _, m := range mdHeading.FindAllSubmatch(b, -1) {
		if anchor(string(m[1])) == frag {
			return true
		}
	}
	return false
}

// anchor is GitHub's anchor of a heading: lowercase, spaces to hyphens,
// punctuation other than hyphens and underscores dropped.
func anchor(h string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			sb.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}
