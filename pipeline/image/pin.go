package image

import (
	"context"
	"fmt"
	"sync"
)

// Pinner turns the images of a pipeline into the digest-pinned images
// runners use, honouring the lock. Its Pin method has the shape of the
// engine's image resolver (engine.WithImageResolver(p.Pin)).
type Pinner struct {
	images map[string]string
	lock   *Lock
	opts   []Option
	o      *options

	mu     sync.Mutex
	pinned map[string]Pinned
}

// WithLocked makes NewPinner hold the pipeline to its lock, as release:
// true and run --locked ask: CheckLock runs first, and Pin accepts only
// images the lock covers.
func WithLocked() Option {
	return func(o *options) error {
		o.locked = true
		return nil
	}
}

// NewPinner prepares pinning for a pipeline's images (name to source) with
// its lock (nil when there is none). With WithLocked it runs CheckLock
// first and returns every refusal at once as one error, before any step
// runs. opts take Resolve's options too (base directory, platform, ...).
func NewPinner(ctx context.Context, images map[string]string, lock *Lock, opts ...Option) (*Pinner, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.locked {
		if ps := CheckLock(ctx, images, lock, opts...); len(ps) > 0 {
			return nil, fmt.Errorf("release mode refuses the pipeline's images:\n%w", ProblemsError(ps))
		}
	}
	return &Pinner{images: images, lock: lock, opts: opts, o: o, pinned: map[string]Pinned{}}, nil
}

// Pin returns the image called name, whose source as written is ref,
// pinned to its digests. A lock entry with the same reference and platform
// wins; with WithLocked nothing else is accepted; otherwise the source is
// resolved now (a floating tag is logged as such). File sources come back
// with absolute paths (relative ones are taken against WithBaseDir).
// Results are remembered.
func (p *Pinner) Pin(ctx context.Context, name, ref string) (Pinned, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.pinned[name]; ok {
		return s, nil
	}
	if e, ok := p.lock.Entry(name); ok && e.Reference == ref && e.Platform == p.o.platform.String() {
		s, err := e.Pinned()
		if err != nil {
			return Pinned{}, err
		}
		s = s.withAbsPath(p.o)
		p.pinned[name] = s
		return s, nil
	}
	if p.o.locked {
		return Pinned{}, fmt.Errorf("image %s (%s) has no matching entry in %s\nhint: run `gpuattest lock FILE`", name, ref, LockFileName)
	}
	r, err := Resolve(ctx, ref, p.opts...)
	if err != nil {
		return Pinned{}, err
	}
	s := r.Pinned()
	if r.Source.Floating() {
		p.o.logger.Warn("image is not locked; resolved its floating reference for this run only", "image", name, "reference", ref, "pinned", s.String())
	}
	s.Name = name
	s = s.withAbsPath(p.o)
	p.pinned[name] = s
	return s, nil
}
