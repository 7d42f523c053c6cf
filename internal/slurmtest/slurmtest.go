// Package slurmtest starts a real Slurm on localhost for tests: munged
// (as the munge user, with its own key, socket and state), slurmctld and
// slurmd, each with its own configuration and state under one temporary
// directory, and no systemd. The node has typed GPU gres backed by
// character devices made with mknod, so jobs get CUDA_VISIBLE_DEVICES for
// the device their --gres names. Everything stops when the test ends.
//
// Measured with Debian's 22.05.8: count-only gres.conf lines are refused
// ("gres/gpu count reported lower than configured"), so each GPU has a
// File= line; `squeue --json` works; sacct needs slurmdbd, which is not
// started, so nothing here relies on it.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// GPU is one typed GPU gres of the test node.
type GPU struct {
	// Type is the gres type: a100, h100, ...
	Type string
	// Count is how many devices of the type the node has.
	Count int
}

// Config describes the test cluster's one node.
type Config struct {
	// GPUs are the node's typed GPUs (gpu:a100:1 and gpu:h100:1 when nil).
	GPUs []GPU
	// Features are the node's features (sm_80, sm_90 when nil).
	Features []string
	// CPUs is the node's CPU count as configured (64 when zero): it
	// bounds how many one-CPU jobs run at once, whatever the machine has.
	CPUs int
}

// Cluster is a running local Slurm.
type Cluster struct {
	// Name is the cluster's name (ClusterName).
	Name string
	// Node is the name of its one node.
	Node string
	// Partition is its one partition, the default.
	Partition string
	// Conf is the path of slurm.conf; client commands find it through
	// SLURM_CONF.
	Conf string
	// Dir holds the configuration, state, logs and device files.
	Dir string
	// Config is what the node was configured with, defaults filled.
	Config Config

	procs []*proc
}

// Env is the environment a client command (sbatch, squeue, scancel) needs
// to reach this cluster, to be added to the process's own.
func (c *Cluster) Env() []string { return []string{"SLURM_CONF=" + c.Conf} }

// Command returns a client command for this cluster (its environment is
// the test's plus Env).
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	return cmd
}

// Logs returns the tail of each daemon's log, for a failing test.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, name := range []string{"munged.log", "slurmctld.log", "slurmd.log"} {
		data, _ := os.ReadFile(filepath.Join(c.Dir, "log", name))
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "== %s ==\n%s\n", name, data)
	}
	return b.String()
}

// Require fails the test when CI=true and Slurm or munge is not installed,
// and skips it elsewhere; so does Start.
func Require(t testing.TB) {
	t.Helper()
	if reason := Unavailable(); reason != "" {
		testenv.Missing(t, reason)
	}
}

// Unavailable says why a local Slurm cannot start on this machine (a
// client or daemon missing from PATH, not root, no munge user), or
// returns "" when it can. Require and the CLI scripts' [cluster:slurm]
// condition judge by it.
func Unavailable() string {
	for _, tool := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found in PATH"
		}
	}
	if os.Geteuid() != 0 {
		return "a local Slurm needs root (slurmd runs jobs as their users, munged as munge)"
	}
	if _, err := user.Lookup("munge"); err != nil {
		return "no munge user (the munge package creates it)"
	}
	return ""
}

// Start starts a cluster configured by cfg (the defaults when nil) and
// stops it, and every job on it, when the test ends.
func Start(t testing.TB, cfg *Config) *Cluster {
	t.Helper()
	Require(t)
	c, stop, err := Serve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return c
}

// Serve starts a cluster configured by cfg (the defaults when nil) in a
// new directory under the system's temporary directory, and returns it
// with the function that cancels its jobs, stops its daemons and removes
// the directory (benchmarks use it; tests use Start).
func Serve(cfg *Config) (*Cluster, func(), error) {
	var conf Config
	if cfg != nil {
		conf = *cfg
	}
	if conf.GPUs == nil {
		conf.GPUs = []GPU{{Type: "a100", Count: 1}, {Type: "h100", Count: 1}}
	}
	if conf.Features == nil {
		conf.Features = []string{"sm_80", "sm_90"}
	}
	if conf.CPUs == 0 {
		conf.CPUs = 64
	}
	// Not t.TempDir: munged runs as munge and must reach its directory
	// (the test's is 0700 and root's), and a unix socket path has at most
	// 107 bytes.
	dir, err := os.MkdirTemp("", "slurm")
	if err != nil {
		return nil, nil, err
	}
	c := &Cluster{Name: "gpuattest", Node: "node1", Partition: "gpu", Dir: dir, Conf: filepath.Join(dir, "etc", "slurm.conf"), Config: conf}
	stop := func() {
		c.stop()
		_ = os.RemoveAll(dir)
	}
	if err := c.start(); err != nil {
		err = fmt.Errorf("%w\n%s", err, c.Logs())
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

func (c *Cluster) start() error {
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"etc", "log", "ctld", "spool", "dev", "run"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return err
		}
	}
	socket, err := c.startMunge()
	if err != nil {
		return err
	}
	if err := c.writeConfig(socket); err != nil {
		return err
	}
	if err := c.spawn("slurmctld", "slurmctld", "-D", "-f", c.Conf); err != nil {
		return err
	}
	if err := c.waitFor("slurmctld to answer", func() bool {
		return c.Command(context.Background(), "scontrol", "ping").Run() == nil
	}); err != nil {
		return err
	}
	if err := c.spawn("slurmd", "slurmd", "-D", "-N", c.Node, "-f", c.Conf); err != nil {
		return err
	}
	return c.waitFor("the node to be idle", func() bool {
		out, err := c.Command(context.Background(), "sinfo", "-h", "-N", "-n", c.Node, "-o", "%T").Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	})
}

