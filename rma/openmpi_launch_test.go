package rma_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
)

// openMPIChildEnv marks a rank of TestOpenMPILaunch started by mpirun.
const openMPIChildEnv = "GOARMCI_TEST_OMPI_CHILD"

const openMPIRanks = 4

// TestOpenMPILaunch runs this test binary as a 4-rank job under Open MPI's mpirun with no
// GOARMCI_RDV: every rank must find the rendezvous by itself (rank 0's file in the default
// node-local directory, here under the job's TMPDIR), pass a barrier and an all-reduce, print
// its result and finalize; mpirun must exit 0 and the rendezvous directory must be empty.
// Skipped when Open MPI's mpirun (mpirun.openmpi, or an mpirun that says it is Open MPI) is not
// installed; .ci/run installs openmpi-bin when it can.
func TestOpenMPILaunch(t *testing.T) {
	if os.Getenv(openMPIChildEnv) != "" {
		openMPIChild()
		return
	}
	if testing.Short() {
		t.Skip("starts mpirun and 4 processes: not with -short")
	}
	mpirun := findOpenMPIRun(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // safety net against a hang
	defer cancel()
	args := []string{"--oversubscribe", "-np", strconv.Itoa(openMPIRanks), "-x", openMPIChildEnv + "=1"}
	if os.Getuid() == 0 {
		args = append([]string{"--allow-run-as-root"}, args...)
	}
	args = append(args, os.Args[0], "-test.run=^TestOpenMPILaunch$", "-test.count=1")
	cmd := exec.CommandContext(ctx, mpirun, args...)
	// Nothing of a launcher this test may itself run under, no rendezvous address: only what
	// mpirun gives. TMPDIR places the default rendezvous directory (and mpirun's session files).
	cmd.Env = append(testutil.CleanEnv(), "TMPDIR="+tmp) // the last TMPDIR is the one exec uses
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "mpirun:\n%s", out)

	want := 0
	for r := range openMPIRanks {
		want += r + 1
	}
	for r := range openMPIRanks {
		line := fmt.Sprintf("OMPI rank %d of %d: sum %d", r, openMPIRanks, want)
		require.Contains(t, string(out), line, "mpirun:\n%s", out)
		t.Log(line)
	}
	dir := filepath.Join(tmp, "goarmci-"+strconv.Itoa(os.Getuid()))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err, "rank 0 creates the rendezvous directory")
	require.Empty(t, ents, "rendezvous files left in %s", dir)
}

// openMPIChild is one rank under mpirun: Init, barrier, all-reduce of rank+1, Finalize; it
// prints its result and exits (1 on any error, which fails mpirun).
func openMPIChild() {
	fail := func(stage string, err error) {
		fmt.Fprintf(os.Stderr, "OMPI %s: %v\n", stage, err)
		os.Exit(1)
	}
	ctx := context.Background()
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		fail("init", err)
	}
	if err := rt.Barrier(ctx); err != nil {
		fail("barrier", err)
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(rt.Rank()+1))
	if err := rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, buf); err != nil {
		fail("all-reduce", err)
	}
	fmt.Printf("OMPI rank %d of %d: sum %d\n", rt.Rank(), rt.Size(), binary.LittleEndian.Uint64(buf))
	if err := rt.Finalize(ctx); err != nil {
		fail("finalize", err)
	}
	os.Exit(0)
}

// findOpenMPIRun returns Open MPI's mpirun, or skips the test.
func findOpenMPIRun(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("mpirun.openmpi"); err == nil {
		return p
	}
	p, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("Open MPI not installed: neither mpirun.openmpi nor mpirun on PATH (apt-get install openmpi-bin)")
	}
	v, _ := exec.Command(p, "--version").CombinedOutput()
	if !strings.Contains(string(v), "Open MPI") && !strings.Contains(string(v), "OpenRTE") {
		t.Skipf("%s is not Open MPI's mpirun: %s", p, strings.TrimSpace(string(v)))
	}
	return p
}
