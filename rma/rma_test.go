package rma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// transports runs body under shm and tcp with n ranks.
func transports(t *testing.T, n int, body func(ctx context.Context, t testing.TB, rt *rma.Runtime)) {
	for _, tr := range []rma.Transport{rma.TransportShm, rma.TransportTCP} {
		t.Run(fmt.Sprintf("%s/np%d", tr, n), func(t *testing.T) {
			rmatest.Run(t, n, body, rmatest.Transport(tr))
		})
	}
}

// eachJob runs body in jobs of 1, 2, 4 and 5 ranks over shared memory and over tcp (the job
// shapes of the ARMCI calls' tests).
func eachJob(t *testing.T, body func(ctx context.Context, t testing.TB, rt *rma.Runtime)) {
	for _, np := range []int{1, 2, 4, 5} {
		transports(t, np, body)
	}
}

func pattern(rank, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rank*31 + i*7 + 1)
	}
	return b
}

func TestPutGetEveryPair(t *testing.T) {
	for _, np := range []int{1, 2, 3, 4} {
		transports(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			const part = 3 * 1000
			seg, err := rt.Malloc(ctx, part*rt.Size())
			require.NoError(t, err)
			me := rt.Rank()
			// write my pattern into my slot on every rank
			for p := 0; p < rt.Size(); p++ {
				require.NoError(t, rt.Put(ctx, pattern(me, part), seg, p, me*part))
			}
			require.NoError(t, rt.Barrier(ctx))
			for q := 0; q < rt.Size(); q++ {
				require.Equal(t, pattern(q, part), seg.Local()[q*part:(q+1)*part], "slot of rank %d", q)
			}
			// read every rank's slot of every other rank
			for p := 0; p < rt.Size(); p++ {
				got := make([]byte, part*rt.Size())
				require.NoError(t, rt.Get(ctx, seg, p, 0, got))
				for q := 0; q < rt.Size(); q++ {
					require.Equal(t, pattern(q, part), got[q*part:(q+1)*part])
				}
			}
			require.NoError(t, rt.Barrier(ctx))
			require.NoError(t, seg.Free(ctx))
		})
	}
}

func TestLargeTransfers(t *testing.T) {
	transports(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		const n = 16<<20 + 3
		seg, err := rt.Malloc(ctx, n)
		require.NoError(t, err)
		peer := 1 - rt.Rank()
		if rt.Rank() == 0 {
			require.NoError(t, rt.Put(ctx, pattern(5, n), seg, peer, 0))
			got := make([]byte, n)
			require.NoError(t, rt.Get(ctx, seg, peer, 0, got))
			require.True(t, slices.Equal(pattern(5, n), got))
		}
		require.NoError(t, rt.Barrier(ctx))
	})
}

func TestGetAfterPutSeesNewDataWithoutFence(t *testing.T) {
	transports(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, 1<<16)
		require.NoError(t, err)
		if rt.Rank() == 0 {
			got := make([]byte, 1<<16)
			for i := 0; i < 50; i++ {
				src := pattern(i, 1<<16)
				h, err := rt.NbPut(ctx, src, seg, 1, 0)
				require.NoError(t, err)
				require.NoError(t, rt.Get(ctx, seg, 1, 0, got))
				require.NoError(t, h.Wait(ctx))
				require.True(t, slices.Equal(src, got), "iteration %d", i)
			}
		}
		require.NoError(t, rt.Barrier(ctx))
	})
}