// startMunge writes a fresh key and runs munged as the munge user with
// its own key, socket, state and log; it returns the socket's path.
func (c *Cluster) startMunge() (string, error) {
	u, err := user.Lookup("munge")
	if err != nil {
		return "", fmt.Errorf("looking up the munge user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	mdir := filepath.Join(c.Dir, "munge")
	for _, d := range []string{mdir, filepath.Join(mdir, "run"), filepath.Join(mdir, "lib"), filepath.Join(mdir, "log")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return "", err
		}
	}
	// The socket's directory is traversed by every client (root here).
	if err := os.Chmod(filepath.Join(mdir, "run"), 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(mdir, 0o755); err != nil {
		return "", err
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	keyPath := filepath.Join(mdir, "munge.key")
	if err := os.WriteFile(keyPath, key, 0o400); err != nil {
		return "", err
	}
	if err := os.Chown(keyPath, uid, gid); err != nil {
		return "", err
	}
	socket := filepath.Join(mdir, "run", "munge.socket")
	p, err := c.spawnAs("munged", &ids{uid: uint32(uid), gid: uint32(gid)}, "munged", "--foreground",
		"--key-file="+keyPath, "--socket="+socket,
		"--pid-file="+filepath.Join(mdir, "run", "munged.pid"),
		"--seed-file="+filepath.Join(mdir, "lib", "munged.seed"),
		"--log-file="+filepath.Join(mdir, "log", "munged.log"))
	if err != nil {
		return "", err
	}
	err = c.waitFor("munged's socket", func() bool {
		if p.exited() {
			return true
		}
		conn, err := net.Dial("unix", socket)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	if p.exited() {
		log, _ := os.ReadFile(filepath.Join(mdir, "log", "munged.log"))
		return "", fmt.Errorf("munged exited: %s\n%s", p.out.String(), log)
	}
	return socket, err
}

// writeConfig writes slurm.conf and gres.conf, and makes the node's GPU
// device files.
func (c *Cluster) writeConfig(socket string) error {
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	host, _, _ = strings.Cut(host, ".")
	ctldPort, err := freePort()
	if err != nil {
		return err
	}
	slurmdPort, err := freePort()
	if err != nil {
		return err
	}
	var gres, gresConf []string
	minor := 0
	for _, g := range c.Config.GPUs {
		gres = append(gres, fmt.Sprintf("gpu:%s:%d", g.Type, g.Count))
		for range g.Count {
			dev := filepath.Join(c.Dir, "dev", fmt.Sprintf("nvidia%d", minor))
			if err := mknodChar(dev, 195, minor); err != nil {
				return fmt.Errorf("making the device file %s: %w", dev, err)
			}
			gresConf = append(gresConf, fmt.Sprintf("NodeName=%s Name=gpu Type=%s File=%s", c.Node, g.Type, dev))
			minor++
		}
	}
	d := func(name string) string { return filepath.Join(c.Dir, name) }
	slurm := []string{
		"ClusterName=" + c.Name,
		fmt.Sprintf("SlurmctldHost=%s(127.0.0.1)", host),
		"SlurmUser=root",
		"SlurmdUser=root",
		fmt.Sprintf("SlurmctldPort=%d", ctldPort),
		fmt.Sprintf("SlurmdPort=%d", slurmdPort),
		"AuthType=auth/munge",
		"CredType=cred/munge",
		"AuthInfo=socket=" + socket,
		"StateSaveLocation=" + d("ctld"),
		"SlurmdSpoolDir=" + d("spool"),
		"SlurmctldPidFile=" + d("run/slurmctld.pid"),
		"SlurmdPidFile=" + d("run/slurmd.pid"),
		"SlurmctldLogFile=" + d("log/slurmctld.log"),
		"SlurmdLogFile=" + d("log/slurmd.log"),
		"SlurmctldDebug=info",
		"SlurmdDebug=info",
		"ProctrackType=proctrack/linuxproc",
		"TaskPlugin=task/none",
		"SelectType=select/cons_tres",
		"SelectTypeParameters=CR_Core",
		"SchedulerType=sched/builtin",
		"MpiDefault=none",
		"SwitchType=switch/none",
		"JobCompType=jobcomp/none",
		"JobAcctGatherType=jobacct_gather/none",
		"AccountingStorageType=accounting_storage/none",
		"ReturnToService=2",
		"SlurmdParameters=config_overrides",
		"GresTypes=gpu",
		"MailProg=/bin/true",
		"KillWait=2",
		"MinJobAge=300",
		"InactiveLimit=0",
		"SlurmdTimeout=300",
		fmt.Sprintf("NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 CPUs=%d RealMemory=1000 Gres=%s Features=%s State=UNKNOWN",
			c.Node, host, c.Config.CPUs, strings.Join(gres, ","), strings.Join(c.Config.Features, ",")),
		fmt.Sprintf("PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP", c.Partition, c.Node),
	}
	if err := os.WriteFile(c.Conf, []byte(strings.Join(slurm, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(filepath.Dir(c.Conf), "gres.conf"), []byte("AutoDetect=off\n"+strings.Join(gresConf, "\n")+"\n"), 0o644)
}

// mkdev is Linux's makedev.
func mkdev(major, minor int) int {
	return (minor & 0xff) | ((major & 0xfff) << 8) | ((minor &^ 0xff) << 12)
}

// stop cancels every job, waits (10 s at most) for them to go, then stops
// the daemons in reverse order.
func (c *Cluster) stop() {
	if len(c.procs) >= 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = c.Command(ctx, "scancel", "--partition="+c.Partition).Run()
		_ = c.waitFor("the jobs to end", func() bool {
			out, err := c.Command(ctx, "squeue", "-h", "-t", "RUNNING,COMPLETING,PENDING,CONFIGURING", "-o", "%i").Output()
			return err != nil || len(bytes.TrimSpace(out)) == 0
		})
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	c.procs = nil
}

// proc is a daemon started in the foreground.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and, after 10 s, SIGKILL.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (c *Cluster) spawn(name string, bin string, args ...string) error {
	_, err := c.spawnAs(name, nil, bin, args...)
	return err
}

func (c *Cluster) spawnAs(name string, cred *ids, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	attr, err := procAttr(cred)
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	c.procs = append(c.procs, p)
	return p, nil
}

// waitFor polls ok every 100 ms for 30 s, failing early when a daemon
// exits.
func (c *Cluster) waitFor(what string, ok func() bool) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return nil
		}
		for _, p := range c.procs {
			if p.exited() {
				return fmt.Errorf("waiting for %s: %s exited: %s", what, p.name, p.out.String())
			}
		}
	}
	return errors.New("timed out after 30s waiting for " + what)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// User returns the local user name, a member of group, creating the
// group and the user when they do not exist (EnsureUser), for tests that
// need a second real user, such as a co-tenant of a shared directory. It
// needs root, and fails when CI=true without it (skips elsewhere).
func User(t testing.TB, name, group string) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "creating users needs root")
	}
	for _, tool := range []string{"groupadd", "useradd", "usermod"} {
		testenv.RequireTool(t, tool)
	}
	u, err := EnsureUser(name, group)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// EnsureUser returns the local user name, a member of group, creating
// the group and the user (a system account with no home directory and
// no login shell, its own primary group) when they do not exist, with
// groupadd, useradd and usermod. The accounts are left in place for the
// next test or campaign. It needs root.
func EnsureUser(name, group string) (*user.User, error) {
	if _, err := user.LookupGroup(group); err != nil {
		if err := retry("groupadd", "--system", group); err != nil {
			if _, lerr := user.LookupGroup(group); lerr != nil {
				return nil, fmt.Errorf("groupadd %s: %w", group, err)
			}
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		err = retry("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "--user-group", "--groups", group, name)
		if u, err = user.Lookup(name); err != nil {
			return nil, fmt.Errorf("useradd %s: %w", name, err)
		}
	}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, err
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(gids, g.Gid) {
		if err := retry("usermod", "--append", "--groups", group, name); err != nil {
			return nil, fmt.Errorf("usermod %s: %w", name, err)
		}
	}
	return u, nil
}

// retry runs the command up to five times while it fails: the account
// tools lock /etc/passwd, and another test's may hold it.
func retry(name string, args ...string) error {
	var err error
	for range 5 {
		var out []byte
		if out, err = exec.Command(name, args...).CombinedOutput(); err == nil {
			return nil
		}
		err = fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		time.Sleep(200 * time.Millisecond)
	}
	return err
}
