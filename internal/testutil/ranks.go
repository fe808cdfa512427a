package testutil

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RankJob is a two-rank job on a Testbed: a program started on each host as srun would start it
// (SLURM_PROCID, SLURM_NTASKS, GOARMCI_RDV on rail Rendezvous of host 0, GOARMCI_RAILS with the
// host's rails), with Env added. The program is Exe, or else this test binary running test Test.
type RankJob struct {
	Exe        []string // program and arguments (empty: this test binary)
	Test       string   // the test to run in each rank (-test.run=^Test$) when Exe is empty
	Env        []string // added to every rank's environment (the child marker, knobs)
	Rendezvous int      // the rail whose host-0 address serves the rendezvous
	Port       int      // the rendezvous port
}

// Run starts both ranks and waits for them. onLine, when set, is called with every line each
// rank prints, as it comes, from the rank's own reader goroutine (it must not block for long).
// It returns each rank's whole output and exit error.
func (j RankJob) Run(ctx context.Context, t testing.TB, tb *Testbed, onLine func(rank int, line string)) (outs [2]string, errs [2]error) {
	t.Helper()
	var (
		mu    sync.Mutex
		bufs  [2]strings.Builder
		pipes [2]*io.PipeWriter
		lines sync.WaitGroup
	)
	var cmds [2]*exec.Cmd
	for rank := 0; rank < 2; rank++ {
		argv := j.Exe
		if len(argv) == 0 {
			argv = []string{os.Args[0], "-test.run=^" + j.Test + "$", "-test.count=1", "-test.v"}
		}
		c := tb.Command(ctx, rank, argv[0], argv[1:]...)
		c.Env = append(append(CleanEnv(), "SLURM_PROCID="+strconv.Itoa(rank), "SLURM_NTASKS=2",
			fmt.Sprintf("SLURM_JOB_ID=%d%d", 80+len(j.Test)%10, os.Getpid()%100000), "SLURM_STEP_ID=0",
			fmt.Sprintf("GOARMCI_RDV=%s:%d", tb.Hosts[0].Addrs[j.Rendezvous], j.Port),
			"GOARMCI_RAILS="+strings.Join(tb.Hosts[rank].Addrs, ","), "TESTBED_IFACES="+strings.Join(tb.Hosts[rank].Ifaces, ",")), j.Env...)
		pr, pw := io.Pipe()
		pipes[rank] = pw
		c.Stdout, c.Stderr = pw, pw
		if err := c.Start(); err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		cmds[rank] = c
		lines.Add(1)
		go func() {
			defer lines.Done()
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				line := sc.Text()
				mu.Lock()
				bufs[rank].WriteString(line + "\n")
				mu.Unlock()
				if onLine != nil {
					onLine(rank, line)
				}
			}
			_, _ = io.Copy(io.Discard, pr)
		}()
	}
	for rank, c := range cmds {
		errs[rank] = c.Wait()
		pipes[rank].Close()
	}
	lines.Wait()
	for rank := range outs {
		outs[rank] = bufs[rank].String()
	}
	return outs, errs
}

