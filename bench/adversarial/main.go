// Command adversarial is gpuattest's adversarial campaign: it generates
// hostile inputs from a fixed seed, runs gpuattest on each as a child
// process (bin/gpuattest or -gpuattest BIN), and checks the outcome:
//
//   - bundles: byte flips in a signed bundle's payload, signature and
//     verification material, re-encoded statements (subjects, predicate
//     type, predicate fields), statements signed by the right key that a
//     policy or the artifacts refute, swapped lines, duplicates,
//     truncations, a 100k-line JSONL, a wrong key and changed artifacts.
//     Every change to signed content or an artifact is refused with exit
//     10, 11 or 12; what changes nothing signed (an advisory key hint, a
//     repeated line) verifies.
//   - pipelines: alias bombs, deep nesting, 10 MB files, non-UTF-8 and
//     terminal escapes, step ids and paths that escape the root, output
//     symlinks that escape, results with NaN/Inf, duplicate keys, huge
//     arrays, JUnit with entity expansion or two roots, duplicate case
//     names. Each is refused with a message naming the file and position
//     (or the step), and nothing outside the run directory changes.
//   - registry: releases served by registries on 127.0.0.1 that lie:
//     another signed release's manifest under the pinned digest, a
//     Docker-Content-Digest that is not the manifest's, a layout whose
//     blob or index.json entry holds another release, a 1 GiB layer with
//     no bundles, a layer over --max-layer-size, 25,000 junk referrers,
//     a registry that trickles a byte every 3 s or every 100 ms. Each lie
//     is refused naming both digests (or the host and the timeout), no
//     layer byte is fetched without a verified bundle naming the
//     manifest, and the junk verifies within the peak RSS goal.
//   - documents: fleet.json and run.json with an unknown field, a
//     duplicate key, a value of the wrong type or nesting past the bound
//     are refused by fleet collect and report, naming the file and the
//     problem (issue 32).
//   - secrets: values of *_TOKEN, *_SECRET*, *PASSWORD* and AWS_*
//     variables, from the host and from step env, never appear in
//     run.json, the attestations, report.html or the Markdown report.
//   - crash: kill -9 at random points of a signed run; run.json parses,
//     --resume completes, and no attestation claims a step that did not
//     pass.
//   - resume: run.json and result copies edited between a failed run and
//     its signed resume are refused, with the step named.
//   - key: the signing key and its password are out of every step's
//     reach.
//   - standard: the in-toto test-result statements of a signed run whose
//     exec or other test step failed, or that ran on a simulated GPU,
//     are refused by docs/examples/test-result-policy.yaml, and none of
//     them says PASSED.
//   - fleet: on a real Slurm with two real users, a stand-in binary, a
//     re-signed or rolled-back dispatch, another job's run directory, a
//     swapped dispatch directory and a hostile step file are each refused
//     by the node or the coordinator (issue 30).
//
// For the bundles, pipelines, compare, registry and documents categories, every
// call must also answer within the goals of inputs of at most 10 MB:
// peak RSS 256 MiB and 2 s of CPU (the 25,000 referrers: the RSS goal
// only). It prints a table per category (cases, right, wrong, max peak
// RSS, max CPU) and exits 1 when a case is wrong. Run from the module
// root:
//
//	go run ./bench/adversarial [-long] [-seed N] [-gpuattest BIN] [-only CATEGORY] [-v]
//
// The short mode is what CI runs (TestCampaign, under three minutes on
// two cores); -long multiplies the cases (20 kills instead of 5).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if os.Getenv(spawnerEnv) == "1" {
		if err := serveSpawner(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench/adversarial spawner: %v\n", err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	flag.BoolVar(&cfg.long, "long", false, "the long campaign (many more cases, 20 kills)")
	flag.Uint64Var(&cfg.seed, "seed", 14, "seed of the generated cases")
	flag.StringVar(&cfg.bin, "gpuattest", "", "gpuattest binary (default: go build ./cmd/gpuattest)")
	only := flag.String("only", "", "comma-separated categories to run (default: all)")
	flag.BoolVar(&cfg.verbose, "v", false, "print every case")
	flag.Parse()
	if *only != "" {
		cfg.only = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tables, err := campaign(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench/adversarial: %v\n", err)
		os.Exit(1)
	}
	if wrong := tables.wrong(); wrong > 0 {
		fmt.Fprintf(os.Stderr, "bench/adversarial: %d wrong case(s)\n", wrong)
		os.Exit(1)
	}
}
