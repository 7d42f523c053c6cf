package pipeline

// Defaults applied by Load after validation.
const (
	DefaultRunner   = "host"
	DefaultOutput   = "fatbin"
	DefaultOutDir   = "build"
	DefaultInterval = Duration("1s")
	DefaultFormat   = "auto"
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