func f64bytes(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func TestAccumulateAllTypesConcurrent(t *testing.T) {
	for _, np := range []int{2, 4} {
		transports(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			const elems = 1000
			const rounds = 20
			types := []rma.AccType{rma.AccInt32, rma.AccInt64, rma.AccFloat32, rma.AccFloat64, rma.AccComplex64, rma.AccComplex128}
			for _, typ := range types {
				es := typ.Size()
				seg, err := rt.Malloc(ctx, elems*es)
				require.NoError(t, err)
				src := make([]byte, elems*es)
				// element value 1 in every component (ints: 1; floats: 1.0)
				for i := 0; i < elems; i++ {
					switch typ {
					case rma.AccInt32:
						binary.LittleEndian.PutUint32(src[4*i:], 1)
					case rma.AccInt64:
						binary.LittleEndian.PutUint64(src[8*i:], 1)
					case rma.AccFloat32:
						binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(1))
					case rma.AccFloat64:
						binary.LittleEndian.PutUint64(src[8*i:], math.Float64bits(1))
					case rma.AccComplex64:
						binary.LittleEndian.PutUint32(src[8*i:], math.Float32bits(1))
						binary.LittleEndian.PutUint32(src[8*i+4:], math.Float32bits(1))
					case rma.AccComplex128:
						binary.LittleEndian.PutUint64(src[16*i:], math.Float64bits(1))
						binary.LittleEndian.PutUint64(src[16*i+8:], math.Float64bits(1))
					}
				}
				for r := 0; r < rounds; r++ {
					require.NoError(t, rt.Acc(ctx, typ, 3, src, seg, 0, 0), "%v", typ)
				}
				require.NoError(t, rt.Barrier(ctx))
				if rt.Rank() == 0 {
					want := float64(3 * rounds * rt.Size())
					loc := seg.Local()
					for i := 0; i < elems; i++ {
						var got float64
						switch typ {
						case rma.AccInt32:
							got = float64(int32(binary.LittleEndian.Uint32(loc[4*i:])))
						case rma.AccInt64:
							got = float64(int64(binary.LittleEndian.Uint64(loc[8*i:])))
						case rma.AccFloat32:
							got = float64(math.Float32frombits(binary.LittleEndian.Uint32(loc[4*i:])))
						case rma.AccFloat64:
							got = math.Float64frombits(binary.LittleEndian.Uint64(loc[8*i:]))
						case rma.AccComplex64:
							got = float64(math.Float32frombits(binary.LittleEndian.Uint32(loc[8*i+4:])))
						case rma.AccComplex128:
							got = math.Float64frombits(binary.LittleEndian.Uint64(loc[16*i+8:]))
						}
						require.Equal(t, want, got, "%v element %d", typ, i)
					}
				}
				require.NoError(t, seg.Free(ctx))
			}
		})
	}
}

func TestStridedPatch(t *testing.T) {
	transports(t, 3, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		// each rank owns a 20x30 float64 matrix (row-major, 240-byte rows)
		const rows, cols = 20, 30
		seg, err := rt.Malloc(ctx, rows*cols*8)
		require.NoError(t, err)
		me := rt.Rank()
		target := (me + 1) % rt.Size()
		// a 4x5 patch at (2+me, 3): source is a 4x7 buffer (leading dim 7)
		src := make([]float64, 4*7)
		for i := range src {
			src[i] = float64(100*me + i)
		}
		off := ((2+me)*cols + 3) * 8
		count := []int{5 * 8, 4}
		require.NoError(t, rt.PutS(ctx, f64bytes(src), []int{7 * 8}, seg, target, off, []int{cols * 8}, count))
		require.NoError(t, rt.Barrier(ctx))
		// read it back with GetS into a 4x5 buffer and compare
		got := make([]byte, 4*5*8)
		require.NoError(t, rt.GetS(ctx, seg, target, off, []int{cols * 8}, got, []int{5 * 8}, count))
		for i := 0; i < 4; i++ {
			for j := 0; j < 5; j++ {
				v := math.Float64frombits(binary.LittleEndian.Uint64(got[(i*5+j)*8:]))
				require.Equal(t, src[i*7+j], v, "(%d,%d)", i, j)
			}
		}
		// accumulate the same patch twice with scale 0.5: value doubles... becomes v + v
		require.NoError(t, rt.AccS(ctx, rma.AccFloat64, 0.5, f64bytes(src), []int{7 * 8}, seg, target, off, []int{cols * 8}, count))
		require.NoError(t, rt.AccS(ctx, rma.AccFloat64, 0.5, f64bytes(src), []int{7 * 8}, seg, target, off, []int{cols * 8}, count))
		require.NoError(t, rt.Barrier(ctx))
		// check my own matrix: the patch written by my predecessor, zeros elsewhere
		from := (me - 1 + rt.Size()) % rt.Size()
		loc := seg.Local()
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				v := math.Float64frombits(binary.LittleEndian.Uint64(loc[(i*cols+j)*8:]))
				want := 0.0
				if pi, pj := i-(2+from), j-3; pi >= 0 && pi < 4 && pj >= 0 && pj < 5 {
					want = 2 * float64(100*from+pi*7+pj)
				}
				require.Equal(t, want, v, "(%d,%d)", i, j)
			}
		}
	})
}

