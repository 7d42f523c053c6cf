package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/gpuattest/gpuattest/internal/rusage"
)

// spawnerEnv makes this program (or its test binary) a spawner: a small
// process that starts the measured gpuattest calls. A child's ru_maxrss
// starts at the peak of the process it was forked from, and the campaign
// itself holds megabytes of generated inputs; the spawner never does.
const spawnerEnv = "GPUATTEST_ADVERSARIAL_SPAWNER"

// spawnReq asks the spawner to run a command.
type spawnReq struct {
	ID      int
	Dir     string
	Env     []string
	Argv    []string
	Timeout time.Duration
	// KillAfter, when set, sends SIGKILL after this long.
	KillAfter time.Duration
	// Cred, when set, runs the command as that user (the fleet
	// category's co-tenants).
	Cred *syscall.Credential `json:",omitempty"`
}

// spawnResp is what the command did.
type spawnResp struct {
	ID     int
	Usage  rusage.Usage
	Output []byte
	Err    string
}

// serveSpawner answers requests from r on w until r ends.
func serveSpawner(r io.Reader, w io.Writer) error {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	var wg sync.WaitGroup
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var req spawnReq
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return err
		}
		wg.Go(func() {
			resp := spawn(req)
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(resp)
		})
	}
	wg.Wait()
	return sc.Err()
}

// spawn runs one request.
func spawn(req spawnReq) spawnResp {
	ctx, cancel := context.WithTimeout(context.Background(), req.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Dir, cmd.Env = req.Dir, req.Env
	if req.Cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: req.Cred}
	}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return spawnResp{ID: req.ID, Err: err.Error()}
	}
	if req.KillAfter > 0 {
		t := time.AfterFunc(req.KillAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer t.Stop()
	}
	u := rusage.Wait(cmd, start)
	return spawnResp{ID: req.ID, Usage: u, Output: out.Bytes()}
}

// syncBuffer is a bytes buffer safe for the two writers of a command.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) < 1<<20 {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf
}

// spawner is the campaign's side of the spawner process.
type spawner struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	mu      sync.Mutex
	next    int
	pending map[int]chan spawnResp
	done    chan struct{}
}

// startSpawner starts this executable as a spawner.
func startSpawner() (*spawner, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), spawnerEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &spawner{cmd: cmd, in: in, pending: map[int]chan spawnResp{}, done: make(chan struct{})}
	go s.read(out)
	return s, nil
}

func (s *spawner) read(r io.Reader) {
	defer close(s.done)
	dec := json.NewDecoder(r)
	for {
		var resp spawnResp
		if err := dec.Decode(&resp); err != nil {
			return
		}
		s.mu.Lock()
		ch := s.pending[resp.ID]
		delete(s.pending, resp.ID)
		s.mu.Unlock()
		ch <- resp
	}
}

// run runs req in the spawner and waits for its answer.
func (s *spawner) run(ctx context.Context, req spawnReq) (rusage.Usage, string, error) {
	ch := make(chan spawnResp, 1)
	s.mu.Lock()
	s.next++
	req.ID = s.next
	s.pending[req.ID] = ch
	b, err := json.Marshal(req)
	if err == nil {
		_, err = s.in.Write(append(b, '\n'))
	}
	s.mu.Unlock()
	if err != nil {
		return rusage.Usage{}, "", fmt.Errorf("spawner: %w", err)
	}
	select {
	case resp := <-ch:
		if resp.Err != "" {
			return resp.Usage, string(resp.Output), errors.New(resp.Err)
		}
		return resp.Usage, string(resp.Output), nil
	case <-s.done:
		return rusage.Usage{}, "", errors.New("spawner: exited")
	case <-ctx.Done():
		return rusage.Usage{}, "", ctx.Err()
	}
}

// close ends the spawner once its commands are done.
func (s *spawner) close() error {
	s.in.Close()
	return s.cmd.Wait()
}
