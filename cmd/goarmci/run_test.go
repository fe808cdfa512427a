package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	rankExe    string // testdata/rank, built once
	goarmciExe string // this command, built once (signal test)
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "goarmci-test-")
	if err != nil {
		panic(err)
	}
	rankExe = filepath.Join(dir, "rank")
	goarmciExe = filepath.Join(dir, "goarmci")
	// goarmci-plot beside goarmci, where bench -plot looks first.
	for _, b := range [][2]string{{rankExe, "./testdata/rank"}, {goarmciExe, "."}, {filepath.Join(dir, plotCmd), "../" + plotCmd}} {
		out, err := exec.Command(goTool(), "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b[1], err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = execute(args, nil, &o, &e)
	return code, o.String(), e.String()
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	sort.Strings(lines)
	return lines
}

func TestRunPrefixesEveryRank(t *testing.T) {
	code, out, errOut := runCLI(t, "run", "-np", "4", rankExe)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Equal(t, []string{
		"[0] rank 0 of 4 sees 0,1,2,3 local [0 1 2 3]",
		"[1] rank 1 of 4 sees 0,1,2,3 local [0 1 2 3]",
		"[2] rank 2 of 4 sees 0,1,2,3 local [0 1 2 3]",
		"[3] rank 3 of 4 sees 0,1,2,3 local [0 1 2 3]",
	}, sortedLines(out))
	assert.Equal(t, []string{"[0] stderr of 0", "[1] stderr of 1", "[2] stderr of 2", "[3] stderr of 3"},
		sortedLines(errOut))
}

func TestRunBuildsPackage(t *testing.T) {
	code, out, errOut := runCLI(t, "run", "--np", "2", "./testdata/rank", "partial")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Contains(t, out, "[0] rank 0 of 2 sees 0,1")
	assert.Contains(t, out, "[1] rank 1 of 2 sees 0,1")
	// An unterminated last line still gets its prefix and a newline.
	assert.Contains(t, out, "[0] no newline\n")
	assert.Contains(t, out, "[1] no newline\n")
}

// --progress writes plain lines to a stderr that is no terminal: the ranks started, then one
// line per rank that finished, each with the counts and the elapsed time; without it, none.
func TestRunProgressLines(t *testing.T) {
	code, out, errOut := runCLI(t, "run", "-np", "3", "--progress", rankExe)
	require.Equal(t, 0, code, errOut)
	assert.Len(t, sortedLines(out), 3)
	var prog []string
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if strings.HasPrefix(l, "goarmci: run: ") {
			// The elapsed time is the run's own: keep the counts.
			prog = append(prog, regexp.MustCompile(`, [0-9.]+s\)$`).ReplaceAllString(l, ")"))
		}
	}
	require.Len(t, prog, 4, errOut)
	assert.Equal(t, "goarmci: run: 3 of 3 ranks started (0/3 ranks finished)", prog[0])
	finished := regexp.MustCompile(`^goarmci: run: rank ([0-2]) finished, exit code 0 \(([1-3])/3 ranks finished\)$`)
	ranks := map[string]bool{}
	for i, l := range prog[1:] {
		m := finished.FindStringSubmatch(l)
		require.NotNil(t, m, l)
		assert.Equal(t, fmt.Sprint(i+1), m[2], l)
		ranks[m[1]] = true
	}
	assert.Len(t, ranks, 3, "each rank once")

	code, _, errOut = runCLI(t, "run", "-np", "2", "--progress", "--grace", "200ms", rankExe, "fail", "1", "7")
	assert.Equal(t, 7, code)
	assert.Contains(t, errOut, "goarmci: run: rank 1 finished, exit code 7 (1/2 ranks finished, ")
	assert.Regexp(t, `goarmci: run: rank 0 finished, killed by signal 15 \(SIGTERM\) \(2/2 ranks finished, [0-9.]+s\)`, errOut)

	_, _, errOut = runCLI(t, "run", "-np", "2", rankExe)
	assert.NotContains(t, errOut, "goarmci: run:", "off by default")
}

func TestRunFailurePropagates(t *testing.T) {
	code, out, errOut := runCLI(t, "run", "-np", "3", "--grace", "200ms", rankExe, "fail", "2", "9")
	assert.Equal(t, 9, code)
	assert.Contains(t, errOut, "rank 2 failed (exit code 9)")
	assert.Contains(t, out, "[2] rank 2 of 3 sees 0,1,2")
}

func TestRunSignaledRank(t *testing.T) {
	code, _, errOut := runCLI(t, "run", "-np", "2", rankExe, "selfkill", "1")
	assert.Equal(t, 128+int(syscall.SIGKILL), code)
	assert.Contains(t, errOut, "rank 1 failed (killed by signal 9 (SIGKILL))")
}

