package gpuevidence

import (
	"os"
	"strings"
	"testing"
)

// TestCanonicalize checks the canonical form against the rules of
// Canonical XML 1.1 (the cases are the spec's section 3 examples, cut to
// what a RIM may hold).
func TestCanonicalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"declaration and whitespace outside the element dropped, empty element expanded",
			"<?xml version=\"1.0\"?>\n<doc/>\n", "<doc></doc>"},
		{"attributes sorted, unqualified first, then by namespace URI",
			`<e xmlns:b="http://b" xmlns:a="http://a" z="1" b:y="2" a:x="3" a="4"/>`,
			`<e xmlns:a="http://a" xmlns:b="http://b" a="4" z="1" a:x="3" b:y="2"></e>`},
		{"superfluous namespace declarations dropped",
			`<a xmlns="http://d" xmlns:p="http://p"><b xmlns="http://d" xmlns:p="http://p"><p:c/></b></a>`,
			`<a xmlns="http://d" xmlns:p="http://p"><b><p:c></p:c></b></a>`},
		{"a changed default namespace kept, an emptied one undone",
			`<a xmlns="http://d"><b xmlns="http://e"/><c xmlns=""/></a>`,
			`<a xmlns="http://d"><b xmlns="http://e"></b><c xmlns=""></c></a>`},
		{"character and attribute escaping, CDATA as text",
			`<a v="&lt;&amp;&quot;'>">x &gt; y &amp; <![CDATA[<z>]]> &#xD;</a>`,
			`<a v="&lt;&amp;&quot;'>">x &gt; y &amp; &lt;z&gt; &#xD;</a>`},
		{"comments dropped", `<a><!-- c --><b/></a>`, `<a><b></b></a>`},
		{"line ends normalized", "<a>x\r\ny</a>", "<a>x\ny</a>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, err := parseXML([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(canonicalize(root, nil)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	// A subset: the apex gets every namespace in scope.
	root, err := parseXML([]byte(`<r xmlns="http://d" xmlns:p="http://p"><s xmlns:q="http://q"><p:t/></s></r>`))
	if err != nil {
		t.Fatal(err)
	}
	s := root.children[0].elem
	if got, want := string(canonicalize(s, nil)), `<s xmlns="http://d" xmlns:p="http://p" xmlns:q="http://q"><p:t></p:t></s>`; got != want {
		t.Errorf("subset: got %s, want %s", got, want)
	}
}

// TestParseXMLRefuses: what the canonical form of a RIM cannot hold
// faithfully is refused, not approximated.
func TestParseXMLRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>`, "DTD"},
		{`<a><?pi x?></a>`, "processing instruction"},
		{`<a xml:lang="en"/>`, "xml:lang"},
		{"<a v=\"x\ny\"/>", "tab or line break"},
		{`<a><b></a>`, "XML"},
		{`<p:a/>`, "XML"},
		{`<a/><b/>`, "XML"},
		{`<a>` + strings.Repeat("<b>", 40) + strings.Repeat("</b>", 40) + `</a>`, "levels"},
	} {
		if _, err := parseXML([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseXML(%.40q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseRIM: no input panics the RIM reader or its verification.
func FuzzParseRIM(f *testing.F) {
	for _, p := range []string{nvidiaUnit + "NV_GPU_DRIVER_GH100_550.144.03.xml", "testdata/nvtrust/1010_0205_862_96005E0004_PROD.swidtag"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRIM("fuzz", b)
		if err != nil {
			return
		}
		_ = r.Verify(NVIDIARIMRoot(), rimAt)
	})
}

// TestParseFile checks the serialized form's strictness.
func TestParseFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`[]`, "no GPU evidence"},
		{`{}`, "expected"},
		{`[{"arch":"HOPPER","nonce":"","evidence":"","certificate":"","extra":1}]`, `unknown field "extra"`},
		{`[{"arch":"HOPPER","nonce":""}]`, "evidence"},
		{`[{"arch":"HOPPER","arch":"HOPPER","nonce":"","evidence":"","certificate":""}]`, "arch"},
	} {
		if _, err := ParseFile("e.json", []byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFile(%s) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	if _, err := ParseFile("e.json", make([]byte, MaxFileBytes+1)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized file: %v", err)
	}
	// Items that do not decode fail as GPUs, named, not as the file.
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rep := v.VerifyItems(t.Context(), []Item{{Arch: "VOLTA"}, {Arch: ArchHopper, Evidence: "!", Certificate: "eA=="}}, Nonce{})
	if err := rep.Err(); err == nil || !strings.Contains(err.Error(), `GPU 0: GPU evidence failed: arch "VOLTA"`) || !strings.Contains(err.Error(), "GPU 1: GPU evidence failed: evidence: not base64") {
		t.Errorf("Err() = %v", err)
	}
}
