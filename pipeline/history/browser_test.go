package history_test

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

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// checkPage checks the history page in headless chromium (as
// pipeline/report's browser test does): every section and every series
// chart is in the rendered DOM, with its CI band, median line and the
// step markers naming both digests; nothing in it refers outside the
// file, and the browser sends no request for it.
func checkPage(t *testing.T, page []byte, manifests map[string]string) {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		testenv.Missing(t, "chromium is not installed, so the history page was NOT checked in a browser (apt-get install chromium)")
	}
	file := filepath.Join(t.TempDir(), "history.html")
	if err := os.WriteFile(file, page, 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := newRequestLog(t)
	dom := string(chromium(t, bin, proxy.ln.Addr().String(), "--dump-dom", "file://"+file))
	if got := proxy.pageRequests(); len(got) != 0 {
		t.Errorf("the browser sent requests for the history page: %q", got)
	}
	for _, sec := range []string{"summary", "excluded", "series", "releases"} {
		if !strings.Contains(dom, `data-section="`+sec+`"`) {
			t.Errorf("the rendered DOM has no %s section", sec)
		}
	}
	charts := regexp.MustCompile(`<figure data-chart="series">\s*<figcaption>[^<]*(?:<span[^>]*>SIMULATED</span>)?</figcaption>\s*<svg class="chart"`)
	if got := len(charts.FindAllString(dom, -1)); got != 4 {
		t.Errorf("%d series charts with an inline SVG in the DOM, want 4", got)
	}
	for role, want := range map[string]int{"ci-band": 4, "median": 4, "step-marker": 2} {
		if got := strings.Count(dom, `data-role="`+role+`"`); got != want {
			t.Errorf("%d %s elements in the DOM, want %d", got, role, want)
		}
	}
	if !strings.Contains(dom, "v1.9") || !strings.Contains(dom, manifests["v1.6"]+" → "+manifests["v1.7"]) {
		t.Error("the DOM does not name the release left out and the marked step's two digests")
	}
	if !strings.Contains(dom, `http-equiv="Content-Security-Policy" content="default-src 'none'`) {
		t.Error("the DOM has no Content-Security-Policy of default-src 'none'")
	}
	ext := regexp.MustCompile(`(?i)\b(?:src|href|xlink:href|action|poster|srcset)\s*=|url\(|@import|<script|<link|<iframe|<object|<embed`)
	if m := ext.FindAllString(dom, 5); len(m) > 0 {
		t.Errorf("the DOM refers to resources: %q", m)
	}
	if shots := os.Getenv("GPUATTEST_REPORT_SHOTS"); shots != "" {
		chromium(t, bin, proxy.ln.Addr().String(), "--window-size=1100,2400", "--screenshot="+filepath.Join(shots, "history.png"), "file://"+file)
	}
}

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
// traffic (update checks on Google's hosts).
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

// chromium runs headless chromium with args, every request through
// proxy, and returns its stdout.
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
