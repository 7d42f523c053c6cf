package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"text/tabwriter"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newLockCmd) }

// lockReport is the -o json output of gpuattest lock.
type lockReport struct {
	Pipeline string                 `json:"pipeline"`
	Lock     string                 `json:"lock"`
	Written  bool                   `json:"written"`
	Changes  []run.LockChange       `json:"changes,omitempty"`
	Problems []runtypes.LockProblem `json:"problems,omitempty"`
	OK       bool                   `json:"ok"`
}

func newLockCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "lock FILE",
		Short: "Pin every image of a pipeline to digests in gpuattest.lock",
		Long: "lock resolves every image of the pipeline (registry tag, oci-layout:PATH or\n" +
			"docker-archive:PATH) to its index and linux/amd64 manifest digests and writes\n" +
			"them to gpuattest.lock beside the pipeline. Existing entries are kept unless\n" +
			"--update; entries of images the pipeline dropped are removed.\n\n" +
			"With --check nothing is written: lock runs the release gate instead (floating\n" +
			"tags without an entry, a stale lock, digests the source no longer serves, tags\n" +
			"that moved) and exits 1 when it refuses.",
		Args: cobra.ExactArgs(1),
	}
	out := outputFlag(c)
	update := c.Flags().Bool("update", false, "re-resolve every image, replacing existing entries")
	check := c.Flags().Bool("check", false, "only check the lock against the pipeline and the image sources; write nothing")
	platform := c.Flags().String("platform", run.DefaultPlatform, "platform to resolve multi-platform indexes for")
	root := rootFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		if *update && *check {
			return usageErr("--update and --check exclude each other")
		}
		if pl, err := v1.ParsePlatform(*platform); err != nil || pl.OS == "" || pl.Architecture == "" {
			return usageErr("--platform %q: expected os/arch such as linux/amd64", *platform)
		}
		file := args[0]
		p, err := loadPipeline(file, *root)
		if err != nil {
			var probs pipeline.Problems
			if errors.As(err, &probs) {
				return withCode(exitFailed, fmt.Errorf("%w\nhint: fix the pipeline (gpuattest lint %s) before locking it", err, file))
			}
			return withCode(exitUsage, err)
		}
		lockPath := run.LockPath(file)
		existing, err := run.ReadLock(lockPath)
		if errors.Is(err, fs.ErrNotExist) {
			existing, err = nil, nil
		}
		if err != nil && !*update {
			return withCode(exitFailed, err)
		}
		if err != nil { // --update rewrites a broken lock
			fmt.Fprintf(c.ErrOrStderr(), "gpuattest: replacing an invalid lock: %v\n", err)
			existing = nil
		}
		rep := lockReport{Pipeline: file, Lock: lockPath}
		if *check {
			return lockCheck(c, *out, p, existing, *platform, rep)
		}
		return lockWrite(c, *out, p, existing, *update, *platform, rep)
	}
	return c
}

// lockCheck runs the release gate of lock --check and renders it.
func lockCheck(c *cobra.Command, out string, p *pipeline.Pipeline, existing *run.Lock, platform string, rep lockReport) error {
	w := c.OutOrStdout()
	rep.Problems = run.CheckLock(c.Context(), p, existing, rep.Pipeline, platform)
	rep.OK = len(rep.Problems) == 0
	if out == "json" {
		if err := writeJSON(w, rep); err != nil {
			return err
		}
	} else {
		for _, pr := range rep.Problems {
			fmt.Fprintln(w, pr.String())
		}
		if rep.OK {
			fmt.Fprintf(w, "%s: ok (%d image%s locked and served)\n", rep.Lock, len(p.Images), plural(len(p.Images)))
		} else {
			fmt.Fprintf(c.ErrOrStderr(), "%d problem%s found\n", len(rep.Problems), plural(len(rep.Problems)))
		}
	}
	if !rep.OK {
		return silentExit(exitFailed)
	}
	return nil
}

// lockWrite resolves the pipeline's images, writes the lock when it
// changed and renders what changed.
func lockWrite(c *cobra.Command, out string, p *pipeline.Pipeline, existing *run.Lock, update bool, platform string, rep lockReport) error {
	w := c.OutOrStdout()
	lock, changes, err := run.LockImages(c.Context(), p, existing, update, rep.Pipeline, platform)
	rep.Changes = changes
	if err != nil {
		return withCode(exitFailed, fmt.Errorf("locking %s: %w\nhint: %s was not changed", rep.Pipeline, err, rep.Lock))
	}
	data, err := lock.Marshal()
	if err != nil {
		return err
	}
	if old, rerr := os.ReadFile(rep.Lock); rerr != nil || !bytes.Equal(old, data) {
		if err := lock.Write(rep.Lock); err != nil {
			return withCode(exitFailed, err)
		}
		rep.Written = true
	}
	rep.OK = true
	if out == "json" {
		return writeJSON(w, rep)
	}
	if len(changes) == 0 {
		fmt.Fprintf(w, "%s declares no images\n", rep.Pipeline)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(changes) > 0 {
		fmt.Fprintln(tw, "IMAGE\tACTION\tREFERENCE\tPINNED")
	}
	for _, ch := range changes {
		pinned := ch.Entry.ManifestDigest
		if pe, perr := ch.Entry.Pinned(); perr == nil {
			pinned = pe.String()
		}
		if ch.Action == "removed" {
			pinned = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", textsafe.Line(ch.Name), ch.Action, textsafe.Line(ch.Entry.Reference), textsafe.Line(pinned))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Written {
		fmt.Fprintf(w, "wrote %s (%d image%s)\n", rep.Lock, len(lock.Images), plural(len(lock.Images)))
	} else {
		fmt.Fprintf(w, "%s is up to date\n", rep.Lock)
	}
	return nil
}
