package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
)

// TestRailPulledMidRun runs CG class W with one rank on each of two hosts joined by two rails and
// pulls rail 0's cable as soon as the first outer iteration is printed, plugging it back a moment
// later (seed 003's experiment: a fault in the middle of a run). The run must still verify: the
// queue pairs migrate to rail 1 (APM) or are recovered in software, and nothing is lost or
// applied twice. The rendezvous uses rail 1, which stays up. Skips without root.
func TestRailPulledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two processes")
	}
	tb := testutil.NewTestbed(t, 2)
	bin := filepath.Join(t.TempDir(), "cg")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rdv := fmt.Sprintf("%s:%d", tb.Hosts[0].Addrs[1], 29500+os.Getpid()%400)
	var outs [2]strings.Builder
	var mu sync.Mutex
	started := make(chan struct{})
	var once sync.Once
	cmds := make([]*exec.Cmd, 2)
	pws := make([]*io.PipeWriter, 2)
	var readers sync.WaitGroup
	for rank := 0; rank < 2; rank++ {
		c := tb.Command(ctx, rank, bin, "-class", "W")
		c.Env = append(cleanEnv(), "SLURM_PROCID="+fmt.Sprint(rank), "SLURM_NTASKS=2", "SLURM_JOB_ID=4343",
			"SLURM_STEP_ID=0", "GOARMCI_RDV="+rdv, "GOARMCI_RAILS="+strings.Join(tb.Hosts[rank].Addrs, ","))
		pr, pw := io.Pipe()
		pws[rank] = pw
		c.Stdout, c.Stderr = pw, pw
		require.NoError(t, c.Start())
		cmds[rank] = c
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				line := sc.Text()
				mu.Lock()
				outs[rank].WriteString(line + "\n")
				mu.Unlock()
				if f := strings.Fields(line); len(f) == 3 && f[0] == "1" {
					once.Do(func() { close(started) })
				}
			}
		}()
	}
	pulled := false
	select {
	case <-started:
		rx0, _ := tb.Bytes(1, 1)
		tb.SetLink(0, false)
		pulled = true
		time.Sleep(300 * time.Millisecond) // a fault, not an assertion: let traffic hit the dead rail
		tb.SetLink(0, true)
		rx1, _ := tb.Bytes(1, 1)
		t.Logf("rail 1 carried %d bytes while rail 0 was down", rx1-rx0)
	case <-ctx.Done():
	}
	errs := make([]error, 2)
	for rank, c := range cmds {
		errs[rank] = c.Wait()
		pws[rank].Close()
	}
	readers.Wait() // every line is in outs
	for rank, err := range errs {
		require.NoError(t, err, "rank %d:\n%s", rank, outs[rank].String())
	}
	mu.Lock()
	report := outs[0].String()
	mu.Unlock()
	require.True(t, pulled, "the run ended before the first iteration was seen:\n%s", report)
	require.Contains(t, report, "Verification = SUCCESSFUL", report)
}
