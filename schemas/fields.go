package schemas

// resultsFields are the constraints and descriptions of the fields of a results file
// that their Go types do not carry, by Go type and JSON name.
var resultsFields = map[string]field{
	"Results.schema":                 {Enum: []any{"https://gpuattest.dev/results/v1"}},
	"Results.tool":                   {MinLength: 1},
	"Results.backend":                {Enum: []any{"cuda", "cpu"}},
	"Results.device_uuid":            {Pattern: "^GPU-[0-9a-f-]+$"},
	"Results.device_ordinal":         {Minimum: "0"},
	"Case.name":                      {MinLength: 1},
	"Case.status":                    {Enum: []any{"passed", "failed", "skipped", "error"}},
	"Case.samples_ns":                {Description: "raw per-iteration times in nanoseconds after warmup"},
	"Case.flops":                     {Minimum: "0"},
	"Case.bytes":                     {Minimum: "0"},
	"Case.output_sha256":             {Pattern: "^[0-9a-f]{64}$"},
	"Case.device_memory_used_bytes":  {Minimum: "0"},
	"Sustained.duration_s":           {ExclusiveMinimum: "0"},
	"Sustained.elapsed_s":            {Minimum: "0"},
	"Sustained.busy_s":               {Minimum: "0"},
	"Sustained.duty_cycle":           {Minimum: "0", Maximum: "1"},
	"Sustained.timing":               {Enum: []any{"cuda_events", "steady_clock"}},
	"Sustained.threads":              {Minimum: "0"},
	"Sustained.cpu_s":                {Minimum: "0"},
	"Sustained.iterations":           {Minimum: "0"},
	"Sustained.outputs_checked":      {Minimum: "0"},
	"Sustained.mismatches":           {Minimum: "0"},
	"Sustained.check":                {Enum: []any{"bytes", "checksum64"}},
	"Sustained.memory_interval_s":    {Minimum: "0"},
	"MemorySample.elapsed_s":         {Minimum: "0"},
	"MemorySample.iteration":         {Minimum: "0"},
	"MemorySample.host_rss_bytes":    {Minimum: "0"},
	"MemorySample.device_used_bytes": {Minimum: "0"},
	"CaseSustained.repeats":          {Minimum: "0"},
	"CaseSustained.mismatches":       {Minimum: "0"},
	"CaseSustained.first_mismatch":   {Minimum: "0"},
	"CaseSustained.busy_s":           {Minimum: "0"},
	"Stop.reason":                    {Enum: []any{"precision", "max_time", "max_samples"}},
	"Stop.elapsed_s":                 {Minimum: "0"},
	"Correctness.max_abs_error":      {Minimum: "0"},
	"Correctness.mean_abs_error":     {Minimum: "0"},
	"Correctness.tolerance":          {Minimum: "0"},
}

// lockFields are the constraints and descriptions of the fields of the lock file
// that their Go types do not carry, by Go type and JSON name.
var lockFields = map[string]field{
	"Lock.apiVersion":           {Enum: []any{"gpuattest.dev/v1"}},
	"Lock.kind":                 {Enum: []any{"Lock"}},
	"Lock.images":               {Description: "one entry per image of the pipeline (sorted by name)"},
	"LockEntry.name":            {Description: "the image's key under images: in the pipeline", MinLength: 1},
	"LockEntry.reference":       {Description: "the image source as the pipeline writes it", MinLength: 1},
	"LockEntry.index_digest":    {Description: "digest of the multi-platform index the reference pointed at", Pattern: "^sha256:[a-f0-9]{64}$"},
	"LockEntry.manifest_digest": {Description: "digest of the platform's image manifest (for docker-archive sources the image ID)", Pattern: "^sha256:[a-f0-9]{64}$"},
	"LockEntry.config_digest":   {Description: "digest of the image config (the image ID)", Pattern: "^sha256:[a-f0-9]{64}$"},
	"LockEntry.platform":        {Description: "platform the index was resolved for (os/arch)", MinLength: 1},
	"LockEntry.resolved_at":     {Description: "when the reference was resolved (RFC 3339)"},
}

// predicateFields are the constraints and descriptions of the fields of the predicate
// that their Go types do not carry, by Go type and JSON name.
var predicateFields = map[string]field{
	"ValidationPredicate.result":          {Enum: []any{"passed", "failed"}},
	"ValidationPredicate.hardware":        {Type: "object"},
	"ValidationPredicate.pipeline_digest": {Pattern: "^sha256:[0-9a-f]{64}$"},
	"ValidationPredicate.lock_digest":     {Pattern: "^sha256:[0-9a-f]{64}$"},
	"BuildArtifact.sha256":                {Pattern: "^[0-9a-f]{64}$"},
	"CubinDigest.sha256":                  {Pattern: "^[0-9a-f]{64}$"},
	"FileDigest.sha256":                   {Pattern: "^[0-9a-f]{64}$"},
	"StepVerdict.runner":                  {Enum: []any{"host", "docker", "bwrap"}},
	"StepVerdict.backend":                 {Enum: []any{"cuda", "cpu"}},
	"BenchmarkComparison.against":         {Enum: []any{"reference", "baseline"}},
	"BenchmarkComparison.verdict":         {Enum: []any{"SAME", "FASTER", "SLOWER", "AMBIGUOUS", "MISSING", "NEW"}},
	"BenchmarkComparison.release":         {Pattern: "^sha256:[0-9a-f]{64}$"},
	"StepTelemetry.verdict":               {Enum: []any{"passed", "failed"}},
	"Source.commit":                       {Pattern: "^[0-9a-f]{40}([0-9a-f]{24})?$"},
}

// policyFields are the constraints and descriptions of the fields of a policy file
// that their Go types do not carry, by Go type and JSON name.
var policyFields = map[string]field{
	"Policy.apiVersion": {Enum: []any{"gpuattest.dev/v1"}},
	"Policy.kind":       {Enum: []any{"Policy"}},
	"Policy.rules":      {MinItems: 1},
	"Rule.name":         {MinLength: 1},
	"Rule.expr":         {MinLength: 1},
}
