package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	_ fleet.Scheduler = (*Engine)(nil)
	_ fleet.Finisher  = (*Engine)(nil)
)

// DefaultPollInterval is the least time between two polls when the
// fleet file gives no pollInterval (the coordinator spaces them with
// fleet.Throttle): each poll reads every class's Job and lists its pods.
const DefaultPollInterval = 5 * time.Second

// requestTimeout bounds each API request.
const requestTimeout = 60 * time.Second

// Engine submits Indexed Jobs to a namespace.
type Engine struct {
	core, batch *rest.RESTClient
	server      string
	cluster     string
	cfg         Config
	schedule    time.Duration
	log         *slog.Logger
	now         func() time.Time
}

// options are New's settings.
type options struct {
	kubeconfig, context string
	schedule            time.Duration
	log                 *slog.Logger
}

// Option configures New.
type Option func(*options) error

// WithKubeconfig reads credentials from path (KUBECONFIG, then
// ~/.kube/config, when not set: as kubectl finds them).
func WithKubeconfig(path string) Option {
	return func(o *options) error { o.kubeconfig = path; return nil }
}

// WithContext uses the kubeconfig's context name (its current context
// when not set).
func WithContext(name string) Option {
	return func(o *options) error { o.context = name; return nil }
}

// WithScheduleTimeout sets how long a pod may stay unschedulable before
// its job counts as failed (DefaultScheduleTimeout when not set).
func WithScheduleTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("kube.WithScheduleTimeout: %v, expected above 0", d)
		}
		o.schedule = d
		return nil
	}
}

// WithLogger logs each API call at debug level.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("kube.WithLogger: nil logger")
		}
		o.log = l
		return nil
	}
}

// New returns an engine for the cluster the kubeconfig names. cfg's
// Namespace, when empty, is the context's namespace ("default" without
// one).
func New(cfg Config, opts ...Option) (*Engine, error) {
	o := options{schedule: DefaultScheduleTimeout, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w\nhint: set KUBECONFIG, --kubeconfig or the fleet file's kubernetes.kubeconfig; kubectl must reach the cluster with it", err)
	}
	if cfg.Namespace == "" {
		if cfg.Namespace, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("reading the kubeconfig's namespace: %w", err)
		}
	}
	e := &Engine{cfg: cfg, schedule: o.schedule, log: o.log, now: time.Now, server: StripCredentials(rc.Host)}
	if raw, err := cc.RawConfig(); err == nil {
		ctxName := o.context
		if ctxName == "" {
			ctxName = raw.CurrentContext
		}
		if c := raw.Contexts[ctxName]; c != nil {
			e.cluster = c.Cluster
		}
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := batchv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	rc.Timeout = requestTimeout
	if rc.UserAgent == "" {
		rc.UserAgent = "gpuattest"
	}
	if e.core, err = restClient(rc, corev1.SchemeGroupVersion, "/api", codecs); err != nil {
		return nil, err
	}
	if e.batch, err = restClient(rc, batchv1.SchemeGroupVersion, "/apis", codecs); err != nil {
		return nil, err
	}
	return e, nil
}

func restClient(rc *rest.Config, gv schema.GroupVersion, apiPath string, codecs serializer.CodecFactory) (*rest.RESTClient, error) {
	c := rest.CopyConfig(rc)
	c.GroupVersion, c.APIPath = &gv, apiPath
	c.NegotiatedSerializer = codecs.WithoutConversion()
	c.ContentType = runtime.ContentTypeJSON
	return rest.RESTClientFor(c)
}

// StripCredentials returns a URL without its user information (and
// the whole string when it does not parse as a URL with a host).
func StripCredentials(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		if i := strings.LastIndex(server, "@"); i >= 0 {
			return server[i+1:]
		}
		return server
	}
	u.User = nil
	return u.String()
}

// Name returns "kubernetes".
func (e *Engine) Name() string { return "kubernetes" }

// Namespace is where the engine submits.
func (e *Engine) Namespace() string { return e.cfg.Namespace }

// Describe names the API server (without credentials), its version, the
// kubeconfig's cluster and the namespace.
func (e *Engine) Describe(ctx context.Context) (fleet.Cluster, error) {
	c := fleet.Cluster{Engine: e.Name(), Name: e.cluster, Server: e.server, Namespace: e.cfg.Namespace}
	b, err := e.core.Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return c, fmt.Errorf("asking %s for its version: %w", e.server, err)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return c, fmt.Errorf("reading %s's version: %w", e.server, err)
	}
	c.Version = v.GitVersion
	if c.Name == "" {
		c.Name = e.server
	}
	return c, nil
}

