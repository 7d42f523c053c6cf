package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set by the linker (-X main.version=...); when not,
// they come from the module's build info.
var (
	version = ""
	commit  = ""
)

func init() { verbs = append(verbs, newVersionCmd) }

type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && v.Commit == "" {
				v.Commit = s.Value
			}
			if s.Key == "vcs.modified" && s.Value == "true" && v.Commit != "" && commit == "" {
				v.Commit += "-dirty"
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

func newVersionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
	}
	out := outputFlag(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		v := buildVersion()
		if *out == "json" {
			return writeJSON(c.OutOrStdout(), v)
		}
		_, err := fmt.Fprintf(c.OutOrStdout(), "gpuattest %s\ncommit: %s\ngo: %s\n", v.Version, v.Commit, v.GoVersion)
		return err
	}
	return c
}
