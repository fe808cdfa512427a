package rmatest

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
)

// FabricJob configures StartFabricJob: the fabric, where each rank runs, and the ranks'
// configuration.
type FabricJob struct {
	// Fabric is the fabric's configuration; Nodes is raised to what the ranks need, Name
	// defaults to "rma".
	Fabric fabric.Config
	// Node is the fabric node of rank i (a placement: distinct nodes, 0 ≤ Node(i)); nil: node i.
	Node func(rank int) int
	// Configure, when set, changes rank i's configuration before Init (Paths, StripePolicy,
	// ...); the harness owns Bootstrap, Transport, HostID, Job and NetworkDevice (changes to them
	// are undone).
	Configure func(rank int, c *rma.Config)
	// OnFabric, when set, gets the fabric after it is created and before the ranks start (a
	// hot spot: Fabric.SetHopRate; statistics after the job: keep the pointer).
	OnFabric func(f *fabric.Fabric)
}

// StartFabricJob is StartFabric with a placement of the ranks on the fabric's nodes and a
// per-rank configuration (FabricJob): it creates the fabric, runs body on n ranks, rank i on
// node job.Node(i), finalizes them, closes the fabric and returns every rank's error joined (and
// the fabric's). Inside a testing/synctest bubble it runs on virtual time. Errors: those of
// StartFabric, and ibv.ErrInvalidArgument (wrapped) for a placement that puts two ranks on one
// node or a rank on a negative node.
func StartFabricJob(ctx context.Context, n int, job FabricJob, body func(ctx context.Context, rt *rma.Runtime) error) (err error) {
	node := func(i int) int { return i }
	if job.Node != nil {
		node = job.Node
	}
	cfg := job.Fabric
	used := map[int]bool{}
	for i := range n {
		k := node(i)
		if k < 0 || used[k] {
			return fmt.Errorf("rmatest: %w: rank %d on node %d", ibv.ErrInvalidArgument, i, k)
		}
		used[k] = true
		cfg.Nodes = max(cfg.Nodes, k+1)
	}
	if cfg.Name == "" {
		cfg.Name = "rma"
	}
	f, err := fabric.New(cfg)
	if err != nil {
		return fmt.Errorf("rmatest: fabric: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if job.OnFabric != nil {
		job.OnFabric(f)
	}
	seq := jobSeq.Add(1)
	name := fmt.Sprintf("fabric-%d-%d", os.Getpid(), seq)
	return startJob(ctx, n, func(g *Group, i int) *rma.Config {
		k := node(i)
		c := &rma.Config{Bootstrap: g.Member(i), Transport: rma.TransportAuto,
			HostID: fmt.Sprintf("fabric-%d/%s/n%d", seq, cfg.Name, k), Job: name,
			NetworkDevice: func() (*ibv.Context, error) { return f.Open(k) }}
		if job.Configure != nil {
			job.Configure(i, c)
			c.Bootstrap, c.Transport, c.Job = g.Member(i), rma.TransportAuto, name
			c.HostID = fmt.Sprintf("fabric-%d/%s/n%d", seq, cfg.Name, k)
			c.NetworkDevice = func() (*ibv.Context, error) { return f.Open(k) }
		}
		return c
	}, body)
}
