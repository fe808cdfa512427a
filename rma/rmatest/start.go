package rmatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/goarmci/goarmci/rma"
)

// Start runs body on n ranks over shared memory, goroutines of this process joined by the
// in-process bootstrap (in a real job, rma.Init(ctx, nil) finds its rank, size and rendezvous
// from goarmci run, srun or mpirun), finalizes them and returns every rank's error joined. A rank
// whose Init or body fails closes the group, so no other rank waits for it forever. It needs no
// *testing.T: runnable examples use it.
func Start(ctx context.Context, n int, body func(ctx context.Context, rt *rma.Runtime) error) error {
	job := fmt.Sprintf("start-%d-%d", os.Getpid(), jobSeq.Add(1))
	return startJob(ctx, n, func(g *Group, i int) *rma.Config {
		return &rma.Config{Bootstrap: g.Member(i), Transport: rma.TransportShm, HostID: "rmatest", Job: job}
	}, body)
}

// startJob runs body on n ranks, rank i initialized with config(g, i) over the in-process
// bootstrap g, finalizes them and returns every rank's error (named by rank) joined. A rank whose
// Init or body fails closes the group, so no other rank waits for it forever.
func startJob(ctx context.Context, n int, config func(g *Group, i int) *rma.Config, body func(ctx context.Context, rt *rma.Runtime) error) error {
	g := NewGroup(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt, err := rma.Init(ctx, config(g, i))
			if err != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, err)
				g.Close()
				return
			}
			if errs[i] = body(ctx, rt); errs[i] != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, errs[i])
				g.Close()
			}
			errs[i] = errors.Join(errs[i], rt.Finalize(ctx))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
