package rma_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
)

// slurmStepChildEnv marks a rank of TestConcurrentSlurmSteps.
const slurmStepChildEnv = "SLURM_STEP_TEST_CHILD"

// TestConcurrentSlurmSteps starts two job steps of one Slurm job on this node at once, each of
// 2 ranks started as srun starts them (same SLURM_JOB_ID, steps 0 and 1, the rendezvous on the
// first host of the step's node list at the port derived from job and step): the steps' ranks
// share the node, its shared-memory directory and the job id, and must not see each other —
// every rank reads back exactly its own step's pattern, both steps end cleanly, and no file is
// left in the shared-memory directory.
func TestConcurrentSlurmSteps(t *testing.T) {
	if os.Getenv(slurmStepChildEnv) != "" {
		slurmStepChild()
		return
	}
	if testing.Short() {
		t.Skip("starts 4 processes: not with -short")
	}
	shm := t.TempDir()
	job := strconv.Itoa(600000 + os.Getpid()%100000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a safety net against a hang
	defer cancel()
	type proc struct {
		cmd  *exec.Cmd
		out  bytes.Buffer
		step int
	}
	var procs []*proc
	for step := range 2 {
		for rank := range 2 {
			p := &proc{step: step}
			p.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestConcurrentSlurmSteps$", "-test.count=1")
			p.cmd.Env = append(testutil.CleanEnv(), slurmStepChildEnv+"=1", "GOARMCI_SHM_DIR="+shm,
				"SLURM_JOB_ID="+job, "SLURM_STEP_ID="+strconv.Itoa(step), "SLURM_PROCID="+strconv.Itoa(rank),
				"SLURM_NTASKS=2", "SLURM_LOCALID="+strconv.Itoa(rank), "SLURM_NODEID=0", "SLURM_TASKS_PER_NODE=2",
				"SLURM_STEP_NODELIST=localhost")
			p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
			require.NoError(t, p.cmd.Start())
			procs = append(procs, p)
		}
	}
	for i, p := range procs {
		require.NoError(t, p.cmd.Wait(), "step %d rank %d:\n%s", p.step, i%2, p.out.String())
		require.Contains(t, p.out.String(), fmt.Sprintf("STEP %s.%d rank %d: own pattern", job, p.step, i%2), p.out.String())
	}
	ents, err := os.ReadDir(shm)
	require.NoError(t, err)
	require.Empty(t, ents, "files left in the shared-memory directory")
}

// slurmStepChild is one rank of a step: it puts a pattern made of its step and rank into the
// other rank's part, and checks that its own part holds the other rank's pattern of the same
// step (a collision of the steps would mix them up or fail Init).
func slurmStepChild() {
	fail := func(stage string, err error) {
		fmt.Fprintf(os.Stderr, "STEP %s: %v\n", stage, err)
		os.Exit(1)
	}
	ctx := context.Background()
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		fail("init", err)
	}
	step, job := os.Getenv("SLURM_STEP_ID"), os.Getenv("SLURM_JOB_ID")
	pattern := func(rank int) []byte { return []byte(fmt.Sprintf("job %s step %s rank %d", job, step, rank)) }
	seg, err := rt.Malloc(ctx, 64)
	if err != nil {
		fail("malloc", err)
	}
	other := 1 - rt.Rank()
	if err := rt.Put(ctx, pattern(rt.Rank()), seg, other, 0); err != nil {
		fail("put", err)
	}
	if err := rt.Barrier(ctx); err != nil {
		fail("barrier", err)
	}
	want := pattern(other)
	if got := seg.Local()[:len(want)]; !bytes.Equal(got, want) {
		fail("check", fmt.Errorf("my part holds %q, want %q", got, want))
	}
	if err := seg.Free(ctx); err != nil {
		fail("free", err)
	}
	fmt.Printf("STEP %s.%s rank %d: own pattern\n", job, step, rt.Rank())
	if err := rt.Finalize(ctx); err != nil {
		fail("finalize", err)
	}
	os.Exit(0)
}
