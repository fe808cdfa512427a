package rmatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
)

// Fabric sets the configuration of RunFabric's fabric (ports, i.e. rails, a fault Plan, MTU,
// engine tuning); RunFabric sets Nodes to the number of ranks and Name when empty.
func Fabric(cfg fabric.Config) Option { return func(o *options) { o.fabric = cfg } }

// OnFabric hands RunFabric's fabric to f after it is created and before the ranks start, so a
// test can apply a fault plan or read link statistics while the ranks run.
func OnFabric(f func(f *fabric.Fabric)) Option { return func(o *options) { o.onFabric = f } }

// RunFabric runs n ranks on the in-process network ibv/fabric: it creates a fabric of n nodes,
// starts one rank per node as a goroutine with its own rma.Runtime (joined by the in-process
// bootstrap Group, as Run), whose network device is its node's (rma.Config.NetworkDevice), runs
// body on every rank, finalizes, and closes the fabric. Every rank has its own host id, so every
// peer is a network peer; the ranks run without the hybridft manager unless Configure sets
// rma.Config.NetworkDeviceFT (see rma.Config.NetworkDevice). Options: Fabric, OnFabric, Configure, UseGroup and Timeout
// (Transport and Hosts are ignored).
//
// Called inside a testing/synctest bubble (synctest.Test), the fabric, the runtimes and every
// wait of theirs run on virtual time: the ACK timeouts and retransmissions of a lossy Plan, and
// Timeout, pass without real sleeps. Outside a bubble it runs on real time.
//
// Cost: each rank connects to every other on every rail at Init, n·(n−1)·rails RC queue pairs
// in all — with NetworkDeviceFT, in jobs above GOARMCI_ON_DEMAND_THRESHOLD ranks, only the
// pairs that talk, on demand — and the fabric starts one goroutine per directed link that carries traffic, up to
// n·(n−1)·rails·2^LMC of them (see the package tests for measurements).
func RunFabric(t *testing.T, n int, body func(ctx context.Context, t testing.TB, rt *rma.Runtime), opts ...Option) {
	t.Helper()
	o := options{timeout: 2 * time.Minute}
	for _, f := range opts {
		f(&o)
	}
	fc := o.fabric
	fc.Nodes = n
	if fc.Name == "" {
		fc.Name = "rma"
	}
	f, err := fabric.New(fc)
	if err != nil {
		t.Fatalf("rmatest: fabric: %v", err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			t.Errorf("rmatest: fabric close: %v", err)
		}
	}()
	if o.onFabric != nil {
		o.onFabric(f)
	}
	machine := fmt.Sprintf("fabric-%d", jobSeq.Add(1))
	run(t, n, body, &o, func(i int, cfg *rma.Config) {
		cfg.Transport = rma.TransportAuto
		// machine/node: one machine (its cores are shared by every rank: rma's waits do not
		// spin), n nodes (no shared memory between ranks)
		cfg.HostID = fmt.Sprintf("%s/%s/n%d", machine, fc.Name, i)
		cfg.NetworkDevice = func() (*ibv.Context, error) { return f.Open(i) }
	})
}

// StartFabric is Start on the in-process network ibv/fabric: it creates a fabric of n nodes
// (cfg, with Nodes set to n and Name defaulting to "rma"), runs body on n ranks, one per node,
// each with its own rma.Runtime whose network device is its node's (rma.Config.NetworkDevice;
// every peer a network peer, no hybridft manager: see StartFabricJob), finalizes them, closes
// the fabric and returns every rank's error joined (and the fabric's). A rank whose Init or
// body fails closes the bootstrap group, so no other rank waits for it forever. It needs no
// *testing.T: a command runs the same program as real processes (rma.Init(ctx, nil)) or, with
// this, on a simulated network in one process. Inside a testing/synctest bubble it runs on
// virtual time. Errors: fabric.New's (wrapping ibv.ErrInvalidArgument), rma.Init's, body's.
func StartFabric(ctx context.Context, n int, cfg fabric.Config, body func(ctx context.Context, rt *rma.Runtime) error) error {
	cfg.Nodes = n
	return StartFabricJob(ctx, n, FabricJob{Fabric: cfg}, body)
}