// TestRunSurvivorsSeeExitStatus: the launcher tells the rendezvous how a rank ended, so the
// survivors' errors say it in the user's terms.
func TestRunSurvivorsSeeExitStatus(t *testing.T) {
	for _, tc := range []struct{ how, want string }{
		{"3", "rank 1 exited (status 3) before Finalize"},
		{"0", "rank 1 exited (status 0) before Finalize"},
		{"kill", "rank 1 was killed by signal 9 (SIGKILL) before Finalize"},
	} {
		t.Run(tc.how, func(t *testing.T) {
			_, out, errOut := runCLI(t, "run", "-np", "3", "--grace", "5s", rankExe, "report", "1", tc.how)
			for _, r := range []int{0, 2} {
				assert.Contains(t, out, fmt.Sprintf("[%d] barrier: ", r), "stderr: %s", errOut)
				assert.Contains(t, out, fmt.Sprintf("[%d] barrier: %s\n", r, tc.want), "stderr: %s", errOut)
			}
		})
	}
}

// TestRunTimeoutPrintsStacks: when --timeout fires, every rank prints its goroutine stacks
// (SIGQUIT) before it is stopped: the ranks waiting for the sleeping one show the barrier.
func TestRunTimeoutPrintsStacks(t *testing.T) {
	code, _, errOut := runCLI(t, "run", "-np", "3", "--timeout", "2s", rankExe, "hang", "1")
	assert.Equal(t, exitTimeout, code)
	assert.Contains(t, errOut, "goroutine stacks follow")
	for _, r := range []int{0, 2} {
		assert.Regexp(t, fmt.Sprintf(`(?m)^\[%d\] .*bootstrap\.\(\*Client\)\.Barrier`, r), errOut)
	}
	assert.Regexp(t, `(?m)^\[1\] time\.Sleep`, errOut, "the sleeping rank's stack too")
}

func TestRunTimeout(t *testing.T) {
	code, out, errOut := runCLI(t, "run", "-np", "2", "--timeout", "300ms", rankExe, "sleep")
	assert.Equal(t, exitTimeout, code)
	assert.Contains(t, errOut, "job timeout")
	_ = out
}

func TestRunBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-np", "0", rankExe},
		{"run", "-np", "-3", rankExe},
		{"run", rankExe}, // no -np
		{"run", "-np", "2"},
		{"run", "-np", "two", rankExe},
		{"run", "-np", "2", "--transport", "pigeon", rankExe},
		{"run", "--bogus", rankExe},
		{"nosuchcommand"},
	} {
		code, _, errOut := runCLI(t, args...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
		assert.NotEmpty(t, errOut, "%v", args)
	}
	code, _, errOut := runCLI(t, "run", "-np", "0", rankExe)
	require.Equal(t, 2, code)
	assert.Contains(t, errOut, "-np must be a positive number of ranks")

	code, _, errOut = runCLI(t, "run", rankExe)
	require.Equal(t, 2, code)
	assert.Contains(t, errOut, "run: missing -np N")
	assert.NotContains(t, errOut, "got 0")

	code, _, errOut = runCLI(t, "run", "-np", "1", "./testdata/does-not-exist")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "does-not-exist")
}

func TestRunTransportReachesRanks(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "show.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"$GOARMCI_RANK/$GOARMCI_SIZE $GOARMCI_TRANSPORT $GOARMCI_LOCAL_SIZE\"\n"), 0o755))
	code, out, errOut := runCLI(t, "run", "-np", "2", "--transport", "tcp", script)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, []string{"[0] 0/2 tcp 2", "[1] 1/2 tcp 2"}, sortedLines(out))
}

// TestRunForwardsSignals runs the real binary, waits until every rank sleeps, sends SIGINT
// to goarmci and expects the ranks to die of it (exit code 130).
func TestRunForwardsSignals(t *testing.T) {
	cmd, stdout, errOut := startSleepingJob(t, 3)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	_, _ = io.Copy(io.Discard, stdout)
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 128+int(syscall.SIGINT), ee.ExitCode(), "stderr: %s", errOut.String())
}

