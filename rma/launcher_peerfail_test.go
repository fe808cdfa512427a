package rma_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
)

// launcherFailChildEnv marks a rank of TestLauncherPeerFailure: "<victim>:<exit|kill>:<statuses>".
const launcherFailChildEnv = "GOARMCITEST_LPF_CHILD"

const launcherFailRanks = 4

// TestLauncherPeerFailure runs a 4-rank job of this test binary under a real launcher — MPICH's
// mpiexec (Hydra, PMI-1), Open MPI's mpirun, goarmci run — whose ranks loop Put to the next rank,
// Get from the previous one, Acc into the next one and Barrier; rank 1 leaves in the middle,
// exiting early (status 0, no Finalize) or killing itself with SIGKILL. Every survivor must
// return an error wrapping rma.ErrPeerFailed naming rank 1 (with its exit status under goarmci
// run, which reports it; "its rendezvous connection closed" under the others), none may hang,
// the memory rank 1 could write must not change after the failure was seen, and survivors must
// still reach each other. The launchers' own reaction to a failed rank is turned off
// (mpiexec -disable-auto-cleanup, mpirun --mca orte_abort_on_non_zero_status 0, the ranks ignore
// goarmci run's SIGTERM), so what is tested is goarmci's detection. Skipped when the launcher is
// not installed, and with -short. Slurm's srun runs the same children in TestSlurmLaunch, on a
// private single-node Slurm the test starts.
func TestLauncherPeerFailure(t *testing.T) {
	if v := os.Getenv(launcherFailChildEnv); v != "" {
		launcherFailChild(v)
		return
	}
	if testing.Short() {
		t.Skip("starts a launcher and 4 processes: not with -short")
	}
	for _, launcher := range []string{"mpich", "openmpi", "goarmci"} {
		for _, fault := range []string{"exit", "kill"} {
			t.Run(launcher+"/"+fault, func(t *testing.T) {
				res := runLauncherFailJob(t, launcher, fault)
				for _, d := range res.detect {
					t.Logf("rank %d saw the failure after %v: %s", d.rank, d.after.Round(time.Microsecond), d.err)
				}
				if res.hydraKilled {
					t.Skip("mpiexec.mpich killed the whole job when rank 1 was killed by a signal (-disable-auto-cleanup or not): the survivors could not finish their checks")
				}
			})
		}
	}
}

// TestMeasureDetection collects the detection times of TestLauncherPeerFailure's jobs: the time
// from rank 1's exit (its own clock line, written just before it exits or kills itself) to each
// survivor's error, over 10 runs per launcher and fault; it logs the median and range of the
// survivors' times. Run only with GOARMCI_MEASURE=1:
//
//	GOARMCI_MEASURE=1 go test -run TestMeasureDetection -v ./rma/
func TestMeasureDetection(t *testing.T) {
	if os.Getenv("GOARMCI_MEASURE") != "1" {
		t.Skip("measurement: set GOARMCI_MEASURE=1")
	}
	const runs = 10
	var table []string
	for _, launcher := range []string{"goarmci", "mpich", "openmpi"} {
		for _, fault := range []string{"exit", "kill"} {
			t.Run(launcher+"/"+fault, func(t *testing.T) {
				var all []time.Duration
				for range runs {
					res := runLauncherFailJob(t, launcher, fault)
					for _, d := range res.detect {
						all = append(all, d.after)
					}
				}
				if len(all) == 0 {
					t.Skip("no survivor saw the failure (the launcher killed them first)")
				}
				slices.Sort(all)
				row := fmt.Sprintf("| %s | %s | %v | %v – %v | %d of %d |", launcher, fault, all[len(all)/2].Round(10*time.Microsecond),
					all[0].Round(10*time.Microsecond), all[len(all)-1].Round(10*time.Microsecond), len(all), runs*(launcherFailRanks-1))
				t.Log(row)
				table = append(table, row)
			})
		}
	}
	t.Log("| launcher | fault | median | range | survivor errors |\n" + strings.Join(table, "\n"))
}

type detection struct {
	rank  int
	after time.Duration
	err   string
}

type launcherFailResult struct {
	detect      []detection
	hydraKilled bool // mpiexec.mpich killed the survivors (a rank died by a signal)
}

var lpfLine = regexp.MustCompile(`LPF (EXIT|DETECT|SURVIVOR) (\d+) (\d+) ?(.*)`)

