package report

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// MarkdownOption configures WriteMarkdown.
type MarkdownOption func(*mdOptions) error

type mdOptions struct {
	htmlPath string
}

// WithHTMLPath names the HTML report in the summary's last line.
func WithHTMLPath(path string) MarkdownOption {
	return func(o *mdOptions) error { o.htmlPath = path; return nil }
}

// WriteMarkdown writes a compact summary for pull requests and job
// summaries: the verdict with its warnings, what failed, the steps
// (failures first) and the benchmark verdicts (regressions first). Every
// string from the run is escaped for Markdown and HTML.
func (r *Report) WriteMarkdown(w io.Writer, opts ...MarkdownOption) error {
	var o mdOptions
	for _, f := range opts {
		if err := f(&o); err != nil {
			return err
		}
	}
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	r.mdVerdict(p)
	r.mdFleet(p)
	r.mdSteps(p)
	r.mdBenchmarks(p)
	r.mdBurnins(p)
	r.mdVerification(p)
	if o.htmlPath != "" {
		p("Full report: `%s`\n", strings.ReplaceAll(textsafe.Line(o.htmlPath), "`", "'"))
	}
	return bw.Flush()
}

// mdPrint writes formatted Markdown.
type mdPrint func(format string, args ...any)

// mdVerdict writes the title line, the warnings, the reason and the
// failures.
func (r *Report) mdVerdict(p mdPrint) {
	verdict := strings.ToUpper(r.Verdict.State)
	mark := "❌"
	switch {
	case r.Verdict.Passed && r.Verdict.Warned:
		mark, verdict = "⚠️", "PASSED WITH WARNINGS"
	case r.Verdict.Passed:
		mark, verdict = "✅", "PASSED"
	}
	name := r.Pipeline
	if name == "" {
		name = "attestation"
	}
	p("## %s gpuattest %s: %s\n\n", mark, md(name), verdict)
	for _, wn := range r.Warnings {
		p("> [!WARNING]\n> **%s**\n\n", md(wn))
	}
	if r.Verdict.Reason != "" {
		p("%s\n\n", md(firstLine(r.Verdict.Reason)))
	}
	if len(r.Verdict.Failures) > 0 {
		p("**Failures**\n\n")
		for _, f := range r.Verdict.Failures {
			p("- %s\n", md(f))
		}
		p("\n")
	}
}