// CleanEnv is this process's environment without the variables of a launcher or of goarmci
// (GOARMCI_*, SLURM_*, OMPI_*, PMI_*, PMIX_*), for children that get their own.
func CleanEnv() []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range []string{"GOARMCI_", "SLURM_", "OMPI_", "PMI_", "PMIX_"} {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// RunPartitionPhases runs job, whose two ranks print "READY 1" and later "READY 2", and cuts the
// hosts apart twice: when both printed READY 1, every rail goes down for 500 ms (a partition
// shorter than any sensible GOARMCI_PARTITION_TIMEOUT), and when both printed READY 2, every rail
// goes down for good. It fails the test when a rank fails, logs the lines starting with SHORT or
// LONG, and returns the ranks' outputs.
func RunPartitionPhases(ctx context.Context, t testing.TB, tb *Testbed, job RankJob) [2]string {
	t.Helper()
	ready := [2]chan struct{}{make(chan struct{}, 2), make(chan struct{}, 2)}
	pctx, pcancel := context.WithCancel(ctx) // ends the phases when the job ends early
	defer pcancel()
	both := func() bool {
		for r := range ready {
			select {
			case <-ready[r]:
			case <-pctx.Done():
				return false
			}
		}
		return true
	}
	all := func(up bool) { // on a goroutine of its own: report, do not FailNow
		for r := 0; r < tb.Rails(); r++ {
			if err := tb.Link(r, up); err != nil {
				t.Errorf("%v", err)
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if both() {
			all(false)
			_ = sleepCtx(pctx, 500*time.Millisecond) // the fault's length, not an assertion
			all(true)
		}
		if both() {
			all(false)
		}
	}()
	outs, errs := job.Run(ctx, t, tb, func(rank int, line string) {
		if strings.HasPrefix(line, "READY") {
			ready[rank] <- struct{}{}
		}
	})
	pcancel()
	<-done
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v\n%s", rank, err, outs[rank])
		}
		for _, l := range strings.Split(outs[rank], "\n") {
			if strings.HasPrefix(l, "SHORT") || strings.HasPrefix(l, "LONG") {
				t.Logf("rank %d: %s", rank, l)
			}
		}
	}
	return outs
}

// PartitionTest is the parent side of a partition test on a two-host testbed with
// GOARMCI_PARTITION_TIMEOUT=3s: it skips with -short (and without root), re-runs test in both
// hosts with childEnv set, cuts the hosts apart as RunPartitionPhases does, and fails unless
// both ranks report the collective done across the short partition ("SHORT ok") and an
// ErrPartition across the long one ("LONG partition=true"). The children run PartitionSteps.
func PartitionTest(t *testing.T, test, childEnv string, port int) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes in network namespaces")
	}
	tb := NewTestbed(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := RankJob{Test: test, Env: []string{childEnv, "GOARMCI_PARTITION_TIMEOUT=3s"}, Rendezvous: 1,
		Port: port + os.Getpid()%1500}
	for rank, out := range RunPartitionPhases(ctx, t, tb, job) {
		if !strings.Contains(out, "SHORT ok") || !strings.Contains(out, "LONG partition=true") {
			t.Fatalf("rank %d: want the collective done across the short partition and ErrPartition across the long one:\n%s", rank, out)
		}
	}
}

