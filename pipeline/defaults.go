package pipeline

// Defaults applied by Load after validation.
const (
	DefaultRunner = "host"
	DefaultOutput = OutputFatbin
	DefaultOutDir = "build"
	DefaultFormat = "auto"
	// DefaultRounds is how often a benchmark with a reference invokes
	// each side. Eight pairs reach significance at alpha 0.01; thirty keep
	// the power for a 5 % slowdown at 95 % when a few pairs straddle a
	// step change of the machine's load (go run ./bench/stats).
	DefaultRounds = 30
)

// The typed defaults.
var (
	// DefaultInterval is the telemetry sampling interval of burn-ins.
	DefaultInterval = MustDuration("1s")
	// DefaultPrecision and DefaultMaxTime are repeats: auto's stopping
	// rule.
	DefaultPrecision = MustPercent("1%")
	DefaultMaxTime   = MustDuration("2m")
	// DefaultThreshold is the smallest slowdown a gate counts.
	DefaultThreshold = MustPercent("3%")
)

// applyDefaults fills what a valid pipeline left out.
func applyDefaults(p *Pipeline) {
	if p.Runner == "" {
		p.Runner = DefaultRunner
	}
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Kind == "" {
			s.Kind = KindExec
		}
		if s.Runner == "" {
			s.Runner = p.Runner
		}
		switch s.Kind {
		case KindCUDABuild:
			if s.Output == "" {
				s.Output = DefaultOutput
			}
			if s.OutDir == "" {
				s.OutDir = DefaultOutDir
			}
			if s.PTX == nil {
				t := true
				s.PTX = &t
			}
			if s.Reproducible == "" {
				s.Reproducible = "off"
			}
		case KindTest, KindBenchmark, KindBurnin:
			if s.Format == "" {
				s.Format = DefaultFormat
			}
			if s.Kind == KindBurnin && s.Interval.IsZero() {
				s.Interval = DefaultInterval
			}
			if s.Kind == KindBenchmark {
				if s.Reference != nil {
					if s.Rounds == 0 {
						s.Rounds = DefaultRounds
					}
					if s.Gate == nil {
						s.Gate = &Gate{} // a same-run reference is always gated
					}
				}
				if s.Repeats.Auto {
					if s.Precision.IsZero() {
						s.Precision = DefaultPrecision
					}
					if s.MaxTime.IsZero() {
						s.MaxTime = DefaultMaxTime
					}
				}
			}
			if s.Gate != nil {
				if s.Gate.Threshold.IsZero() {
					s.Gate.Threshold = DefaultThreshold
				}
				if s.Gate.Alpha == 0 {
					s.Gate.Alpha = DefaultGateAlpha
				}
			}
		}
	}
}
