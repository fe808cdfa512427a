package rma_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/accum"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// TestMapped: Mapped gives this rank's own part and, over shm, the peer's part as this process
// maps it (nil over tcp); CPU atomics on a mapped word and Rmw from the other rank on the same
// word both count exactly; MappedStable holds until the segment is freed, and then Mapped is
// ErrFreed; a bad rank is ErrBadRank.
func TestMapped(t *testing.T) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(string(tr), func(t *testing.T) {
			rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				const part, rounds = 64, 2000
				seg, err := rt.Malloc(ctx, part)
				require.NoError(t, err)
				me, peer := rt.Rank(), 1-rt.Rank()
				own, err := rt.Mapped(ctx, seg, me)
				require.NoError(t, err)
				require.Len(t, own, part)
				m, err := rt.Mapped(ctx, seg, peer)
				require.NoError(t, err)
				if tr == rma.TransportTCP {
					require.Nil(t, m, "a network peer has no mapping")
				} else {
					require.Len(t, m, part)
				}
				require.True(t, rt.MappedStable(seg))
				_, err = rt.Mapped(ctx, seg, 2)
				require.ErrorIs(t, err, rma.ErrBadRank)
				require.NoError(t, rt.Barrier(ctx))
				// rank 0's word 0: rank 0 adds through its own part, rank 1 through the mapping
				// (shm) or with Rmw (tcp)
				for range rounds {
					switch {
					case me == 0:
						_, err = accum.FetchAdd64(own[0:8], 1)
					case m != nil:
						_, err = accum.FetchAdd64(m[0:8], 1)
					default:
						_, err = rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 0, 1)
					}
					require.NoError(t, err)
				}
				require.NoError(t, rt.Barrier(ctx))
				if me == 0 {
					v, err := accum.Load64(own[0:8])
					require.NoError(t, err)
					require.Equal(t, uint64(2*rounds), v)
				}
				require.NoError(t, rt.Barrier(ctx))
				require.NoError(t, seg.Free(ctx))
				require.False(t, rt.MappedStable(seg))
				_, err = rt.Mapped(ctx, seg, peer)
				require.ErrorIs(t, err, rma.ErrFreed)
			}, rmatest.Transport(tr))
		})
	}
}
