package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated CLI reference in docs/cli")

// cliDocsDir is where the CLI reference is generated, from this package.
const cliDocsDir = "../../docs/cli"

// TestCLIDocs fails when docs/cli, the CLI reference, is not what the
// cobra commands generate (a flag, command or help text changed without
// `go generate ./cmd/gpuattest`, or a page was edited by hand). With
// -update it rewrites docs/cli.
func TestCLIDocs(t *testing.T) {
	t.Parallel()
	want := cliDocs(newRootCmd())
	if *updateDocs {
		if err := os.RemoveAll(cliDocsDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(cliDocsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(cliDocsDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	const hint = "hint: run go generate ./cmd/gpuattest (go test ./cmd/gpuattest -run ^TestCLIDocs$ -update)"
	entries, err := os.ReadDir(cliDocsDir)
	if err != nil {
		t.Fatalf("reading the CLI reference: %v\n%s", err, hint)
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok {
			t.Errorf("docs/cli/%s is no command's page\n%s", e.Name(), hint)
		}
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(cliDocsDir, name))
		if err != nil {
			t.Errorf("docs/cli/%s: %v\n%s", name, err, hint)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("docs/cli/%s is stale\n%s", name, hint)
		}
	}
}

// TestCLIDocsCoverEveryCommand: every command, nested ones included, has
// its page and is linked from its parent's.
func TestCLIDocsCoverEveryCommand(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	docs := cliDocs(root)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		page, ok := docs[cliDocName(c)]
		if !ok {
			t.Errorf("%s has no page", c.CommandPath())
		}
		if c.HasParent() && !bytes.Contains(docs[cliDocName(c.Parent())], []byte("("+cliDocName(c)+")")) {
			t.Errorf("%s's page does not link %s", c.Parent().CommandPath(), c.CommandPath())
		}
		if !bytes.Contains(page, []byte(c.Short)) {
			t.Errorf("%s's page lacks its summary %q", c.CommandPath(), c.Short)
		}
		for _, sub := range documented(c) {
			walk(sub)
		}
	}
	walk(root)
	if len(docs) < 15 {
		t.Errorf("%d pages, want one per command (about 20)", len(docs))
	}
}

// cliDocName is the file name of c's page: gpuattest_key_generate.md.
func cliDocName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

// documented returns c's subcommands that get a page, by name: cobra's
// help and completion commands are left out.
func documented(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && sub.Name() != "help" && sub.Name() != "completion" {
			out = append(out, sub)
		}
	}
	slices.SortFunc(out, func(a, b *cobra.Command) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

// machineDefaults are the flags whose default depends on the machine the
// help is printed on, and what their page says instead, so that the pages
// are the same on every machine.
var machineDefaults = map[string]string{
	"jobs": "the number of CPUs",
}

// cliDocs renders a Markdown page per command under root, by file name.
func cliDocs(root *cobra.Command) map[string][]byte {
	root.InitDefaultHelpFlag()
	docs := map[string][]byte{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if d, ok := machineDefaults[f.Name]; ok {
				f.DefValue = d
			}
		})
		docs[cliDocName(c)] = cliDoc(c)
		for _, sub := range documented(c) {
			walk(sub)
		}
	}
	walk(root)
	return docs
}

// cliDoc renders c's page: summary, usage line, description, flags,
// subcommands and a link up.
func cliDoc(c *cobra.Command) []byte {
	c.InitDefaultHelpFlag()
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- Generated from the cobra commands by go generate ./cmd/gpuattest; do not edit. -->\n\n")
	fmt.Fprintf(&b, "# %s\n\n%s.\n\n", c.CommandPath(), strings.TrimSuffix(c.Short, "."))
	if c.Runnable() {
		fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
	}
	if c.Long != "" {
		fmt.Fprintf(&b, "```text\n%s\n```\n\n", strings.TrimSpace(c.Long))
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "## Examples\n\n```\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
	}
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, "## Flags\n\n```text\n%s```\n\n", flagUsages(fs))
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, "## Flags inherited from parent commands\n\n```text\n%s```\n\n", flagUsages(fs))
	}
	if subs := documented(c); len(subs) > 0 {
		fmt.Fprintf(&b, "## Commands\n\n| command | what it does |\n|---|---|\n")
		for _, sub := range subs {
			fmt.Fprintf(&b, "| [%s](%s) | %s |\n", sub.CommandPath(), cliDocName(sub), sub.Short)
		}
		b.WriteString("\n")
	}
	if c.HasParent() {
		fmt.Fprintf(&b, "See also: [%s](%s).\n", c.Parent().CommandPath(), cliDocName(c.Parent()))
	} else {
		b.WriteString("See also: the [exit codes](../exit-codes.md).\n")
	}
	return b.Bytes()
}

// flagUsages is fs's help, as --help prints it, at a fixed width so that
// the page does not depend on the terminal.
func flagUsages(fs *pflag.FlagSet) string {
	return fs.FlagUsagesWrapped(100)
}