// mdFleet writes a fleet run's dispatch: one row per node.
func (r *Report) mdFleet(p mdPrint) {
	f := r.Fleet
	if f == nil {
		return
	}
	state := "every job passed"
	switch {
	case !f.Collected:
		state = "**not collected**: the scheduler's last known states"
	case !f.Passed:
		state = "**failed**"
	}
	p("### Fleet\n\ndispatch `%s`", mdCode(f.Dispatch))
	if f.Cluster != "" {
		p(" on %s", md(f.Cluster))
	}
	p(": %s\n\n| job | class | node | job ID | GPU | verdict | reason |\n|---|---|---|---|---|---|---|\n", state)
	for _, n := range f.Nodes {
		v := md(n.Verdict)
		if n.Verdict != "passed" {
			v = "**" + v + "**"
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", md(n.Job), md(n.Class), dash(md(n.Node)), dash(md(n.JobID)), dash(md(n.GPU)), v, md(firstLine(n.Reason)))
	}
	p("\n")
}

// mdCode makes s safe inside a Markdown code span.
func mdCode(s string) string { return strings.ReplaceAll(textsafe.Line(s), "`", "'") }

// dash is s, or "–" when s is empty.
func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// mdSteps writes the step table, failures first.
func (r *Report) mdSteps(p mdPrint) {
	if len(r.Steps) == 0 {
		return
	}
	steps := append([]Step(nil), r.Steps...)
	sort.SliceStable(steps, func(i, j int) bool { return stepRank(steps[i].State) < stepRank(steps[j].State) })
	p("| step | kind | state | duration | cache |\n|---|---|---|---:|---|\n")
	for _, s := range steps {
		d := "–"
		if s.Duration > 0 {
			d = fmtDur(s.Duration)
		}
		state := md(s.State)
		if stepRank(s.State) == 0 {
			state = "**" + state + "**"
		}
		p("| %s | %s | %s | %s | %s |\n", md(s.ID), md(s.Kind), state, d, md(s.Cache))
	}
	p("\n")
}

// mdBenchmarks writes the benchmark verdict table, regressions first.
func (r *Report) mdBenchmarks(p mdPrint) {
	type row struct {
		step string
		c    BenchCase
		vs   string
	}
	var rows []row
	for _, b := range r.Benchmarks {
		for _, c := range b.Cases {
			rows = append(rows, row{b.Step, c, b.Against})
		}
	}
	if len(rows) == 0 {
		return
	}
	sort.SliceStable(rows, func(i, j int) bool { return verdictRank(rows[i].c) < verdictRank(rows[j].c) })
	p("### Benchmarks\n\n| step | case | verdict | median | against | shift | CI |\n|---|---|---|---:|---|---:|---|\n")
	for _, x := range rows {
		med, v, vs, shift, ci := "–", md(x.c.Status), "–", "–", "–"
		if x.c.Stats != nil {
			med = fmtNS(x.c.Stats.Median)
		}
		if cmp := x.c.Comparison; cmp != nil {
			v = string(cmp.Verdict)
			if cmp.Verdict == stats.Slower || cmp.Verdict == "MISSING" {
				v = "**" + v + "**"
			}
			vs = md(x.vs)
			if x.c.AgainstMedian > 0 {
				vs += " " + fmtNS(x.c.AgainstMedian)
			}
			shift, ci = fmtPct(cmp.Shift.Delta), fmtInterval(cmp.Shift.CI)
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", md(x.step), md(x.c.Name), v, med, vs, shift, ci)
	}
	p("\n")
}

// mdBurnins writes one line per burn-in.
func (r *Report) mdBurnins(p mdPrint) {
	for _, b := range r.Burnins {
		cons, leak := "outputs identical", "no leak"
		if !b.OutputConsistent {
			cons = "**outputs differ**"
		}
		if b.LeakDetected {
			leak = "**leak detected**"
		}
		ran := md(b.Elapsed)
		if b.Requested != "" {
			ran += " of " + md(b.Requested)
		}
		p("**Burn-in %s** (%s): %s, %d iterations, %d failed, %s, %s\n\n", md(b.Step), md(b.State), ran, b.Iterations, b.Failures, cons, leak)
	}
}

// mdVerification writes the criteria of a verified bundle.
func (r *Report) mdVerification(p mdPrint) {
	v := r.Verification
	if v == nil {
		return
	}
	p("**Verification: %s**", md(v.Result))
	if v.Policy != "" {
		p(" (policy %s)", md(v.Policy))
	}
	p("\n\n")
	for _, c := range v.Criteria {
		p("- %s: %s — %s\n", md(c.Check), md(c.Requirement), md(c.Result))
	}
	p("\n")
}

// stepRank orders steps failures first.
func stepRank(state string) int {
	switch state {
	case "failed", "error", "interrupted":
		return 0
	case "skipped", "pending", "running":
		return 1
	}
	return 2
}

// verdictRank orders benchmark cases regressions first.
func verdictRank(c BenchCase) int {
	if c.Status == "failed" || c.Status == "error" {
		return 0
	}
	if c.Comparison == nil {
		return 3
	}
	switch c.Comparison.Verdict {
	case stats.Slower, "MISSING":
		return 0
	case stats.Ambiguous:
		return 1
	}
	return 2
}

// mdReplacer escapes what Markdown or the HTML that Markdown may carry
// would read as markup, and what GitHub would render as math ($) or turn
// into a link (a bare URL, www., an e-mail address): a <span> around
// the character that starts each splits it, as GitHub's documentation
// advises for $.
var mdReplacer = strings.NewReplacer(
	"&", "&amp;", "<", "&lt;", ">", "&gt;",
	`\`, `\\`, "|", `\|`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"#", `\#`, "!", `\!`, "~", `\~`,
	"$", "<span>$</span>", "://", "<span>:</span>//", "www.", "www<span>.</span>", "WWW.", "WWW<span>.</span>", "@", "<span>@</span>",
)

// mdLines keeps a value on one table line.
var mdLines = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// md escapes s for a Markdown line or table cell: line breaks become
// spaces, every other character that could act on a terminal an escape
// (textsafe.Line, as on the terminal), then Markdown's markup is escaped.
func md(s string) string { return mdReplacer.Replace(textsafe.Line(mdLines.Replace(s))) }
