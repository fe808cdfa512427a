package rma_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
)

const netnsChildEnv = "GOARMCI_TEST_NETNS_CHILD"

// TestStripedNetns runs two ranks on two hosts (network namespaces) joined by two real veth
// rails, each rank started as srun would start it (this test binary re-executed in each
// namespace), under every policy: the striped transfer checks of TestStripedTransfers over the
// real links, and traffic must appear on both rails for striping policies. Skips without root.
func TestStripedNetns(t *testing.T) {
	if os.Getenv(netnsChildEnv) != "" {
		netnsChild(t)
		return
	}
	if testing.Short() {
		t.Skip("starts processes in network namespaces")
	}
	tb := testutil.NewTestbed(t, 2)
	for i, pol := range stripePolicies {
		t.Run(pol, func(t *testing.T) {
			tx0 := [2]uint64{}
			for r := 0; r < 2; r++ {
				_, tx0[r] = tb.Bytes(0, r)
			}
			runNetns(t, tb, pol, i, "check", i == 0)
			for r := 0; r < 2; r++ {
				_, tx := tb.Bytes(0, r)
				if pol != "binding" && pol != "bss:1" {
					require.Greater(t, tx-tx0[r], uint64(1<<20), "%s: rail %d carried less than 1 MiB", pol, r)
				}
			}
		})
	}
}

// runNetns starts the two ranks and waits for them; it returns rank 0's output.
func runNetns(t *testing.T, tb *testutil.Testbed, pol string, seq int, mode string, big bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rdv := fmt.Sprintf("%s:%d", tb.Hosts[0].Addrs[0], 30000+(os.Getpid()+seq*7)%2000)
	outs := make([]bytes.Buffer, 2)
	cmds := make([]*exec.Cmd, 2)
	for rank := 0; rank < 2; rank++ {
		c := tb.Command(ctx, rank, os.Args[0], "-test.run=^TestStripedNetns$", "-test.count=1", "-test.v")
		c.Env = append(testutil.CleanEnv(), "SLURM_PROCID="+strconv.Itoa(rank), "SLURM_NTASKS=2",
			fmt.Sprintf("SLURM_JOB_ID=77%d%d", os.Getpid()%1000, seq), "SLURM_STEP_ID=0", "GOARMCI_RDV="+rdv,
			"GOARMCI_RAILS="+strings.Join(tb.Hosts[rank].Addrs, ","), "GOARMCI_STRIPE_POLICY="+pol,
			netnsChildEnv+"="+mode, fmt.Sprintf("GOARMCI_TEST_BIG=%v", big))
		c.Stdout, c.Stderr = &outs[rank], &outs[rank]
		require.NoError(t, c.Start())
		cmds[rank] = c
	}
	for rank, c := range cmds {
		require.NoError(t, c.Wait(), "rank %d:\n%s", rank, outs[rank].String())
	}
	return outs[0].String()
}

// netnsChild is one rank of TestStripedNetns.
func netnsChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	rt, err := rma.Init(ctx, &rma.Config{StripeThreshold: testThreshold})
	require.NoError(t, err)
	require.Len(t, rt.Channel(1-rt.Rank()).Subchannels(), 2)
	switch os.Getenv(netnsChildEnv) {
	case "bench":
		netnsBench(ctx, t, rt)
	default:
		stripedBody(ctx, t, rt, os.Getenv("GOARMCI_TEST_BIG") != "true")
	}
	require.NoError(t, rt.Finalize(ctx))
}

// netnsBench measures rank 0's put bandwidth to rank 1 at 1 MiB and 4 MiB (a window of 8
// non-blocking puts, then a fence), printing "BW size MB/s".
func netnsBench(ctx context.Context, t testing.TB, rt *rma.Runtime) {
	seg, err := rt.Malloc(ctx, 8*(4<<20))
	require.NoError(t, err)
	if rt.Rank() == 0 {
		for _, size := range []int{1 << 20, 4 << 20} {
			src := pattern(1, size)
			iters := max(8, (96<<20)/size)
			run := func(n int) time.Duration {
				start := time.Now()
				var hs []*rma.Handle
				for k := 0; k < n; k++ {
					h, err := rt.NbPut(ctx, src, seg, 1, (k%8)*size)
					require.NoError(t, err)
					hs = append(hs, h)
					if len(hs) == 8 {
						for _, h := range hs {
							require.NoError(t, h.Wait(ctx))
						}
						hs = hs[:0]
					}
				}
				require.NoError(t, rt.Fence(ctx, 1))
				return time.Since(start)
			}
			run(8) // warm-up (streams, adaptive weights)
			d := run(iters)
			fmt.Printf("BW %d %.1f\n", size, float64(size*iters)/d.Seconds()/1e6)
		}
	}
	require.NoError(t, rt.Barrier(ctx))
}

// TestNetnsRailBandwidth measures put bandwidth at 1 MiB and 4 MiB over one and over two
// tbf-limited rails (GOARMCI_TEST_RATE, default 400mbit per rail) and logs the numbers; nothing
// is asserted about speed. Runs only with GOARMCI_TEST_BENCH=1 (and root).
func TestNetnsRailBandwidth(t *testing.T) {
	if os.Getenv("GOARMCI_TEST_BENCH") == "" || os.Getenv(netnsChildEnv) != "" {
		t.Skip("measurement: set GOARMCI_TEST_BENCH=1")
	}
	rate := os.Getenv("GOARMCI_TEST_RATE")
	if rate == "" {
		rate = "400mbit"
	}
	tb := testutil.NewTestbed(t, 2)
	for h := 0; h < 2; h++ {
		for r := 0; r < 2; r++ {
			tb.SetRate(h, r, rate)
		}
	}
	for i, pol := range []string{"binding", "auto", "even", "adaptive", "round-robin"} {
		out := runNetns(t, tb, pol, 100+i, "bench", false)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "BW ") {
				t.Logf("rate %s/rail policy %-12s %s", rate, pol, l)
			}
		}
	}
}
