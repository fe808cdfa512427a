package globalarray

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// heldBytes is what an array of element size es holds on rank me, ghost cells included.
func heldBytes[T Elem](a *Array[T], me, es int) int64 {
	if a.d.BlockElems(me) == 0 {
		return 0
	}
	lo, hi := a.d.Block(me)
	n := es
	for k := range lo {
		n *= hi[k] - lo[k] + 1 + 2*a.ghost(k)
	}
	return int64(n)
}

// NGA_Inquire, GA_Inquire_memory and GA_Summarize over two arrays (one with ghost cells); then
// GA_Set_memory_limit: a Create and a Duplicate that would take rank 0 over its limit fail with
// ErrMemoryLimit on every rank, and no rank holds the array (the account is unchanged and the
// next collective Create, once the limit is lifted, succeeds everywhere); Destroy gives the
// bytes back.
func TestInquireAndMemoryLimit(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me, np := rt.Rank(), rt.Size()
		require.Zero(t, InquireMemory(rt))
		require.False(t, MemoryLimited(rt))
		_, ok := MemoryAvail(rt)
		require.False(t, ok)

		a, err := Create[float64](ctx, rt, "fock", []int{10, 12})
		require.NoError(t, err)
		g, err := Create[int32](ctx, rt, "grid", []int{6, 7}, Ghosts(1, 2))
		require.NoError(t, err)
		typ, dims := a.Inquire()
		require.Equal(t, rma.AccFloat64, typ)
		require.Equal(t, []int{10, 12}, dims)
		typ, dims = g.Inquire()
		require.Equal(t, rma.AccInt32, typ)
		require.Equal(t, []int{6, 7}, dims)
		ha, hg := heldBytes(a, me, 8), heldBytes(g, me, 4)
		require.Equal(t, ha+hg, InquireMemory(rt))

		var b bytes.Buffer
		require.NoError(t, Summarize(rt, &b, false))
		want := fmt.Sprintf("global arrays on rank %d of %d: 2 arrays, %d bytes here, memory limit none\n", me, np, ha+hg) +
			fmt.Sprintf("  array 0 \"fock\": %v, dims [10 12], grid %v, %d bytes here\n", rma.AccFloat64, a.d.Grid(), ha) +
			fmt.Sprintf("  array 1 \"grid\": %v, dims [6 7], grid %v, %d bytes here, ghosts [1 2]\n", rma.AccInt32, g.d.Grid(), hg)
		require.Equal(t, want, b.String())
		b.Reset()
		require.NoError(t, Summarize(rt, &b, true))
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		require.Len(t, lines, 3+a.d.NBlocks()+g.d.NBlocks())
		lo, hi := a.d.Block(0)
		require.Equal(t, fmt.Sprintf("    block 0 on rank 0: %v..%v", lo, hi), lines[2])
		// a block-cyclic array: one line per block, with its owner and bounds
		bc, err := Create[float64](ctx, rt, "cyclic", []int{5, 7}, BlockCyclic(2, 3))
		require.NoError(t, err)
		b.Reset()
		require.NoError(t, Summarize(rt, &b, true))
		lines = strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		require.Len(t, lines, 4+a.d.NBlocks()+g.d.NBlocks()+bc.d.NBlocks())
		require.Equal(t, 9, bc.d.NBlocks(), "3 x 3 blocks of 2 x 3")
		last := lines[len(lines)-1]
		require.Equal(t, fmt.Sprintf("    block 8 on rank %d: [4 6]..[4 6]", bc.d.BlockOwner(8)), last)
		require.NoError(t, bc.Destroy(ctx))

		// Rank 0 may hold nothing more; the others have room.
		room := int64(1 << 20)
		if me == 0 {
			room = 0
		}
		SetMemoryLimit(rt, ha+hg+room)
		require.True(t, MemoryLimited(rt))
		avail, ok := MemoryAvail(rt)
		require.True(t, ok)
		require.Equal(t, room, avail)
		_, err = Create[float64](ctx, rt, "big", []int{4 * np, 8})
		require.ErrorIs(t, err, ErrMemoryLimit)
		_, err = a.Duplicate(ctx, "fock2")
		require.ErrorIs(t, err, ErrMemoryLimit)
		require.Equal(t, ha+hg, InquireMemory(rt), "nothing created")
		b.Reset()
		require.NoError(t, Summarize(rt, &b, false))
		require.Contains(t, b.String(), ": 2 arrays,")
		require.Contains(t, b.String(), fmt.Sprintf("memory limit %d bytes\n", ha+hg+room))

		SetMemoryLimit(rt, -1)
		require.False(t, MemoryLimited(rt))
		c, err := Create[float64](ctx, rt, "big", []int{4 * np, 8})
		require.NoError(t, err)
		hc := heldBytes(c, me, 8)
		require.Equal(t, ha+hg+hc, InquireMemory(rt))
		require.NoError(t, c.Sync(ctx))
		require.NoError(t, c.Destroy(ctx))
		require.NoError(t, g.Destroy(ctx))
		require.Equal(t, ha, InquireMemory(rt))
		require.NoError(t, a.Destroy(ctx))
		require.Zero(t, InquireMemory(rt))
		b.Reset()
		require.NoError(t, Summarize(rt, &b, false))
		require.Equal(t, fmt.Sprintf("global arrays on rank %d of %d: 0 arrays, 0 bytes here, memory limit none\n", me, np), b.String())
		accountsMu.Lock()
		_, kept := accounts[rt]
		accountsMu.Unlock()
		require.False(t, kept, "an empty account is dropped")
	})
}

// An array on a process group is counted on its members only, and a limit on one member fails
// the group's Create on every member while the other group is unaffected.
func TestMemoryLimitOnGroup(t *testing.T) {
	acrossJobs(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me, np := rt.Rank(), rt.Size()
		if np < 2 {
			return
		}
		pg, err := PgroupSplit(ctx, rt, 2)
		require.NoError(t, err)
		if me == 0 {
			SetMemoryLimit(rt, 0)
		}
		a, err := Create[int64](ctx, rt, "half", []int{8, 3}, OnGroup(pg))
		if pg.Members()[0] == 0 {
			require.ErrorIs(t, err, ErrMemoryLimit)
			require.Zero(t, InquireMemory(rt))
		} else {
			require.NoError(t, err)
			require.Equal(t, heldBytes(a, pg.NodeID(), 8), InquireMemory(rt))
			var b bytes.Buffer
			require.NoError(t, Summarize(rt, &b, false))
			require.Contains(t, b.String(), fmt.Sprintf(", group of %d ranks\n", pg.Nnodes()))
			require.NoError(t, a.Destroy(ctx))
		}
		SetMemoryLimit(rt, -1)
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, pg.Destroy(ctx))
	})
}
