package pipeline

// Defaults applied by Load after validation.
const (
	DefaultRunner = "host"
	DefaultOutput = OutputFatbin
	DefaultOutDir = "build"
	DefaultFormat = "auto"
	// DefaultMaxRounds is rounds: auto's most pairs when maxRounds is
	// left out: enough for the sequential test to tell a 10 % change
	// under a load that spreads the pairs' ratios by ±20 %
	// (go run ./bench/stats).
	DefaultMaxRounds = 300
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
	// DefaultRoundsTime is rounds: auto's time budget when roundsTime is
	// left out.
	DefaultRoundsTime = MustDuration("10m")
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
					if s.Rounds.IsZero() {
						s.Rounds = Rounds{Auto: true}
					}
					if s.Rounds.Auto && s.MaxRounds == 0 {
						s.MaxRounds = DefaultMaxRounds
					}
					if s.Rounds.Auto && s.RoundsTime.IsZero() {
						s.RoundsTime = DefaultRoundsTime
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
				if s.Gate.OnAmbiguous == "" {
					s.Gate.OnAmbiguous = OnAmbiguousFail
				}
			}
		}
	}
}
