package k8stest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// StartTimeout bounds how long starting a cluster may take (measured:
// 11-14 s on an idle 2-core machine, more under load).
const StartTimeout = 3 * time.Minute

// Cluster is a running control plane: etcd, kube-apiserver (static
// tokens, a self-signed certificate, 127.0.0.1 only),
// kube-controller-manager (job controller, garbage collector,
// service-account and ttl-after-finished controllers), kube-scheduler and
// kwok. Several Clusters (Shared's) may share one control plane, each
// with its own namespace and restricted user.
type Cluster struct {
	// Server is the apiserver's URL, https://127.0.0.1:PORT.
	Server string
	// Kubeconfig is the path of a kubeconfig file (token and CA) for
	// the admin user, its context's namespace Namespace.
	Kubeconfig string
	// Namespace is a namespace created for the caller.
	Namespace string
	// CA is the PEM of the CA the apiserver's certificate chains to.
	CA []byte
	// Dir holds the control plane's configuration, data and logs
	// (logs/NAME.log for etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kwok).
	Dir string
	// Admin is a client for the admin user (group system:masters).
	Admin *Client
	// Restricted is a client for a user whose only rights are
	// SubmitterRules in Namespace: it can create Jobs and Secrets
	// there, and nothing cluster-wide.
	Restricted *Client

	cp *controlPlane
}

// controlPlane is the processes and credentials behind one or more
// Clusters.
type controlPlane struct {
	bin, dir string
	pki      *pki
	server   string
	admin    *Client
	procs    []*proc

	mu          sync.Mutex
	nextTenant  int
	nextNS      int
	removeDir   bool
	stopOnce    sync.Once
	startedTook time.Duration
}

// Require fails the test when the binaries are missing and CI=true or
// GPUATTEST_K8S=1, and skips it elsewhere; it returns Bin's directory.
func Require(tb testing.TB) string {
	tb.Helper()
	dir, err := Bin()
	if err != nil {
		if testenv.InCI() || os.Getenv("GPUATTEST_K8S") == "1" {
			tb.Fatalf("the Kubernetes control plane's binaries are missing (CI=true or GPUATTEST_K8S=1): %v", err)
		}
		tb.Skipf("skipping: %v (set GPUATTEST_K8S=1 to make this a failure)", err)
	}
	return dir
}

// Start starts a cluster with nodes, its logs in the test's temporary
// directory, and stops it with tb.Cleanup, printing the tail of each
// component's log when the test failed. Without the binaries it skips the
// test, or fails it when CI=true or GPUATTEST_K8S=1.
func Start(tb testing.TB, nodes ...Node) *Cluster {
	tb.Helper()
	Require(tb)
	c, stop, err := Serve(tb.TempDir(), nodes...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Log(c.Logs())
		}
		stop()
	})
	return c
}

