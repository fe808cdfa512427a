package rma_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
)

// bindChildEnv marks a rank of TestBoundRankProcessors.
const bindChildEnv = "GOARMCI_TEST_BIND_CHILD"

// TestBoundRankProcessors: two ranks of a job of real processes on this machine, started as srun
// starts them, bind themselves to half of the CPUs each at Init (GOARMCI_BIND=auto) and run as
// many Go processors as they have CPUs from then on; a GOMAXPROCS the user set is kept.
func TestBoundRankProcessors(t *testing.T) {
	if os.Getenv(bindChildEnv) != "" {
		bindChild(t)
		return
	}
	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &set))
	if set.Count() < 2 || set.Count() != runtime.NumCPU() {
		t.Skip("needs at least 2 CPUs, the process unbound")
	}
	for _, userProcs := range []string{"", "3"} {
		t.Run("GOMAXPROCS="+userProcs, func(t *testing.T) {
			outs := runBindJob(t, userProcs)
			for rank, out := range outs {
				var procs, cpus int
				_, err := fmt.Sscanf(out[strings.Index(out, "procs "):], "procs %d cpus %d", &procs, &cpus)
				require.NoError(t, err, "rank %d: %s", rank, out)
				require.Equal(t, set.Count()/2, cpus, "rank %d bound to its half", rank)
				want := cpus
				if userProcs != "" {
					want, _ = strconv.Atoi(userProcs)
				}
				require.Equal(t, want, procs, "rank %d: %s", rank, out)
			}
		})
	}
}

func runBindJob(t *testing.T, userProcs string) [2]string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // safety net only
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port for rank 0's rendezvous
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	job := strconv.Itoa(600000 + os.Getpid()%100000)
	step := "1" + userProcs
	removeShmFiles(t, job+"."+step)
	var cmds [2]*exec.Cmd
	var outs [2]strings.Builder
	for r := range cmds {
		c := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBoundRankProcessors$", "-test.count=1", "-test.v")
		c.Env = append(testutil.CleanEnv(), bindChildEnv+"=1", "GOARMCI_BIND=auto",
			"SLURM_PROCID="+strconv.Itoa(r), "SLURM_NTASKS=2", "SLURM_JOB_ID="+job, "SLURM_STEP_ID="+step,
			"GOARMCI_RDV="+addr)
		c.Env = slices.DeleteFunc(c.Env, func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
		if userProcs != "" {
			c.Env = append(c.Env, "GOMAXPROCS="+userProcs)
		}
		c.Stdout, c.Stderr = &outs[r], &outs[r]
		require.NoError(t, c.Start())
		cmds[r] = c
	}
	var res [2]string
	for r, c := range cmds {
		err := c.Wait()
		res[r] = outs[r].String()
		require.NoError(t, err, "rank %d: %s", r, res[r])
	}
	return res
}

// bindChild is one rank of TestBoundRankProcessors: it reports its processors and CPUs after Init.
func bindChild(t *testing.T) {
	ctx := context.Background()
	rt, err := rma.Init(ctx, nil)
	require.NoError(t, err)
	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &set))
	fmt.Printf("procs %d cpus %d\n", runtime.GOMAXPROCS(0), set.Count())
	require.NoError(t, rt.Barrier(ctx))
	require.NoError(t, rt.Finalize(ctx))
}
