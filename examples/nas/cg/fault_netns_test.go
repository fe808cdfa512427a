package main

import (
	"context"
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
// later ([Vishnu09]'s experiment: a fault in the middle of a run). The run must still verify: the
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
	var (
		once   sync.Once
		pulled = make(chan struct{})
		fault  sync.WaitGroup
	)
	job := testutil.RankJob{Exe: []string{bin, "-class", "W"}, Rendezvous: 1, Port: 29500 + os.Getpid()%400}
	outs, errs := job.Run(ctx, t, tb, func(_ int, line string) {
		if f := strings.Fields(line); len(f) != 3 || f[0] != "1" {
			return
		}
		once.Do(func() { // the first outer iteration: pull the cable, plug it back a moment later
			fault.Add(1)
			go func() {
				defer fault.Done()
				rx0, _, _ := tb.Counters(1, 1)
				if err := tb.Link(0, false); err != nil {
					t.Errorf("%v", err)
					return
				}
				close(pulled)
				time.Sleep(300 * time.Millisecond) // a fault, not an assertion: let traffic hit the dead rail
				if err := tb.Link(0, true); err != nil {
					t.Errorf("%v", err)
				}
				rx1, _, _ := tb.Counters(1, 1)
				t.Logf("rail 1 carried %d bytes while rail 0 was down", rx1-rx0)
			}()
		})
	})
	fault.Wait()
	for rank, err := range errs {
		require.NoError(t, err, "rank %d:\n%s", rank, outs[rank])
	}
	select {
	case <-pulled:
	default:
		t.Fatalf("the run ended before the first iteration was seen:\n%s", outs[0])
	}
	require.Contains(t, outs[0], "Verification = SUCCESSFUL", outs[0])
}