func TestVectorTransfers(t *testing.T) {
	transports(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, 4096)
		require.NoError(t, err)
		peer := 1 - rt.Rank()
		vecs := []rma.Vec{{Local: []byte("hello"), Off: 100}, {Local: []byte("world"), Off: 3000}, {Local: []byte{}, Off: 5}}
		require.NoError(t, rt.PutV(ctx, vecs, seg, peer))
		require.NoError(t, rt.Barrier(ctx))
		require.Equal(t, "hello", string(seg.Local()[100:105]))
		require.Equal(t, "world", string(seg.Local()[3000:3005]))
		a, b := make([]byte, 5), make([]byte, 5)
		require.NoError(t, rt.GetV(ctx, []rma.Vec{{Local: a, Off: 3000}, {Local: b, Off: 100}}, seg, peer))
		require.Equal(t, "world", string(a))
		require.Equal(t, "hello", string(b))
		require.NoError(t, rt.Barrier(ctx))
	})
}

func TestRmwFetchAndAddIsGapFree(t *testing.T) {
	for _, np := range []int{2, 4} {
		transports(t, np, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
			seg, err := rt.Malloc(ctx, 16)
			require.NoError(t, err)
			const each = 100
			var got32, got64 []int64
			for i := 0; i < each; i++ {
				v, err := rt.Rmw(ctx, rma.FetchAndAdd, seg, 0, 0, 1)
				require.NoError(t, err)
				got32 = append(got32, v)
				w, err := rt.Rmw(ctx, rma.FetchAndAddLong, seg, 0, 8, 1<<33)
				require.NoError(t, err)
				got64 = append(got64, w)
			}
			require.True(t, slices.IsSorted(got32))
			// gather all ranks' values on every rank through the segment of rank 0? Use AllReduce on a presence bitmap.
			present := make([]int64, each*rt.Size())
			for _, v := range got32 {
				present[v]++
			}
			buf := make([]byte, 8*len(present))
			for i, v := range present {
				binary.LittleEndian.PutUint64(buf[8*i:], uint64(v))
			}
			require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, buf))
			for i := range present {
				require.Equal(t, uint64(1), binary.LittleEndian.Uint64(buf[8*i:]), "ticket %d", i)
			}
			for _, w := range got64 {
				require.Zero(t, w%(1<<33))
			}
			require.NoError(t, rt.Barrier(ctx))
			if rt.Rank() == 0 {
				require.Equal(t, uint32(each*rt.Size()), binary.LittleEndian.Uint32(seg.Local()))
				require.Equal(t, uint64(each*rt.Size())<<33, binary.LittleEndian.Uint64(seg.Local()[8:]))
			}
			require.NoError(t, rt.Barrier(ctx))
			old, err := rt.Rmw(ctx, rma.SwapLong, seg, 0, 8, -1)
			require.NoError(t, err)
			require.NotZero(t, old)
			require.NoError(t, rt.Barrier(ctx))
		})
	}
}

func TestMutexSerializesReadModifyWrite(t *testing.T) {
	transports(t, 3, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		require.NoError(t, rt.CreateMutexes(ctx, 2))
		seg, err := rt.Malloc(ctx, 8)
		require.NoError(t, err)
		const rounds = 30
		buf := make([]byte, 8)
		for i := 0; i < rounds; i++ {
			require.NoError(t, rt.Lock(ctx, 1, 0))
			require.NoError(t, rt.Get(ctx, seg, 0, 0, buf))
			binary.LittleEndian.PutUint64(buf, binary.LittleEndian.Uint64(buf)+1)
			require.NoError(t, rt.Put(ctx, buf, seg, 0, 0))
			require.NoError(t, rt.Unlock(ctx, 1, 0))
		}
		require.NoError(t, rt.Barrier(ctx))
		require.NoError(t, rt.Get(ctx, seg, 0, 0, buf))
		require.Equal(t, uint64(rounds*rt.Size()), binary.LittleEndian.Uint64(buf))
		require.NoError(t, rt.DestroyMutexes(ctx))
	})
}