// PartitionSteps is one rank's side of PartitionTest: op is the collective under test (a
// barrier, a fence) and isPartition recognizes the partition error. Rank 1 enters each phase's
// op 300 ms late, so rank 0 waits alone when the rails go (its own part of the collective got
// through; only a probe of the rank it waits for can end its wait). A hang ends with ctx.
func PartitionSteps(ctx context.Context, t testing.TB, rank int, op func(context.Context) error, isPartition func(error) bool) {
	t.Helper()
	must := func(err error, what string) {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	late := func() {
		if rank == 1 {
			time.Sleep(300 * time.Millisecond)
		}
	}
	must(op(ctx), "before the partitions")
	fmt.Println("READY 1")
	late()
	start := time.Now()
	must(op(ctx), "across a short partition")
	fmt.Printf("SHORT ok after %v\n", time.Since(start).Round(time.Millisecond))
	must(op(ctx), "after the short partition")
	fmt.Println("READY 2")
	if rank == 1 {
		// enter only once the rails are down for good (under load the cut can take longer
		// than any fixed delay): rank 0 then waits alone, and this rank's part cannot get through
		railsDown(ctx)
	}
	start = time.Now()
	err := op(ctx)
	if err == nil {
		t.Fatalf("across a long partition: no error")
	}
	must(ctx.Err(), "the collective hung until the test's deadline")
	fmt.Printf("LONG partition=%v after %v: %v\n", isPartition(err), time.Since(start).Round(time.Millisecond), err)
}

// HostJob is a job of PerHost ranks on every host of a Testbed, started as srun starts a job
// step with block placement (ranks h·PerHost … h·PerHost+PerHost-1 on host h; SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_TASKS_PER_NODE), GOARMCI_RDV on rail
// Rendezvous of host 0 and GOARMCI_RAILS with the host's rails, plus Env. Ranks of one host
// share memory; ranks of different hosts reach each other over the rails.
type HostJob struct {
	Exe        []string // program and arguments
	Env        []string // added to every rank's environment
	PerHost    int      // ranks per host (at least 1)
	Rendezvous int      // the rail whose host-0 address serves the rendezvous
	Port       int      // the rendezvous port
}

// Run starts every rank and waits for all of them; it returns each rank's output (stdout and
// stderr) and exit error, indexed by rank.
func (j HostJob) Run(ctx context.Context, t testing.TB, tb *Testbed) (outs []string, errs []error) {
	t.Helper()
	hosts, k := len(tb.Hosts), max(j.PerHost, 1)
	n := hosts * k
	bufs := make([]lockedBuffer, n)
	cmds := make([]*exec.Cmd, n)
	job := fmt.Sprintf("%d", 70000+os.Getpid()%10000)
	for rank := 0; rank < n; rank++ {
		h := rank / k
		c := tb.Command(ctx, h, j.Exe[0], j.Exe[1:]...)
		c.Env = append(append(CleanEnv(), "SLURM_PROCID="+strconv.Itoa(rank), "SLURM_NTASKS="+strconv.Itoa(n),
			"SLURM_JOB_ID="+job, "SLURM_STEP_ID=0", "SLURM_LOCALID="+strconv.Itoa(rank%k),
			"SLURM_NODEID="+strconv.Itoa(h), fmt.Sprintf("SLURM_TASKS_PER_NODE=%d(x%d)", k, hosts),
			fmt.Sprintf("GOARMCI_RDV=%s:%d", tb.Hosts[0].Addrs[j.Rendezvous], j.Port),
			"GOARMCI_RAILS="+strings.Join(tb.Hosts[h].Addrs, ",")), j.Env...)
		c.Stdout, c.Stderr = &bufs[rank], &bufs[rank]
		if err := c.Start(); err != nil {
			for _, started := range cmds[:rank] {
				_ = started.Process.Kill()
				_ = started.Wait()
			}
			t.Fatalf("rank %d: %v", rank, err)
		}
		cmds[rank] = c
	}
	outs, errs = make([]string, n), make([]error, n)
	for rank, c := range cmds {
		errs[rank] = c.Wait()
		outs[rank] = bufs[rank].String()
	}
	return outs, errs
}

// lockedBuffer collects a child's stdout and stderr written from two copying goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// railsDown waits (polling, bounded by ctx) until every interface of TESTBED_IFACES (this
// host's rails, set by RankJob.Run) has lost its carrier; without the variable it sleeps 300 ms.
func railsDown(ctx context.Context) {
	ifaces := strings.Split(os.Getenv("TESTBED_IFACES"), ",")
	if ifaces[0] == "" {
		_ = sleepCtx(ctx, 300*time.Millisecond)
		return
	}
	for ctx.Err() == nil {
		down := true
		for _, ifc := range ifaces {
			b, err := os.ReadFile("/sys/class/net/" + ifc + "/carrier")
			if err == nil && strings.TrimSpace(string(b)) == "1" {
				down = false
			}
		}
		if down {
			return
		}
		_ = sleepCtx(ctx, 10*time.Millisecond)
	}
}

// RunKernel builds the NAS-style program in the current directory (the test's package), runs it
// as a HostJob with args on tb (perHost ranks per host, rendezvous at port), and fails the test
// unless every rank succeeds and rank 0 reports "Verification = SUCCESSFUL" for every rank
// ("Ranks = N"). It returns each rank's output.
func RunKernel(t testing.TB, tb *Testbed, perHost, port int, args ...string) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kernel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	job := HostJob{Exe: append([]string{bin}, args...), PerHost: perHost, Port: port}
	outs, errs := job.Run(ctx, t, tb)
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v\n%s", rank, err, outs[rank])
		}
	}
	want := fmt.Sprintf("Ranks = %d", len(tb.Hosts)*perHost)
	if !strings.Contains(outs[0], "Verification = SUCCESSFUL") || !strings.Contains(outs[0], want) {
		t.Fatalf("rank 0 reports no successful verification of %s:\n%s", want, outs[0])
	}
	t.Logf("rank 0:\n%s", outs[0])
	return outs
}

// RunKernelAcrossTwoHosts runs the NAS-style program in the current directory with args on two
// hosts whose rail meets in a switch, with one and then two ranks per host (rendezvous ports
// from port), as subtests: every run must verify (RunKernel), and host 1 must receive more than
// minRx bytes on its link, so the kernel's exchanges really crossed the network. It skips under
// -short and without root (NewSwitchedTestbed).
func RunKernelAcrossTwoHosts(t *testing.T, port int, minRx uint64, args ...string) {
	if testing.Short() {
		t.Skip("builds and runs two to four processes")
	}
	tb := NewSwitchedTestbed(t, 2, 1)
	for perHost := 1; perHost <= 2; perHost++ {
		t.Run(fmt.Sprintf("ranks-per-host=%d", perHost), func(t *testing.T) {
			rx0, _ := tb.Bytes(1, 0)
			RunKernel(t, tb, perHost, port+10*perHost, args...)
			rx1, _ := tb.Bytes(1, 0)
			if rx1-rx0 <= minRx {
				t.Fatalf("host 1 received %d bytes, want more than %d", rx1-rx0, minRx)
			}
		})
	}
}
