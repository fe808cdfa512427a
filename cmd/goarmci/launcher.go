package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/goarmci/goarmci/bench/progress"
	"github.com/goarmci/goarmci/internal/bootstrap"
	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/internal/secret"
)

// job is one `goarmci run`: np local ranks of exe around a rendezvous service.
type job struct {
	np             int
	exe            string
	args           []string
	env            []string
	transport      string
	startupTimeout time.Duration
	timeout        time.Duration // whole job; 0 = none
	grace          time.Duration // SIGTERM → SIGKILL
	stdin          io.Reader
	stdout, stderr io.Writer
	// progress: show the ranks started and finished and the elapsed time on stderr (a bar on a
	// terminal, else a line per event and one every runHeartbeat).
	progress bool
}

// runHeartbeat is how often `goarmci run --progress` says the job is still running when its
// standard error is no terminal.
const runHeartbeat = 30 * time.Second

// isTerminal reports whether w is a terminal (an *os.File on a tty).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// rankExit is how one rank ended.
type rankExit struct {
	rank int
	code int // exit code, 128+signal when killed by a signal
	err  error
}

const exitTimeout = 124 // as coreutils timeout

// run starts the ranks and waits for them; it returns run's exit code: 0 when every rank
// succeeded, else the first failing rank's code.
func (j *job) run(ctx context.Context) int {
	var prog *progress.Bar // nil without --progress: its methods do nothing
	stdout, stderr := j.stdout, j.stderr
	if j.progress {
		prog = progress.New(j.stderr, "goarmci: run", "ranks finished", j.np, progress.WithHeartbeat(runHeartbeat))
		defer prog.End()
		stdout, stderr = prog.Writer(j.stdout), prog.Writer(j.stderr)
		prog.Start(fmt.Sprintf("starting %d ranks", j.np))
	}
	errOut := &lockedWriter{w: stderr}
	say := func(format string, a ...any) { errOut.Write([]byte("goarmci: " + fmt.Sprintf(format, a...) + "\n")) }

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		say("rendezvous: %v", err)
		return 1
	}
	jobID := newJobID()
	// The ranks' failure and partition timeouts are the rendezvous' (GOARMCI_FAILURE_TIMEOUT and
	// GOARMCI_PARTITION_TIMEOUT of the job's environment; a bad value is the ranks' to report).
	failTimeout, partTimeout := bootstrap.DefaultFailureTimeout, bootstrap.DefaultPartitionTimeout
	if c, _, err := config.FromEnviron(j.env); err == nil {
		failTimeout, partTimeout = c.FailureTimeout, c.PartitionTimeout
	}
	// The job's secret: the ranks get it in their environment (never on a command line) and
	// prove it to the rendezvous, which proves it back (internal/bootstrap auth.go). The launcher
	// waits for every rank: it tells the rendezvous how each ended, so the survivors' errors say
	// it ("rank 1 was killed by signal 9 (SIGKILL) before Finalize").
	key, err := secret.New()
	if err != nil {
		ln.Close()
		say("rendezvous: %v", err)
		return 1
	}
	srv, err := bootstrap.NewServer(ln, j.np, bootstrap.WithJobID(jobID), bootstrap.WithSecret(key),
		bootstrap.WithServerFailureTimeout(failTimeout), bootstrap.WithServerPartitionTimeout(partTimeout),
		bootstrap.WithExitStatuses())
	if err != nil {
		ln.Close()
		say("rendezvous: %v", err)
		return 1
	}
	defer srv.Close()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// The ranks write through pipes: with the format left to "auto", they log console lines
	// when the launcher's own stderr is a terminal, as a rank started alone on one would.
	consoleLogs := !slices.ContainsFunc(j.env, func(kv string) bool { return strings.HasPrefix(kv, "GOARMCI_LOG_FORMAT=") }) &&
		isTerminal(j.stderr)
	outs := &lockedWriter{w: stdout}
	cmds := make([]*exec.Cmd, j.np)
	prefixers := make([]*prefixWriter, 0, 2*j.np)
	exits := make(chan rankExit, j.np)
	var waiters sync.WaitGroup
	started := 0
	for r := range j.np {
		cmd := exec.Command(j.exe, j.args...)
		cmd.Env = append(append([]string(nil), j.env...),
			config.EnvRank+"="+strconv.Itoa(r),
			config.EnvSize+"="+strconv.Itoa(j.np),
			config.EnvRDV+"="+srv.Addr().String(),
			config.EnvJobID+"="+jobID,
			config.EnvJobSecret+"="+key.Hex(),
			config.EnvLocalRank+"="+strconv.Itoa(r),
			config.EnvLocalSize+"="+strconv.Itoa(j.np),
		)
		if j.transport != "" {
			cmd.Env = append(cmd.Env, "GOARMCI_TRANSPORT="+j.transport)
		}
		if j.startupTimeout > 0 {
			cmd.Env = append(cmd.Env, "GOARMCI_STARTUP_TIMEOUT="+j.startupTimeout.String())
		}
		if consoleLogs {
			cmd.Env = append(cmd.Env, "GOARMCI_LOG_FORMAT="+string(config.LogConsole))
		}
		po := &prefixWriter{prefix: []byte("[" + strconv.Itoa(r) + "] "), out: outs}
		pe := &prefixWriter{prefix: []byte("[" + strconv.Itoa(r) + "] "), out: errOut}
		prefixers = append(prefixers, po, pe)
		cmd.Stdout, cmd.Stderr = po, pe
		if r == 0 && j.stdin != nil {
			if f, ok := j.stdin.(*os.File); ok {
				cmd.Stdin = f // rank 0 reads the job's stdin, as mpirun
			}
		}
		// Own process group: a terminal's ^C reaches only goarmci, which forwards it once. The
		// kernel kills the rank if goarmci itself dies (kill -9, a crash): no rank outlives its
		// launcher.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.WaitDelay = 2 * time.Second
		if err := cmd.Start(); err != nil {
			say("rank %d: %v", r, err)
			exits <- rankExit{rank: r, code: 1, err: err}
			break
		}
		cmds[r] = cmd
		started++
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			err := cmd.Wait()
			if st, ok := exitStatus(cmd); ok {
				srv.RankExited(r, st)
			}
			exits <- rankExit{rank: r, code: exitCode(cmd, err), err: err}
		}()
	}

	var (
		timeoutC  <-chan time.Time
		killC     <-chan time.Time
		firstCode = 0
		stopping  = false
		remaining = started
	)
	if started < j.np {
		remaining++ // the failed start sits in exits
	}
	if started > 0 {
		prog.Note(fmt.Sprintf("%d of %d ranks started", started, j.np))
		prog.Start("running")
	}
	if j.timeout > 0 {
		t := time.NewTimer(j.timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	done := make([]bool, j.np)
	stop := func(sig syscall.Signal) {
		for r, c := range cmds {
			if c != nil && !done[r] {
				_ = syscall.Kill(-c.Process.Pid, sig)
			}
		}
	}
	startKillTimer := func() {
		if killC == nil {
			killC = time.After(j.grace)
		}
	}
	for remaining > 0 {
		select {
		case e := <-exits:
			remaining--
			done[e.rank] = true
			prog.Step(fmt.Sprintf("rank %d finished, %s", e.rank, describeExit(e)))
			if e.code != 0 && firstCode == 0 {
				firstCode = e.code
				if !stopping {
					say("rank %d failed (%s); stopping the other ranks", e.rank, describeExit(e))
					stopping = true
					stop(syscall.SIGTERM)
					startKillTimer()
				}
			}
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if stopping {
				stop(syscall.SIGKILL) // second signal: no more patience
				continue
			}
			stopping = true
			stop(sig)
			startKillTimer()
			if firstCode == 0 {
				firstCode = 128 + int(sig)
			}
		case <-timeoutC:
			// As mpirun --get-stack-traces: SIGQUIT makes a Go rank print every goroutine's
			// stack on its stderr (prefixed with its rank here) and exit with status 2; what is
			// left after the grace is killed.
			say("job timeout %v reached; the ranks' goroutine stacks follow (SIGQUIT), then they are stopped", j.timeout)
			if firstCode == 0 {
				firstCode = exitTimeout
			}
			stopping = true
			stop(syscall.SIGQUIT)
			startKillTimer()
		case <-killC:
			stop(syscall.SIGKILL)
		}
	}
	waiters.Wait()
	for _, p := range prefixers {
		p.Flush()
	}
	return firstCode
}

func exitCode(cmd *exec.Cmd, err error) int {
	if err == nil {
		return 0
	}
	if cmd.ProcessState == nil {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		if c := ws.ExitStatus(); c > 0 {
			return c
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	return 1
}

// exitStatus is how cmd's process ended, once waited for; false when it never ran.
func exitStatus(cmd *exec.Cmd) (bootstrap.ExitStatus, bool) {
	if cmd.ProcessState == nil {
		return bootstrap.ExitStatus{}, false
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return bootstrap.Exited(cmd.ProcessState.ExitCode()), true
	case ws.Signaled():
		return bootstrap.Killed(ws.Signal()), true
	}
	return bootstrap.Exited(ws.ExitStatus()), true
}

func describeExit(e rankExit) string {
	if e.code > 128 && e.code < 128+65 {
		return "killed by " + bootstrap.Killed(syscall.Signal(e.code-128)).String()
	}
	return fmt.Sprintf("exit code %d", e.code)
}

func newJobID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "run-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// lockedWriter serializes whole-line writes from several ranks.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixWriter prefixes every line with the rank and writes whole lines only, so lines of
// different ranks never interleave. Flush writes a final unterminated line.
type prefixWriter struct {
	prefix []byte
	out    io.Writer
	mu     sync.Mutex
	buf    []byte
}

// maxPartialLine: a line longer than this is written in pieces (each piece prefixed).
const maxPartialLine = 64 << 10

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	p.buf = append(p.buf, b...)
	var block []byte
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			if len(p.buf) >= maxPartialLine {
				block = append(append(append(block, p.prefix...), p.buf...), '\n')
				p.buf = p.buf[:0]
			}
			break
		}
		block = append(append(block, p.prefix...), p.buf[:i+1]...)
		p.buf = p.buf[i+1:]
	}
	if len(block) > 0 {
		if _, err := p.out.Write(block); err != nil {
			return 0, err
		}
	}
	if len(p.buf) == 0 {
		p.buf = nil
	}
	return n, nil
}

// Flush writes an unterminated last line, adding the newline.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		line := append(append(append([]byte(nil), p.prefix...), p.buf...), '\n')
		_, _ = p.out.Write(line)
		p.buf = nil
	}
}