// startSleepingJob starts the real goarmci binary on np ranks of the rank helper in its sleep
// mode and returns once every rank printed that it sleeps, with the rest of the job's stdout and
// its stderr (where each rank printed its pid).
func startSleepingJob(t *testing.T, np int) (*exec.Cmd, io.Reader, *safeBuffer) {
	t.Helper()
	cmd := exec.Command(goarmciExe, "run", "-np", fmt.Sprint(np), rankExe, "sleep")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errOut := new(safeBuffer)
	cmd.Stderr = errOut
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	sleeping := 0
	for sleeping < np && sc.Scan() {
		if strings.HasSuffix(sc.Text(), "] sleeping") {
			sleeping++
		}
	}
	require.Equal(t, np, sleeping, "stderr: %s", errOut.String())
	return cmd, stdout, errOut
}

// safeBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMPIStyleArgs(t *testing.T) {
	cases := []struct{ in, want string }{
		{"run -np 4 prog -np 2", "run --np 4 prog -np 2"},
		{"run --timeout 5s -np 4 prog", "run --timeout 5s --np 4 prog"},
		{"run -np=4 prog", "run --np=4 prog"},
		{"run -- -np", "run -- -np"},
		{"info -np", "info -np"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, strings.Join(mpiStyleArgs(strings.Fields(c.in)), " "), c.in)
	}
}

func TestPrefixWriter(t *testing.T) {
	var out bytes.Buffer
	p := &prefixWriter{prefix: []byte("[7] "), out: &out}
	for _, chunk := range []string{"hel", "lo\nwor", "ld\n\nta", "il"} {
		n, err := p.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	assert.Equal(t, "[7] hello\n[7] world\n[7] \n", out.String())
	p.Flush()
	assert.Equal(t, "[7] hello\n[7] world\n[7] \n[7] tail\n", out.String())

	out.Reset()
	long := strings.Repeat("x", maxPartialLine+10)
	_, _ = p.Write([]byte(long)) // too long to hold: written at once, as a line
	_, _ = p.Write([]byte("tail"))
	p.Flush()
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, len(long)+4, len(lines[0]), "first line length")
	assert.True(t, strings.HasPrefix(lines[0], "[7] xxx"))
	assert.Equal(t, "[7] tail", lines[1])
}

func TestInfo(t *testing.T) {
	for _, k := range []string{"GOARMCI_RANK", "GOARMCI_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"} {
		t.Setenv(k, "")
	}
	t.Setenv("GOARMCI_APN", "1")
	t.Setenv("GOARMCI_RETRY_COUNT", "4")
	code, out, errOut := runCLI(t, "info")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, regexp.MustCompile(`(?m)^launcher\s+single$`), out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^GOARMCI_RETRY_COUNT\s+4\s+7\s+int\s+count\s+RC retransmissions`), out)
	assert.Contains(t, out, "GOARMCI_STRIPE_THRESHOLD")
	assert.Contains(t, out, "warning: GOARMCI_APN: unknown goarmci variable, ignored; did you mean GOARMCI_APM?")
	assert.Regexp(t, regexp.MustCompile(`(?m)^lo\s+\S`), out, "loopback interface listed")

	t.Setenv("GOARMCI_APM", "maybe")
	code, out, errOut = runCLI(t, "info")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "GOARMCI_APM")
	assert.Contains(t, errOut, "GOARMCI_APM")
}

// TestRanksDieWithTheLauncher: goarmci killed with SIGKILL (it can forward nothing) takes its
// ranks with it (Pdeathsig): every rank process is gone afterwards.
func TestRanksDieWithTheLauncher(t *testing.T) {
	cmd, _, errOut := startSleepingJob(t, 2)
	var pids []int
	for len(pids) < 2 { // the ranks' stderr lines may trail their stdout ones
		pids = pids[:0]
		for _, line := range strings.Split(errOut.String(), "\n") {
			var r, pid int
			if n, _ := fmt.Sscanf(line, "[%d] pid %d", &r, &pid); n == 2 {
				pids = append(pids, pid)
			}
		}
		if len(pids) < 2 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	give := time.Now().Add(time.Minute) // a safety net: the kernel kills them at once
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(give) {
				for _, p := range pids {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				t.Fatalf("rank process %d outlived its launcher", pid)
			}
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
				break // a zombie: dead, waiting for init to reap it
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestCleanup: goarmci cleanup removes a control file whose owner is gone and says so; an
// argument is a usage error.
func TestCleanup(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "goarmci.jdead.rank0.ctl")
	require.NoError(t, os.WriteFile(stale, make([]byte, 8192), 0o600))
	code, out, errOut := runCLI(t, "cleanup", "--dir", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "removed "+stale)
	_, err := os.Stat(stale)
	require.ErrorIs(t, err, os.ErrNotExist)
	code, out, _ = runCLI(t, "cleanup", "--dir", dir)
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to remove")
	code, _, _ = runCLI(t, "cleanup", "extra")
	require.Equal(t, 2, code)
}
