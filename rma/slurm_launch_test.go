package rma_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
)

// slurmChildEnv marks a rank of TestSlurmLaunch started by srun: "launch" (openMPIChild's
// barrier and all-reduce), else a launcherFailChild spec "<victim>:<exit|kill>:0".
const slurmChildEnv = "GOARMCITEST_SLURM_CHILD"

// TestSlurmLaunch starts a private single-node Slurm (munged, slurmctld and slurmd of its own,
// testutil.StartSlurm) and runs 4-rank jobs of this test binary under its srun, which sets the
// ranks' SLURM_* variables (the rendezvous on the first host of the step's node list, at the
// port derived from job and step id):
//
//   - launch: every rank passes a barrier and an all-reduce and finalizes; srun exits 0.
//   - peerfail/exit, peerfail/kill: TestLauncherPeerFailure's job (Put, Get, Acc and Barrier in
//     a loop; rank 1 exits early, status 0 and no Finalize, or kills itself with SIGKILL). Every
//     survivor returns ErrPeerFailed naming rank 1 ("its rendezvous connection closed"), the
//     memory rank 1 could write does not change after that, survivors still reach each other,
//     and srun returns by itself: with --kill-on-bad-exit=0 it leaves the survivors running, and
//     exits with the highest status of the tasks (0, or 128+9 for the killed rank).
//
// Skipped when not root, when Slurm or munge is not installed (.ci/run installs slurmctld,
// slurmd, slurm-client and munge when it can), when the daemons do not start, and with -short.
func TestSlurmLaunch(t *testing.T) {
	if v := os.Getenv(slurmChildEnv); v != "" {
		if v == "launch" {
			openMPIChild()
		} else {
			launcherFailChild(v)
		}
		return
	}
	if testing.Short() {
		t.Skip("starts Slurm's daemons and 4-rank jobs: not with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the daemons' start: a hang guard
	defer cancel()
	slurm := testutil.StartSlurm(ctx, t, launcherFailRanks)

	srun := func(ctx context.Context, t *testing.T, child string) *exec.Cmd {
		cmd := slurm.Command(ctx, "srun", "-n", strconv.Itoa(launcherFailRanks), "-O", "--kill-on-bad-exit=0", "--mpi=none",
			"--job-name="+t.Name(), os.Args[0], "-test.run=^TestSlurmLaunch$", "-test.count=1")
		cmd.Env = append(cmd.Env, slurmChildEnv+"="+child, "TMPDIR="+t.TempDir())
		return cmd
	}

	t.Run("launch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
		defer cancel()
		out, err := srun(ctx, t, "launch").CombinedOutput()
		require.NoError(t, ctx.Err(), "the job hung:\n%s", out)
		require.NoError(t, err, "srun:\n%s", out)
		want := 0
		for r := range launcherFailRanks {
			want += r + 1
		}
		for r := range launcherFailRanks {
			line := fmt.Sprintf("OMPI rank %d of %d: sum %d", r, launcherFailRanks, want)
			require.Contains(t, string(out), line, "srun:\n%s", out)
			t.Log(line)
		}
	})

	for _, fault := range []string{"exit", "kill"} {
		t.Run("peerfail/"+fault, func(t *testing.T) {
			const victim = 1
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
			defer cancel()
			cmd := srun(ctx, t, fmt.Sprintf("%d:%s:0", victim, fault))
			out := runLauncher(t, cmd, launcherFailRanks-1)
			require.NoError(t, ctx.Err(), "the job hung:\n%s", out)
			require.NotContains(t, string(out), "LPF FAILED", "%s", out)

			var exitAt time.Time
			var detect []detection
			survived := map[int]bool{}
			for _, m := range lpfLine.FindAllStringSubmatch(string(out), -1) {
				rank, _ := strconv.Atoi(m[2])
				ns, _ := strconv.ParseInt(m[3], 10, 64)
				switch m[1] {
				case "EXIT":
					exitAt = time.Unix(0, ns)
				case "DETECT":
					detect = append(detect, detection{rank: rank, after: time.Duration(ns), err: m[4]})
				case "SURVIVOR":
					survived[rank] = true
				}
			}
			require.False(t, exitAt.IsZero(), "rank %d never left:\n%s", victim, out)
			sort.Slice(detect, func(i, j int) bool { return detect[i].rank < detect[j].rank })
			require.Len(t, detect, launcherFailRanks-1, "%s", out)
			name := fmt.Sprintf("rank %d exited before Finalize (its rendezvous connection closed)", victim)
			for _, d := range detect {
				require.NotEqual(t, victim, d.rank, "%s", out)
				require.Contains(t, d.err, "peer failed: "+name, "%s", out)
				t.Logf("rank %d saw the failure after %v: %s", d.rank, (d.after - time.Duration(exitAt.UnixNano())).Round(time.Microsecond), d.err)
			}
			for r := range launcherFailRanks {
				if r != victim {
					require.True(t, survived[r], "survivor rank %d did not finish its checks:\n%s", r, out)
				}
			}
			// srun returned by itself (runLauncher did not kill it) with the tasks' highest status.
			wantStatus := 0
			if fault == "kill" {
				wantStatus = 128 + 9
			}
			require.Equal(t, wantStatus, cmd.ProcessState.ExitCode(), "srun's exit status (%v):\n%s", cmd.ProcessState, out)
			if fault == "kill" {
				require.Contains(t, string(out), "task 1: Killed", "srun reports the killed task:\n%s", out)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if strings.HasPrefix(line, "srun:") {
					t.Log(line)
				}
			}
		})
	}
}
