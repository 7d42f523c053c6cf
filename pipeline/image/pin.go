package image

import (
	"context"
	"fmt"
	"sync"
)

// Pinner turns the images of a pipeline into the digest-pinned sources
// runners use, honouring the lock. Its Pin method has the shape of the
// engine's image resolver (engine.WithImageResolver(p.Pin)).
type Pinner struct {
	images map[string]string
	lock   *Lock
	locked bool
	opts   []Option
	o      *options

	mu     sync.Mutex
	pinned map[string]string
}

// NewPinner prepares pinning for a pipeline's images (name to source) with
// its lock (nil when there is none). When locked (release: true or run
// --locked) it runs CheckLock first and returns every refusal at once as
// one error, before any step runs.
func NewPinner(ctx context.Context, images map[string]string, lock *Lock, locked bool, opts ...Option) (*Pinner, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	if locked {
		if ps := CheckLock(ctx, images, lock, opts...); len(ps) > 0 {
			return nil, fmt.Errorf("release mode refuses the pipeline's images:\n%w", ProblemsError(ps))
		}
	}
	return &Pinner{images: images, lock: lock, locked: locked, opts: opts, o: o, pinned: map[string]string{}}, nil
}

// Pin returns the pinned source for the image called name, whose source
// as written is ref. A lock entry with the same reference and platform
// wins; in locked mode nothing else is accepted; otherwise the source is
// resolved now (a floating tag is logged as such). File sources come back
// with absolute paths (relative ones are taken against WithBaseDir).
// Results are remembered.
func (p *Pinner) Pin(ctx context.Context, name, ref string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.pinned[name]; ok {
		return s, nil
	}
	if e, ok := p.lock.Entry(name); ok && e.Reference == ref && e.Platform == p.o.platform.String() {
		s, err := e.Pinned()
		if err != nil {
			return "", err
		}
		s = p.absolute(s)
		p.pinned[name] = s
		return s, nil
	}
	if p.locked {
		return "", fmt.Errorf("image %s (%s) has no matching entry in %s\nhint: run `gpuattest lock FILE`", name, ref, LockFileName)
	}
	r, err := Resolve(ctx, ref, p.opts...)
	if err != nil {
		return "", err
	}
	if r.Source.Floating() {
		p.o.logger.Warn("image is not locked; resolved its floating reference for this run only", "image", name, "reference", ref, "pinned", r.Pinned())
	}
	s := p.absolute(r.Pinned())
	p.pinned[name] = s
	return s, nil
}

// absolute makes the path of a file source absolute (against WithBaseDir),
// so that runners need no base directory of their own.
func (p *Pinner) absolute(pinnedSrc string) string {
	s, err := ParseSource(pinnedSrc)
	if err != nil || s.Kind == Registry {
		return pinnedSrc
	}
	return pinned(Source{Kind: s.Kind, Path: p.o.absPath(s.Path)}, s.Digest)
}
