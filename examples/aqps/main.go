// Command aqps runs [Takagi15 §4.3]'s three micro-benchmarks in a real job — onetoall (rank 0
// puts to every other rank in turn), alltoone (every other rank puts to rank 0 at once) and
// repeat (both, five times), a message being a blocking 8-byte put — and prints the latency
// per put and repeat's execution time, with the network transport of the job
// (GOARMCI_NET_TRANSPORT: rc, dc or adaptive) and the adaptive transport's decisions. The same
// rank body runs on the simulated fabric in `goarmci bench aqps -sim` (bench.AQPSRank).
//
//	GOARMCI_TRANSPORT=tcp GOARMCI_NET_TRANSPORT=adaptive go run ./cmd/goarmci run -np 8 ./examples/aqps -messages 400
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/rma"
)

// Result is what a run reports: the slowest rank's time per put of onetoall and alltoone and
// repeat's execution time, and the adaptive transport's decisions summed over the ranks.
type Result struct {
	Ranks                        int
	OneToAll, AllToOne, Repeat   time.Duration
	Promotions, Refusals, Closes int64
	Slots                        []uint64 // this rank's slots after the job (bench.AQPSRankResult)
}

// Run runs the patterns on every rank of rt (collective) and returns the job's figures on every
// rank.
func Run(ctx context.Context, rt *rma.Runtime, messages int) (Result, error) {
	if messages < 1 {
		return Result{}, fmt.Errorf("aqps: messages = %d: must be positive", messages)
	}
	rr, err := bench.AQPSRank(ctx, rt, messages)
	if err != nil {
		return Result{}, err
	}
	ad := rt.Adaptive()
	// the slowest rank's times (max), the decisions summed: one reduction each
	times := []float64{rr.OneToAll.Seconds(), rr.AllToOne.Seconds(), rr.Repeat.Seconds()}
	counts := []int64{ad.Promotions, ad.Refusals, ad.Closes}
	tb := make([]byte, 8*len(times))
	for i, v := range times {
		binary.LittleEndian.PutUint64(tb[8*i:], math.Float64bits(v))
	}
	if err := rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceMax, tb); err != nil {
		return Result{}, err
	}
	cb := make([]byte, 8*len(counts))
	for i, v := range counts {
		binary.LittleEndian.PutUint64(cb[8*i:], uint64(v))
	}
	if err := rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, cb); err != nil {
		return Result{}, err
	}
	sec := func(i int) time.Duration {
		return time.Duration(math.Float64frombits(binary.LittleEndian.Uint64(tb[8*i:])) * float64(time.Second))
	}
	cnt := func(i int) int64 { return int64(binary.LittleEndian.Uint64(cb[8*i:])) }
	return Result{Ranks: rt.Size(), OneToAll: sec(0), AllToOne: sec(1), Repeat: sec(2),
		Promotions: cnt(0), Refusals: cnt(1), Closes: cnt(2), Slots: rr.Slots}, nil
}

func main() {
	messages := flag.Int("messages", 400, "puts per origin, target and phase")
	flag.Parse()
	ctx := context.Background()
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aqps:", err)
		os.Exit(1)
	}
	res, err := Run(ctx, rt, *messages)
	if err == nil && rt.Rank() == 0 {
		mode := os.Getenv("GOARMCI_NET_TRANSPORT")
		if mode == "" {
			mode = rma.NetRC
		}
		fmt.Printf("%d ranks, %s (%s): onetoall %.2f us per put, alltoone %.2f us per put, repeat %.3f s; "+
			"adaptive: %d promotions, %d refused, %d connections closed\n",
			res.Ranks, rt.TransportTo(1), mode, float64(res.OneToAll)/1e3, float64(res.AllToOne)/1e3,
			res.Repeat.Seconds(), res.Promotions, res.Refusals, res.Closes)
	}
	if ferr := rt.Finalize(ctx); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "aqps:", err)
		os.Exit(1)
	}
}