// runLauncherFailJob runs one job of TestLauncherPeerFailure and checks its outcome.
func runLauncherFailJob(t *testing.T, launcher, fault string) launcherFailResult {
	t.Helper()
	const victim = 1
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second) // safety net against a hang
	defer cancel()
	tmp := t.TempDir()
	statuses := "0"
	if launcher == "goarmci" {
		statuses = "1"
	}
	spec := fmt.Sprintf("%s=%d:%s:%s", launcherFailChildEnv, victim, fault, statuses)
	self := []string{os.Args[0], "-test.run=^TestLauncherPeerFailure$", "-test.count=1"}
	np := strconv.Itoa(launcherFailRanks)
	var cmd *exec.Cmd
	env := append(testutil.CleanEnv(), "TMPDIR="+tmp)
	switch launcher {
	case "mpich":
		p, err := exec.LookPath("mpiexec.mpich")
		if err != nil {
			t.Skip("MPICH not installed: no mpiexec.mpich on PATH (apt-get install mpich)")
		}
		cmd = exec.CommandContext(ctx, p, append([]string{"-disable-auto-cleanup", "-n", np, "-env", launcherFailChildEnv,
			spec[len(launcherFailChildEnv)+1:]}, self...)...)
	case "openmpi":
		p := findOpenMPIRun(t)
		args := []string{"--oversubscribe", "--mca", "orte_abort_on_non_zero_status", "0", "-np", np, "-x", spec}
		if os.Getuid() == 0 {
			args = append([]string{"--allow-run-as-root"}, args...)
		}
		cmd = exec.CommandContext(ctx, p, append(args, self...)...)
	case "goarmci":
		exe := filepath.Join(tmp, "goarmci")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", exe, "../cmd/goarmci").CombinedOutput()
		require.NoError(t, err, "building goarmci: %s", out)
		cmd = exec.CommandContext(ctx, exe, append([]string{"run", "-np", np, "--grace", "30s"}, self...)...)
		env = append(env, spec)
	}
	cmd.Env = env
	out := runLauncher(t, cmd, launcherFailRanks-1)
	require.NoError(t, ctx.Err(), "the job hung:\n%s", out)
	// Hydra kills every rank as soon as one dies by a signal, -disable-auto-cleanup or not: the
	// survivors may see the failure first (their DETECT lines are kept), but cannot finish.
	hydraKilled := launcher == "mpich" && fault == "kill" && strings.Contains(string(out), "TERMINATED WITH THE EXIT STRING: Killed")

	var exitAt time.Time
	var res launcherFailResult
	survived := map[int]bool{}
	for _, m := range lpfLine.FindAllStringSubmatch(string(out), -1) {
		rank, _ := strconv.Atoi(m[2])
		ns, _ := strconv.ParseInt(m[3], 10, 64)
		switch m[1] {
		case "EXIT":
			exitAt = time.Unix(0, ns)
		case "DETECT":
			res.detect = append(res.detect, detection{rank: rank, after: time.Duration(ns), err: m[4]})
		case "SURVIVOR":
			survived[rank] = true
		}
	}
	require.False(t, exitAt.IsZero(), "rank %d never left:\n%s", victim, out)
	for i := range res.detect {
		res.detect[i].after -= time.Duration(exitAt.UnixNano())
	}
	sort.Slice(res.detect, func(i, j int) bool { return res.detect[i].rank < res.detect[j].rank })
	if hydraKilled {
		res.hydraKilled = true
		return res
	}
	for r := range launcherFailRanks {
		if r != victim {
			require.True(t, survived[r], "survivor rank %d did not finish its checks:\n%s", r, out)
		}
	}
	require.Len(t, res.detect, launcherFailRanks-1, "%s", out)
	return res
}

// runLauncher runs the launcher cmd and returns its combined output. Once survivors ranks
// printed their "LPF SURVIVOR" line, the launcher has 5 s to return before it is killed: Open
// MPI 4.1's mpirun, with orte_abort_on_non_zero_status 0, never returns after a rank was killed
// by a signal, even once every other rank has exited (the launcher's hang, not a rank's).
func runLauncher(t *testing.T, cmd *exec.Cmd, survivors int) []byte {
	t.Helper()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	pw.Close()
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	var out []byte
	sc := bufio.NewScanner(pr)
	seen := 0
	for sc.Scan() {
		out = append(append(out, sc.Bytes()...), '\n')
		if strings.Contains(sc.Text(), "LPF SURVIVOR") {
			if seen++; seen == survivors {
				go func() {
					select {
					case <-waited:
					case <-time.After(5 * time.Second):
						t.Logf("%s did not return after every survivor finished: killed", filepath.Base(cmd.Path))
						_ = cmd.Process.Kill()
					}
				}()
			}
		}
	}
	<-waited
	pr.Close()
	return out
}