// Serve starts a cluster with nodes in dir (a new temporary directory,
// removed by stop, when dir is ""), and returns it with the function that
// stops every component (benchmarks and Main use it; tests use Start).
func Serve(dir string, nodes ...Node) (*Cluster, func(), error) {
	bin, err := Bin()
	if err != nil {
		return nil, nil, err
	}
	cp := &controlPlane{bin: bin, dir: dir}
	if dir == "" {
		if cp.dir, err = os.MkdirTemp("", "k8stest"); err != nil {
			return nil, nil, err
		}
		cp.removeDir = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	began := time.Now()
	c, err := cp.start(ctx)
	if err == nil {
		for _, n := range nodes {
			if err = c.AddNode(ctx, n); err != nil {
				break
			}
		}
	}
	if err != nil {
		logs := cp.logs()
		cp.stop()
		return nil, nil, fmt.Errorf("starting the Kubernetes control plane in %s: %w\n%s", cp.dir, err, logs)
	}
	cp.startedTook = time.Since(began)
	return c, cp.stop, nil
}

// StartedIn is how long the control plane took to start and take its
// first nodes.
func (c *Cluster) StartedIn() time.Duration { return c.cp.startedTook }

// Logs returns the tail of each component's log, for a failing test.
func (c *Cluster) Logs() string { return c.cp.logs() }

func (cp *controlPlane) logs() string {
	var b strings.Builder
	for _, p := range cp.procs {
		fmt.Fprintf(&b, "== %s (%s) ==\n%s\n", p.name, p.log, tail(p.log, 6000))
	}
	return b.String()
}

// stop stops the components in reverse order of their start and removes
// the directory when Serve made it.
func (cp *controlPlane) stop() {
	cp.stopOnce.Do(func() {
		var wg sync.WaitGroup
		// kwok, the scheduler and the controller-manager at once, then
		// the apiserver, then etcd.
		for i := len(cp.procs) - 1; i >= 0; i-- {
			p := cp.procs[i]
			if p.name == "kube-apiserver" || p.name == "etcd" {
				wg.Wait()
				p.stop(10 * time.Second)
				continue
			}
			wg.Go(func() { p.stop(5 * time.Second) })
		}
		wg.Wait()
		if cp.removeDir {
			_ = os.RemoveAll(cp.dir)
		}
	})
}

// start starts the components in order, each waited for, and makes the
// first namespace.
func (cp *controlPlane) start(ctx context.Context) (*Cluster, error) {
	for _, d := range []string{"logs", "pki", "etcd", "kube-controller-manager", "kube-scheduler"} {
		if err := os.MkdirAll(filepath.Join(cp.dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	var err error
	if cp.pki, err = writePKI(filepath.Join(cp.dir, "pki")); err != nil {
		return nil, fmt.Errorf("writing the certificates and tokens: %w", err)
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	if err := cp.startEtcd(ctx, ports[0], ports[1]); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, ports[0], ports[2]); err != nil {
		return nil, err
	}
	if err := cp.startControllers(ctx, ports[3], ports[4]); err != nil {
		return nil, err
	}
	return cp.newCluster(ctx)
}

func (cp *controlPlane) startEtcd(ctx context.Context, clientPort, peerPort int) error {
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := cp.spawn("etcd", "etcd",
		"--name=k8stest", "--data-dir="+filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=k8stest="+peer, "--initial-cluster-state=new",
		"--unsafe-no-fsync", "--quota-backend-bytes=1073741824", "--log-level=warn")
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	return poll(ctx, "etcd's /health", p, func(ctx context.Context) error {
		return getOK(ctx, hc, client+"/health", "")
	})
}

func (cp *controlPlane) startAPIServer(ctx context.Context, etcdPort, port int) error {
	cp.server = "https://127.0.0.1:" + strconv.Itoa(port)
	f := cp.pki.files
	p, err := cp.spawn("kube-apiserver", "kube-apiserver",
		"--etcd-servers=http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--endpoint-reconciler-type=none",
		"--tls-cert-file="+f["cert"], "--tls-private-key-file="+f["key"], "--client-ca-file="+f["ca"],
		"--token-auth-file="+f["tokens"], "--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+f["sapub"], "--service-account-signing-key-file="+f["sakey"],
		"--service-cluster-ip-range=10.96.0.0/16",
		"--cert-dir="+filepath.Join(cp.dir, "pki"),
		"--enable-priority-and-fairness=false", "--profiling=false")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(cp.dir, "admin.kubeconfig")
	if err := writeKubeconfig(kubeconfig, cp.server, cp.pki.caPEM, "admin", cp.pki.admin, ""); err != nil {
		return err
	}
	if cp.admin, err = newClient(cp.server, cp.pki.caPEM, "admin", cp.pki.admin, kubeconfig); err != nil {
		return err
	}
	return poll(ctx, "the apiserver's /readyz", p, func(ctx context.Context) error {
		return cp.admin.Do(ctx, http.MethodGet, "/readyz", nil, nil)
	})
}

// startControllers starts the controller-manager, the scheduler and kwok,
// and waits for the first two's /healthz (kwok is waited for by AddNode:
// a node it manages becomes Ready).
func (cp *controlPlane) startControllers(ctx context.Context, cmPort, schedPort int) error {
	kubeconfig := cp.admin.Kubeconfig
	cm, err := cp.spawn("kube-controller-manager", "kube-controller-manager",
		"--kubeconfig="+kubeconfig, "--leader-elect=false",
		"--controllers="+strings.Join(controllers, ","),
		"--use-service-account-credentials=false",
		// kwok's heartbeats come every 20-45 s; a node is never
		// declared lost during a test.
		"--node-monitor-grace-period=10m", "--node-startup-grace-period=10m",
		"--root-ca-file="+cp.pki.files["ca"],
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(cmPort),
		"--cert-dir="+filepath.Join(cp.dir, "kube-controller-manager"))
	if err != nil {
		return err
	}
	sched, err := cp.spawn("kube-scheduler", "kube-scheduler",
		"--kubeconfig="+kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort),
		"--cert-dir="+filepath.Join(cp.dir, "kube-scheduler"))
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--manage-all-nodes=true", "--node-ip=10.0.0.1"}
	for _, s := range stageFiles {
		args = append(args, "--config="+filepath.Join(cp.bin, "kwok-stages", s))
	}
	if _, err := cp.spawn("kwok", "kwok", args...); err != nil {
		return err
	}
	// Their serving certificates are self-signed into --cert-dir; only
	// /healthz is read, on 127.0.0.1.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a health probe on loopback
	}}
	if err := poll(ctx, "the controller-manager's /healthz", cm, func(ctx context.Context) error {
		return getOK(ctx, hc, fmt.Sprintf("https://127.0.0.1:%d/healthz", cmPort), "")
	}); err != nil {
		return err
	}
	return poll(ctx, "the scheduler's /healthz", sched, func(ctx context.Context) error {
		return getOK(ctx, hc, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), "")
	})
}

// controllers are the controller-manager's controllers the harness runs,
// by their long names: Jobs and their pods, deletion by ownerReference,
// each namespace's default service account (pods are refused without
// it), ttlSecondsAfterFinished, and the node lifecycle (it lifts the
// node.kubernetes.io/not-ready taint the apiserver puts on a new node
// once kwok reports it Ready).
var controllers = []string{
	"job-controller",
	"node-lifecycle-controller",
	"garbage-collector-controller",
	"serviceaccount-controller",
	"ttl-after-finished-controller",
}

// getOK GETs url and wants 200.
func getOK(ctx context.Context, hc *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
