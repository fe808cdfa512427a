package rma_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// pathsTree: two leaves of one host each, four spines, so every path bit of the pair takes its
// own spine.
var pathsTree = fabric.FatTree{Leaves: 2, Spines: 4, HostsPerLeaf: 1, LinkRate: 1 << 30, LinkLatency: time.Microsecond}

// upBytes returns the bytes each leaf0→spine hop carried.
func upBytes(t testing.TB, f *fabric.Fabric) []uint64 {
	var out []uint64
	for s := 0; s < pathsTree.Spines; s++ {
		st, err := f.HopStats(fabric.Hop{Rail: 1, From: fabric.Leaf(0), To: fabric.Spine(s)})
		require.NoError(t, err)
		out = append(out, st.Bytes)
	}
	return out
}

// With Config.Paths = P every network channel has P subchannels, one per path bits, and even
// striping sends a large put over P spines of the fat tree (the path bits route through
// different spines); with one path everything crosses one spine.
func TestPathsPerRailOnFatTree(t *testing.T) {
	for _, paths := range []int{1, 4} {
		synctest.Test(t, func(t *testing.T) {
			var fab *fabric.Fabric
			const size = 256 << 10
			err := rmatest.StartFabricJob(context.Background(), 2, rmatest.FabricJob{
				Fabric:    fabric.Config{LMC: 2, Topology: &pathsTree},
				Configure: func(_ int, c *rma.Config) { c.Paths, c.StripePolicy = paths, "even" },
				OnFabric:  func(f *fabric.Fabric) { fab = f },
			}, func(ctx context.Context, rt *rma.Runtime) error {
				seg, err := rt.Malloc(ctx, size)
				if err != nil {
					return err
				}
				if got := rt.Rails(1 - rt.Rank()).Len(); got != paths {
					return errors.New("wrong number of subchannels")
				}
				src := bytes.Repeat([]byte{0x5a, 0xa5, 7}, size/3+1)[:size]
				if rt.Rank() == 0 {
					if err := rt.Put(ctx, src, seg, 1, 0); err != nil {
						return err
					}
					if err := rt.Fence(ctx, 1); err != nil {
						return err
					}
				}
				if err := rt.Barrier(ctx); err != nil {
					return err
				}
				if rt.Rank() == 1 && !bytes.Equal(seg.Local(), src) {
					return errors.New("put data differ")
				}
				return seg.Free(ctx)
			})
			require.NoError(t, err)
			used := 0
			for _, b := range upBytes(t, fab) {
				if b > size/8 {
					used++
				}
			}
			assert.Equal(t, paths, used, "spines carrying the put with %d paths: %v", paths, upBytes(t, fab))
		})
	}
}

// A device whose ports have too few LIDs for the paths fails Init with ErrConfig, as do ranks
// that disagree on the number of paths.
func TestPathsConfigErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		err := rmatest.StartFabricJob(context.Background(), 2, rmatest.FabricJob{
			Fabric:    fabric.Config{LMC: 1},
			Configure: func(_ int, c *rma.Config) { c.Paths = 3 },
		}, func(context.Context, *rma.Runtime) error { return nil })
		require.ErrorIs(t, err, rma.ErrConfig)
		assert.Contains(t, err.Error(), "need LMC 2")
	})
	synctest.Test(t, func(t *testing.T) {
		err := rmatest.StartFabricJob(context.Background(), 2, rmatest.FabricJob{
			Fabric:    fabric.Config{LMC: 1},
			Configure: func(i int, c *rma.Config) { c.Paths = 1 + i },
		}, func(context.Context, *rma.Runtime) error { return nil })
		require.ErrorIs(t, err, rma.ErrConfig)
		assert.Contains(t, err.Error(), "GOARMCI_PATHS must be equal")
	})
}

// On the tcp provider every path is a stream of its own: 2 rails × 3 paths give 6 subchannels,
// and a striped put uses all of them (fault tolerance on: the connections' home paths carry the
// path bits).
func TestPathsOnTCP(t *testing.T) {
	const size = 1 << 20
	rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, size)
		require.NoError(t, err)
		rs := rt.Rails(1 - rt.Rank())
		require.Equal(t, 6, rs.Len())
		src := bytes.Repeat([]byte{1, 2, 3, 4, 5}, size/5+1)[:size]
		if rt.Rank() == 0 {
			require.NoError(t, rt.Put(ctx, src, seg, 1, 0))
			require.NoError(t, rt.Fence(ctx, 1))
			for i := range 6 {
				assert.Positive(t, rs.Posted(i), "subchannel %d", i)
			}
		}
		require.NoError(t, rt.Barrier(ctx))
		if rt.Rank() == 1 {
			require.Equal(t, src, seg.Local())
		}
		require.NoError(t, seg.Free(ctx))
	}, rmatest.Transport(rma.TransportTCP), rmatest.Configure(func(_ int, c *rma.Config) {
		c.Rails, c.Paths, c.StripePolicy = loopRails(2), 3, "even"
	}))
}