// launcherFailChild is one rank of TestLauncherPeerFailure: it prints "LPF ..." lines and exits
// 0 when its checks pass, else prints the failure and exits 1.
func launcherFailChild(spec string) {
	f := strings.Split(spec, ":")
	victim, _ := strconv.Atoi(f[0])
	fault, statuses := f[1], f[2] == "1"
	fail := func(format string, a ...any) {
		fmt.Printf("LPF FAILED: "+format+"\n", a...)
		os.Exit(1)
	}
	signal.Ignore(syscall.SIGTERM) // goarmci run stops the others when a rank fails
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		fail("init: %v", err)
	}
	me, n := rt.Rank(), rt.Size()
	seg, err := rt.Malloc(ctx, 64)
	if err != nil {
		fail("malloc: %v", err)
	}
	if err := rt.Barrier(ctx); err != nil {
		fail("barrier: %v", err)
	}
	next, prev := (me+1)%n, (me+n-1)%n
	one := binary.LittleEndian.AppendUint64(nil, 1)
	var ferr error
	for i := 0; ferr == nil; i++ {
		if me == victim && i == 20 {
			fmt.Printf("LPF EXIT %d %d\n", me, time.Now().UnixNano())
			if fault == "kill" {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			os.Exit(0) // returns from its work early: no Finalize
		}
		buf := []byte{byte(me), byte(i), 2, 3, 4, 5, 6, 7}
		got := make([]byte, 8)
		switch {
		case rt.Put(ctx, buf, seg, next, 8*me) != nil:
		case rt.Get(ctx, seg, prev, 8*prev, got) != nil:
		case rt.Acc(ctx, rma.AccInt64, 1, one, seg, next, 40) != nil:
		}
		ferr = rt.Barrier(ctx) // the operations above failed only if a rank did: so does this
	}
	fmt.Printf("LPF DETECT %d %d %v\n", me, time.Now().UnixNano(), ferr)
	want := fmt.Sprintf("rank %d exited before Finalize (its rendezvous connection closed)", victim)
	if statuses {
		want = fmt.Sprintf("rank %d exited (status 0) before Finalize", victim)
		if fault == "kill" {
			want = fmt.Sprintf("rank %d was killed by signal 9 (SIGKILL) before Finalize", victim)
		}
	}
	if !errors.Is(ferr, rma.ErrPeerFailed) || !strings.Contains(ferr.Error(), want) {
		fail("rank %d: %v, want ErrPeerFailed saying %q", me, ferr, want)
	}
	snap := make([]byte, 8)
	if err := rt.Get(ctx, seg, me, 8*victim, snap); err != nil {
		fail("reading own memory: %v", err)
	}
	if err := rt.Barrier(ctx); !errors.Is(err, rma.ErrPeerFailed) {
		fail("a later barrier: %v", err)
	}
	if err := rt.Put(ctx, []byte{1}, seg, victim, 0); !errors.Is(err, rma.ErrPeerFailed) {
		fail("a put to the failed rank: %v", err)
	}
	var survivors []int
	for r := range n {
		if r != victim {
			survivors = append(survivors, r)
		}
	}
	t := &childT{}
	survivorTraffic(ctx, t, rt, seg, survivors)
	if t.failed {
		fail("survivor traffic: %s", t.msg)
	}
	again := make([]byte, 8)
	if err := rt.Get(ctx, seg, me, 8*victim, again); err != nil || string(again) != string(snap) {
		fail("memory rank %d wrote changed after its failure: %x → %x (%v)", victim, snap, again, err)
	}
	fmt.Printf("LPF SURVIVOR %d 0 ok\n", me)
	if err := rt.Finalize(ctx); err != nil && !errors.Is(err, rma.ErrPeerFailed) {
		fail("finalize: %v", err)
	}
	os.Exit(0)
}

// childT is the testing.TB of a child process: it records a failure and stops the goroutine.
type childT struct {
	testing.TB
	failed bool
	msg    string
}

func (c *childT) Helper() {}

func (c *childT) Errorf(format string, a ...any) {
	c.failed = true
	c.msg += fmt.Sprintf(format, a...)
}

func (c *childT) FailNow() {
	c.failed = true
	fmt.Printf("LPF FAILED: %s\n", c.msg)
	os.Exit(1)
}
