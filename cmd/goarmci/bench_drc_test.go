package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/internal/testutil"
)

func TestParseDRCTestbed(t *testing.T) {
	f, err := parseDRC(&bytes.Buffer{}, []string{"hotspot", "-testbed", "-policy", "binding, adaptive", "-size", "64k", "-hot", "10"})
	require.NoError(t, err)
	assert.Equal(t, bench.DRCOptions{Size: 64 << 10, Window: 8, Iters: 8, Displacement: 2}, f.o)
	assert.Equal(t, []string{"binding", "adaptive"}, splitList(f.policies))
	assert.Equal(t, 1, f.hotRail, "the hot rail defaults to the last")
	assert.True(t, isTestbed([]string{"hotspot", "-testbed"}))
	assert.False(t, isTestbed([]string{"hotspot", "-sim"}))
	for _, args := range [][]string{
		{"-testbed", "-hosts", "1"}, {"-testbed", "-rails", "5"}, {"-testbed", "-d", "8"}, {"-testbed", "-hot", "0.5"},
		{"-testbed", "-hot", "10", "-rate", "none"}, {"-testbed", "-size", "1MB"}, {"-testbed", "-policy", ","}, {"-testbed", "x"},
	} {
		_, err := parseDRC(&bytes.Buffer{}, args)
		var ee *exitError
		require.ErrorAs(t, err, &ee, "%v", args)
		assert.Equal(t, 2, ee.code, "%v", args)
	}
}

// TestDRCSwitchedTestbed runs the DRC of [Vishnu07 §7.3] as a real job on 4 hosts × 2 ranks
// joined by 2 rails through a switch (a bridge per rail), once with the binding policy and once
// with adaptive striping: every rank finishes, the bytes each rank received are exactly what its
// ring predecessor (two ranks back: the previous host) put, and the bandwidth is positive. Root
// only; not under -short.
func TestDRCSwitchedTestbed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a switched netns testbed and runs two jobs of 8 processes")
	}
	tb := testutil.NewSwitchedTestbed(t, 4, 2)
	for h := range 4 {
		for r := range 2 {
			tb.SetRate(h, r, "800mbit")
		}
	}
	o := bench.DRCOptions{Size: 64 << 10, Window: 4, Iters: 2, Displacement: 2}
	for i, pol := range []string{"binding", "adaptive"} {
		t.Run(pol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
			defer cancel()
			job := testutil.HostJob{
				Exe: []string{goarmciExe, "bench", "hotspot", "-testbed", "-size", "64k", "-window", "4", "-iters", "2"},
				Env: []string{"GOARMCI_STRIPE_POLICY=" + pol}, PerHost: 2, Rendezvous: 1,
				Port: 26000 + 10*(os.Getpid()%500) + i,
			}
			outs, errs := job.Run(ctx, t, tb)
			require.Len(t, outs, 8)
			for rank, out := range outs {
				require.NoError(t, errs[rank], "rank %d:\n%s", rank, out)
				i := strings.Index(out, "DRC rank=")
				require.GreaterOrEqual(t, i, 0, "rank %d printed no result:\n%s", rank, out)
				var r bench.DRCResult
				var me int
				_, err := fmt.Sscanf(out[i:], drcLine, &me, &r.To, &r.From, &r.Sum, &r.PairMBs, &r.AvgMBs, &r.MinMBs)
				require.NoError(t, err, out)
				assert.Equal(t, rank, me)
				assert.Equal(t, (rank+2)%8, r.To)
				assert.Equal(t, (rank+6)%8, r.From)
				assert.Equal(t, bench.DRCSum(o, r.From), r.Sum, "rank %d: the data from rank %d", rank, r.From)
				assert.Greater(t, r.PairMBs, 0.0)
				assert.Greater(t, r.AvgMBs, 0.0)
				assert.LessOrEqual(t, r.MinMBs, r.AvgMBs)
			}
		})
	}
}

// TestBenchHotspotTestbedSmoke runs the launcher: one policy, a hot rail, tiny sizes, JSON.
// Without root it reports the skip. Not under -short.
func TestBenchHotspotTestbedSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a switched netns testbed and runs two jobs of 8 processes")
	}
	if os.Geteuid() != 0 {
		code, _, errOut := benchCLI(t, "hotspot", "-testbed")
		require.Equal(t, 0, code)
		assert.Contains(t, errOut, "needs root")
		return
	}
	code, out, errOut := benchCLI(t, "hotspot", "-testbed", "-policy", "adaptive", "-size", "64k", "-window", "4",
		"-iters", "2", "-rate", "800mbit", "-hot", "10", "-format", "json")
	require.Equal(t, 0, code, errOut)
	var tab struct {
		Name    string   `json:"name"`
		Columns []string `json:"columns"`
		Rows    []struct {
			Key    string     `json:"key"`
			Values []*float64 `json:"values"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &tab), out)
	assert.Equal(t, "drc", tab.Name)
	assert.Len(t, tab.Columns, 5)
	require.Len(t, tab.Rows, 1)
	assert.Equal(t, "adaptive", tab.Rows[0].Key)
	for _, v := range tab.Rows[0].Values {
		require.NotNil(t, v)
		assert.Greater(t, *v, 0.0)
	}
}