// Submit creates the class's Secret of job keys, then its Indexed Job,
// then makes the Job the Secret's owner, so that deleting the Job
// deletes the Secret. On an error nothing of req is left.
func (e *Engine) Submit(ctx context.Context, req fleet.Request) ([]fleet.Handle, error) {
	m, err := Build(req, e.cfg)
	if err != nil {
		return nil, err
	}
	ns, name := e.cfg.Namespace, m.Job.Name
	e.log.DebugContext(ctx, "creating secret", "namespace", ns, "name", name)
	if err := e.core.Post().Namespace(ns).Resource("secrets").Body(m.Secret).Do(ctx).Error(); err != nil {
		return nil, fmt.Errorf("creating the Secret of class %s's job keys: %w%s", req.Class, err, hint(err))
	}
	var job batchv1.Job
	e.log.DebugContext(ctx, "creating job", "namespace", ns, "name", name, "manifest", m.Digest)
	if err := e.batch.Post().Namespace(ns).Resource("jobs").SetHeader("Content-Type", runtime.ContentTypeJSON).Body(m.JobJSON).Do(ctx).Into(&job); err != nil {
		_ = e.deleteSecret(context.WithoutCancel(ctx), name)
		return nil, fmt.Errorf("creating the Job of class %s: %w%s", req.Class, err, hint(err))
	}
	owner, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{{
		APIVersion: "batch/v1", Kind: "Job", Name: name, UID: job.UID,
	}}}})
	if err := e.core.Patch(types.MergePatchType).Namespace(ns).Resource("secrets").Name(name).Body(owner).Do(ctx).Error(); err != nil {
		_ = e.Cancel(context.WithoutCancel(ctx), []string{name + "/0"})
		return nil, fmt.Errorf("making the Job %s the owner of its Secret: %w%s", name, err, hint(err))
	}
	handles := make([]fleet.Handle, req.Count)
	for i := range handles {
		handles[i] = fleet.Handle{ID: fmt.Sprintf("%s/%d", name, i), Class: req.Class, Index: i, Object: name, UID: string(job.UID), Manifest: m.Digest}
	}
	return handles, nil
}

// hint explains an API error the submitting identity can fix.
func hint(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "\nhint: in the namespace, the identity needs create, get, delete and patch on jobs and secrets, and get and list on pods and events: the Role in docs/fleet.md (Running on Kubernetes)"
	case apierrors.IsAlreadyExists(err):
		return "\nhint: a Job of this dispatch is there already; delete it or dispatch again"
	case apierrors.IsNotFound(err):
		return "\nhint: does the namespace exist?"
	}
	return ""
}

// Cancel deletes the Jobs of ids with their pods (foreground
// propagation) and their Secrets; a Job that is gone already is not an
// error.
func (e *Engine) Cancel(ctx context.Context, ids []string) error {
	var errs []error
	for _, name := range jobNames(ids) {
		if err := e.deleteJob(ctx, name); err != nil {
			errs = append(errs, err)
		}
		if err := e.deleteSecret(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Finish deletes the Secrets of ids' Jobs, and every Job of ids that has
// not finished (one whose pod stayed unschedulable).
func (e *Engine) Finish(ctx context.Context, ids []string) error {
	var errs []error
	for _, name := range jobNames(ids) {
		var job batchv1.Job
		err := e.batch.Get().Namespace(e.cfg.Namespace).Resource("jobs").Name(name).Do(ctx).Into(&job)
		if err == nil && !jobFinished(&job) {
			err = e.deleteJob(ctx, name)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
		if err := e.deleteSecret(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) deleteJob(ctx context.Context, name string) error {
	fg := metav1.DeletePropagationForeground
	err := e.batch.Delete().Namespace(e.cfg.Namespace).Resource("jobs").Name(name).Body(&metav1.DeleteOptions{PropagationPolicy: &fg}).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the Job %s: %w%s", name, err, hint(err))
	}
	return nil
}

func (e *Engine) deleteSecret(ctx context.Context, name string) error {
	err := e.core.Delete().Namespace(e.cfg.Namespace).Resource("secrets").Name(name).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the Secret %s: %w%s", name, err, hint(err))
	}
	return nil
}

// jobNames are the distinct Job names of ids (NAME/INDEX), in order.
func jobNames(ids []string) []string {
	var names []string
	seen := map[string]bool{}
	for _, id := range ids {
		name, _, _ := strings.Cut(id, "/")
		if name != "" && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names
}
