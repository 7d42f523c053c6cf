package report_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/reportfixture"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// requestLog is an HTTP proxy on 127.0.0.1 that records the first line
// of every request a browser sends through it and answers none.
type requestLog struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
}

func newRequestLog(t *testing.T) *requestLog {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &requestLog{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				rl.mu.Lock()
				rl.lines = append(rl.lines, strings.TrimSpace(line))
				rl.mu.Unlock()
			}()
		}
	}()
	return rl
}

// pageRequests are the requests other than the browser's own background
// traffic (update checks, time, accounts on Google's hosts).
func (rl *requestLog) pageRequests() []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	own := regexp.MustCompile(`(?:^|[ /.])(?:[a-z0-9-]+\.)*(?:google\.com|googleapis\.com|gvt1\.com|gstatic\.com)(?::\d+)?[/ ]`)
	var out []string
	for _, l := range rl.lines {
		if !own.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

func (rl *requestLog) reset() {
	rl.mu.Lock()
	rl.lines = nil
	rl.mu.Unlock()
}

// chromium runs headless chromium on a file with args, every request
// through proxy, and returns its stdout.
func chromium(t *testing.T, bin, proxy string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	base := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--proxy-server=http://" + proxy, "--virtual-time-budget=2000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestReportInBrowser renders report.html in a real browser (Debian's
// chromium, headless): its DOM holds every section and every chart, no
// element refers to anything outside the file, and the browser sends no
// request for it. A control page with one external image shows that
// the check sees a page's requests. The screenshots go to
// $GPUATTEST_REPORT_SHOTS when set, to be looked at.
func TestReportInBrowser(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		testenv.Missing(t, "chromium is not installed, so report.html was NOT checked in a browser (apt-get install chromium)")
	}
	dir := t.TempDir()
	rep := fixtureReport(t, reportfixture.Options{Samples: 200, Telemetry: 15 * time.Minute, GPUs: 2})
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(dir, "control.html")
	if err := os.WriteFile(control, []byte(`<!DOCTYPE html><html><body><img src="http://report-control.invalid/x.png">control</body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := newRequestLog(t)

	dom := string(chromium(t, bin, proxy.ln.Addr().String(), "--dump-dom", "file://"+page))
	if got := proxy.pageRequests(); len(got) != 0 {
		t.Errorf("the browser sent requests for report.html: %q", got)
	}
	for _, sec := range []string{"verdict", "hardware", "timeline", "build", "benchmarks", "burnin", "telemetry", "attestation"} {
		if !strings.Contains(dom, `data-section="`+sec+`"`) {
			t.Errorf("the rendered DOM has no %s section", sec)
		}
	}
	charts := map[string]int{"timeline": 1, "benchmark": 3, "burnin": 3, "telemetry": 3}
	for kind, want := range charts {
		re := regexp.MustCompile(`<figure[^>]*data-chart="` + kind + `"[^>]*>\s*<svg class="chart"`)
		if got := len(re.FindAllString(dom, -1)); got != want {
			t.Errorf("%d %s charts with an inline SVG in the DOM, want %d", got, kind, want)
		}
	}
	if !strings.Contains(dom, `http-equiv="Content-Security-Policy" content="default-src 'none'`) {
		t.Error("the DOM has no Content-Security-Policy of default-src 'none'")
	}
	// Nothing in the DOM points outside the file (xmlns is a name, not a
	// request).
	ext := regexp.MustCompile(`(?i)\b(?:src|href|xlink:href|action|poster|srcset)\s*=|url\(|@import|<script|<link|<iframe|<object|<embed`)
	if m := ext.FindAllString(dom, 5); len(m) > 0 {
		t.Errorf("the DOM refers to resources: %q", m)
	}

	shots := os.Getenv("GPUATTEST_REPORT_SHOTS")
	if shots == "" {
		shots = dir
	}
	png := filepath.Join(shots, "report.png")
	chromium(t, bin, proxy.ln.Addr().String(), "--window-size=1280,4600", "--screenshot="+png, "file://"+page)
	if st, err := os.Stat(png); err != nil || st.Size() < 50<<10 {
		t.Errorf("screenshot %s: %v (size %d)", png, err, st.Size())
	}
	if got := proxy.pageRequests(); len(got) != 0 {
		t.Errorf("the browser sent requests for report.html: %q", got)
	}

	proxy.reset()
	chromium(t, bin, proxy.ln.Addr().String(), "--dump-dom", "file://"+control)
	if got := proxy.pageRequests(); len(got) != 1 || !strings.Contains(got[0], "report-control.invalid") {
		t.Errorf("control page: requests %q, want the one for report-control.invalid (the check would miss a request)", got)
	}
}
