package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
)

// TestClassSAcrossTwoHosts runs CG class S with one rank on each of two hosts (network
// namespaces joined by a veth pair), started as srun would start them, so the tcp provider
// carries the job's traffic across a real link. It skips without root.
func TestClassSAcrossTwoHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two processes")
	}
	tb := testutil.NewTestbed(t, 1)
	bin := filepath.Join(t.TempDir(), "cg")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rdv := fmt.Sprintf("%s:%d", tb.Hosts[0].Addrs[0], 29000+os.Getpid()%1000)
	rx0, _ := tb.Bytes(1, 0)
	outs := make([]bytes.Buffer, 2)
	cmds := make([]*exec.Cmd, 2)
	for rank := 0; rank < 2; rank++ {
		c := tb.Command(ctx, rank, bin, "-class", "S")
		c.Env = append(testutil.CleanEnv(), "SLURM_PROCID="+fmt.Sprint(rank), "SLURM_NTASKS=2", "SLURM_JOB_ID=4242",
			"SLURM_STEP_ID=0", "GOARMCI_RDV="+rdv)
		c.Stdout, c.Stderr = &outs[rank], &outs[rank]
		require.NoError(t, c.Start())
		cmds[rank] = c
	}
	for rank, c := range cmds {
		require.NoError(t, c.Wait(), "rank %d:\n%s", rank, outs[rank].String())
	}
	report := outs[0].String()
	require.Contains(t, report, "Verification = SUCCESSFUL", report)
	require.Contains(t, report, "Ranks = 2", report)
	rx1, _ := tb.Bytes(1, 0)
	require.Greater(t, rx1-rx0, uint64(1<<20), "the ranks exchanged less than 1 MiB over the link")
}

// cleanEnv is the test's environment without launcher variables.

// TestClassAFourHosts runs CG class A on 4 hosts × 2 ranks joined by 2 rails through a switch
// (a bridge per rail): ranks of one host share memory, the hosts talk over the rails (messages
// below GOARMCI_STRIPE_THRESHOLD go whole on one rail, so most of CG's traffic takes one). The
// run verifies and every host received its part of the traffic. It skips without root.
func TestClassAFourHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs eight processes")
	}
	tb := testutil.NewSwitchedTestbed(t, 4, 2)
	before := make([][2]uint64, 4)
	for h := range before {
		for r := range 2 {
			before[h][r], _ = tb.Bytes(h, r)
		}
	}
	testutil.RunKernel(t, tb, 2, 28000+os.Getpid()%1000, "-class", "A")
	for h := range before {
		var got uint64
		for r := range 2 {
			rx, _ := tb.Bytes(h, r)
			got += rx - before[h][r]
		}
		require.Greater(t, got, uint64(1<<20), "host %d received less than 1 MiB", h)
	}
}
