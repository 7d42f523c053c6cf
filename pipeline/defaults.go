package pipeline

// Defaults applied by Load after validation.
const (
	DefaultRunner   = "host"
	DefaultOutput   = OutputFatbin
	DefaultOutDir   = "build"
	DefaultInterval = Duration("1s")
	DefaultFormat   = "auto"
	// DefaultRounds is how often a benchmark with a reference invokes
	// each side. Eight pairs reach significance at alpha 0.01; thirty keep
	// the power for a 5 % slowdown at 95 % when a few pairs straddle a
	// step change of the machine's load (go run ./bench/stats).
	DefaultRounds = 30
	// DefaultPrecision and DefaultMaxTime are repeats: auto's stopping
	// rule.
	DefaultPrecision = "1%"
	DefaultMaxTime   = Duration("2m")
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
			if s.Kind == KindBurnin && s.Interval == "" {
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
					if s.Precision == "" {
						s.Precision = DefaultPrecision
					}
					if s.MaxTime == "" {
						s.MaxTime = DefaultMaxTime
					}
				}
			}
			if s.Gate != nil {
				if s.Gate.Threshold == "" {
					s.Gate.Threshold = "3%"
				}
				if s.Gate.Alpha == 0 {
					s.Gate.Alpha = 0.01
				}
			}
		}
	}
}