func TestCollectives(t *testing.T) {
	eachJob(t, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		me := float64(rt.Rank())
		vals := []float64{me, 1 - me, 1}
		b := f64bytes(vals)
		require.NoError(t, rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceSum, b))
		n := float64(rt.Size())
		require.Equal(t, f64bytes([]float64{n * (n - 1) / 2, n - n*(n-1)/2, n}), b)
		b = f64bytes(vals)
		require.NoError(t, rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceMax, b))
		require.Equal(t, f64bytes([]float64{n - 1, 1, 1}), b)
		// a reduction larger than one scratch slot
		big := make([]byte, 3<<20)
		for i := 0; i < len(big); i += 4 {
			binary.LittleEndian.PutUint32(big[i:], uint32(i/4+rt.Rank()))
		}
		require.NoError(t, rt.AllReduce(ctx, rma.AccInt32, rma.ReduceMin, big))
		bad := -1
		for i := 0; i < len(big) && bad < 0; i += 4 {
			if binary.LittleEndian.Uint32(big[i:]) != uint32(i/4) {
				bad = i / 4
			}
		}
		require.Equal(t, -1, bad, "first wrong element of the min-reduction")
		msg := make([]byte, 100)
		if rt.Rank() == rt.Size()-1 {
			copy(msg, "broadcast from the last rank")
		}
		require.NoError(t, rt.Broadcast(ctx, rt.Size()-1, msg))
		require.Equal(t, "broadcast from the last rank", string(msg[:28]))
		// product, abs-max and abs-min (armci_msg_dgop "*", "absmax", "absmin"): rank r
		// contributes -(r+2), so the product is (-1)^n (n+1)!, the magnitudes 2..n+1
		b = f64bytes([]float64{-(me + 2)})
		require.NoError(t, rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceProd, b))
		prod := 1.0
		for r := 0; r < rt.Size(); r++ {
			prod *= -float64(r + 2)
		}
		require.Equal(t, f64bytes([]float64{prod}), b)
		b = f64bytes([]float64{-(me + 2)})
		require.NoError(t, rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceAbsMax, b))
		require.Equal(t, f64bytes([]float64{n + 1}), b)
		b = f64bytes([]float64{-(me + 2)})
		require.NoError(t, rt.AllReduce(ctx, rma.AccFloat64, rma.ReduceAbsMin, b))
		require.Equal(t, f64bytes([]float64{2}), b)
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	transports(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		seg, err := rt.Malloc(ctx, 64)
		require.NoError(t, err)
		peer := 1 - rt.Rank()
		buf := pattern(9, 64)
		is := func(err, target error) {
			t.Helper()
			require.True(t, errors.Is(err, target), "got %v, want %v", err, target)
		}
		is(rt.Put(ctx, buf, seg, 2, 0), rma.ErrBadRank)
		is(rt.Put(ctx, buf, seg, -1, 0), rma.ErrBadRank)
		is(rt.Put(ctx, buf, seg, peer, 1), rma.ErrOutOfRange)
		is(rt.Put(ctx, buf[:1], seg, peer, 64), rma.ErrOutOfRange)
		is(rt.Get(ctx, seg, peer, -8, buf[:8]), rma.ErrOutOfRange)
		nine := make([]int, 9)
		is(rt.PutS(ctx, buf, nine, seg, peer, 0, nine, append([]int{1}, nine...)), rma.ErrStride)
		is(rt.PutS(ctx, buf, []int{8}, seg, peer, 0, []int{32}, []int{8, 3}), rma.ErrOutOfRange)
		_, err = rt.Rmw(ctx, rma.RmwOp(99), seg, peer, 0, 1)
		is(err, rma.ErrBadOp)
		_, err = rt.Rmw(ctx, rma.FetchAndAddLong, seg, peer, 4, 1)
		is(err, rma.ErrType)
		is(rt.Acc(ctx, rma.AccFloat64, 1, buf[:8], seg, peer, 4), rma.ErrType)
		is(rt.Acc(ctx, rma.AccType(42), 1, buf[:8], seg, peer, 0), rma.ErrType)
		is(rt.AllReduce(ctx, rma.AccComplex128, rma.ReduceMax, make([]byte, 16)), rma.ErrBadOp)
		require.NoError(t, rt.Barrier(ctx))
		require.Equal(t, make([]byte, 64), seg.Local(), "bad input changed the segment")
		require.NoError(t, seg.Free(ctx))
		is(rt.Put(ctx, buf, seg, peer, 0), rma.ErrFreed)
		is(seg.Free(ctx), rma.ErrFreed)
	})
}
