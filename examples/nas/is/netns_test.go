package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
)

// TestClassAFourHosts runs IS class A on 4 hosts × 2 ranks joined by 2 rails through a switch
// (a bridge per rail; ranks of one host share memory): the run verifies. It skips without root.
func TestClassAFourHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs eight processes")
	}
	tb := testutil.NewSwitchedTestbed(t, 4, 2)
	bin := filepath.Join(t.TempDir(), "is")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	job := testutil.HostJob{Exe: []string{bin, "-class", "A"}, PerHost: 2, Port: 27000 + os.Getpid()%1000}
	outs, errs := job.Run(ctx, t, tb)
	for rank, err := range errs {
		require.NoError(t, err, "rank %d:\n%s", rank, outs[rank])
	}
	require.Contains(t, outs[0], "Verification = SUCCESSFUL", outs[0])
	require.Contains(t, outs[0], "Ranks = 8", outs[0])
	t.Logf("rank 0:\n%s", outs[0])
}
