package report_test

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/gpuattest/gpuattest/internal/reportfixture"
)

// allowedTags are every element the report's template and its SVG charts
// use: anything else in the output came from content.
var allowedTags = map[string]bool{
	"html": true, "head": true, "meta": true, "title": true, "style": true, "body": true, "header": true, "footer": true,
	"h1": true, "h2": true, "h3": true, "p": true, "div": true, "span": true, "b": true, "code": true, "ul": true, "li": true,
	"section": true, "table": true, "tr": true, "th": true, "td": true, "figure": true, "figcaption": true,
	"svg": true, "g": true, "path": true, "text": true,
}

// checkInert parses page and fails on any element, attribute or URL that
// content could have smuggled in: only the template's elements, no event
// handler attributes, no reference to a resource, one style element.
func checkInert(t *testing.T, page []byte) {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(page))
	styles := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		if !allowedTags[tok.Data] {
			t.Fatalf("element <%s> in the report: content became markup", tok.Data)
		}
		if tok.Data == "style" {
			if styles++; styles > 1 {
				t.Fatal("a second <style> element: content became markup")
			}
		}
		for _, a := range tok.Attr {
			k := strings.ToLower(a.Key)
			switch {
			case strings.HasPrefix(k, "on"), k == "src", k == "href", k == "xlink:href", k == "action", k == "formaction", k == "srcset":
				t.Fatalf("attribute %s=%q on <%s>: content became markup", a.Key, a.Val, tok.Data)
			case k == "http-equiv" && !strings.EqualFold(a.Val, "Content-Security-Policy"):
				t.Fatalf("meta http-equiv=%q: content became markup", a.Val)
			case k == "style" && (strings.Contains(strings.ToLower(a.Val), "url(") || strings.Contains(a.Val, "@import") || strings.Contains(strings.ToLower(a.Val), "expression(")):
				t.Fatalf("style %q on <%s> refers to a resource", a.Val, tok.Data)
			}
		}
	}
}

// FuzzHTMLInert puts arbitrary text into every string a run, its results
// and its hardware record can carry (step ids and reasons, case names,
// device and CPU names, notes, ...) and checks that the HTML report shows
// it as text: no element, attribute or resource reference comes from it.
func FuzzHTMLInert(f *testing.F) {
	for _, s := range []string{
		"<script>alert(1)</script>",
		`"><img src=x onerror=alert(1)>`,
		"'><svg onload=alert(1)>",
		"</style><script>alert(1)</script>",
		"</text></svg><iframe src=//evil.example>",
		"<![CDATA[<script>]]>",
		"javascript:alert(1)",
		"{{.}}{{template \"x\"}}",
		"<meta http-equiv=refresh content=0;url=//evil.example>",
		"<a href=//evil.example>x</a>",
		"&lt;script&gt;",
		"\x00\xff\u2028",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dir := t.TempDir()
		if err := reportfixture.Write(dir, reportfixture.Options{Samples: 12, Telemetry: 20e9, Text: s}); err != nil {
			t.Skip(err) // a string the run files cannot hold
		}
		rep := openReport(t, dir)
		var b bytes.Buffer
		if err := rep.WriteHTML(&b); err != nil {
			t.Fatal(err)
		}
		checkInert(t, b.Bytes())
	})
}
