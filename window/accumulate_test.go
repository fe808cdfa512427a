package window

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// encode writes vals as elements of typ (integers and floats take the real part).
func encode(typ Type, vals []complex128) []byte {
	b := make([]byte, len(vals)*typ.Size())
	for i, v := range vals {
		e := b[i*typ.Size():]
		switch typ {
		case Int32:
			le.PutUint32(e, uint32(int32(real(v))))
		case Int64:
			le.PutUint64(e, uint64(int64(real(v))))
		case Float32:
			le.PutUint32(e, math.Float32bits(float32(real(v))))
		case Float64:
			le.PutUint64(e, math.Float64bits(real(v)))
		case Complex64:
			le.PutUint32(e, math.Float32bits(float32(real(v))))
			le.PutUint32(e[4:], math.Float32bits(float32(imag(v))))
		case Complex128:
			le.PutUint64(e, math.Float64bits(real(v)))
			le.PutUint64(e[8:], math.Float64bits(imag(v)))
		}
	}
	return b
}

func decode(typ Type, b []byte) []complex128 {
	out := make([]complex128, len(b)/typ.Size())
	for i := range out {
		e := b[i*typ.Size():]
		switch typ {
		case Int32:
			out[i] = complex(float64(int32(le.Uint32(e))), 0)
		case Int64:
			out[i] = complex(float64(int64(le.Uint64(e))), 0)
		case Float32:
			out[i] = complex(float64(math.Float32frombits(le.Uint32(e))), 0)
		case Float64:
			out[i] = complex(math.Float64frombits(le.Uint64(e)), 0)
		case Complex64:
			out[i] = complex(float64(math.Float32frombits(le.Uint32(e))), float64(math.Float32frombits(le.Uint32(e[4:]))))
		case Complex128:
			out[i] = complex(math.Float64frombits(le.Uint64(e)), math.Float64frombits(le.Uint64(e[8:])))
		}
	}
	return out
}

const accElems = 6

func initVal(typ Type, i int) complex128 {
	if isComplex(typ) {
		return complex(float64(2+i%2), float64(i%3))
	}
	return complex(float64(2+i%2), 0)
}

func originVal(typ Type, rank, i int) complex128 {
	v := complex(float64(rank+1+i%3), 0)
	if isComplex(typ) {
		v += complex(0, float64((rank+i)%2))
	}
	if i == 4 && !isComplex(typ) {
		v = -v // negative values exercise MAX/MIN
	}
	return v
}

// expected folds every rank's origin into the initial value with op (an independent model).
func expected(o Op, typ Type, n, i int) complex128 {
	acc := initVal(typ, i)
	for r := 0; r < n; r++ {
		v := originVal(typ, r, i)
		switch o {
		case OpSum:
			acc += v
		case OpProd:
			acc *= v
		case OpMax:
			acc = complex(math.Max(real(acc), real(v)), 0)
		case OpMin:
			acc = complex(math.Min(real(acc), real(v)), 0)
		}
	}
	return acc
}

var allTypes = []Type{Int32, Int64, Float32, Float64, Complex64, Complex128}

// TestAccumulateOpsAndTypes: every rank accumulates into rank 0 with every op MPI defines for
// every type, under lock_all; the result is exact (small integers) for SUM, PROD, MAX, MIN and
// one of the origins, element by element, for REPLACE. Both AccOps modes.
func TestAccumulateOpsAndTypes(t *testing.T) {
	for _, d := range domains {
		t.Run(d.name, func(t *testing.T) {
			each(t, []int{2, 3, 4}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				n, me := rt.Size(), rt.Rank()
				w, err := Allocate(ctx, rt, 16*accElems+16, 1, d.opts...)
				require.NoError(t, err)
				for _, typ := range allTypes {
					for _, o := range []Op{OpSum, OpProd, OpMax, OpMin, OpReplace} {
						if checkOp(o, typ) != nil || w.opt.native && typ == Complex128 && o != OpSum {
							require.ErrorIs(t, w.Fence(ctx, ModeNoPrecede|ModeNoSucceed), nil)
							require.NoError(t, w.LockAll(ctx, 0))
							require.ErrorIs(t, w.Accumulate(ctx, encode(typ, make([]complex128, 1)), typ, 0, 0, o), ErrOp)
							require.NoError(t, w.UnlockAll(ctx))
							continue
						}
						if me == 0 {
							init := make([]complex128, accElems)
							for i := range init {
								init[i] = initVal(typ, i)
							}
							copy(w.Local(), encode(typ, init))
						}
						require.NoError(t, rt.Barrier(ctx))
						orig := make([]complex128, accElems)
						for i := range orig {
							orig[i] = originVal(typ, me, i)
						}
						require.NoError(t, w.LockAll(ctx, 0))
						require.NoError(t, w.Accumulate(ctx, encode(typ, orig), typ, 0, 0, o))
						require.NoError(t, w.UnlockAll(ctx))
						require.NoError(t, rt.Barrier(ctx))
						if me == 0 {
							got := decode(typ, w.Local()[:accElems*typ.Size()])
							for i := range got {
								if o == OpReplace {
									ok := false
									for r := 0; r < n; r++ {
										ok = ok || got[i] == originVal(typ, r, i)
									}
									require.True(t, ok, "%v %v element %d = %v is no rank's origin", o, typ, i, got[i])
									continue
								}
								require.Equal(t, expected(o, typ, n, i), got[i], "%v %v element %d", o, typ, i)
							}
						}
						require.NoError(t, rt.Barrier(ctx))
					}
				}
				require.NoError(t, w.Free(ctx))
			})
		})
	}
}

// TestFetchingOps: FetchAndOp(SUM, 1) from every rank, repeatedly, returns every value from 0 to
// n·iters−1 exactly once (integers on fetch-and-add, floats on compare-and-swap loops, or all
// under the accumulate lock); GetAccumulate on an array gives back the values before each rank's
// addition; CompareAndSwap has exactly one winner.
func TestFetchingOps(t *testing.T) {
	for _, d := range domains {
		t.Run(d.name, func(t *testing.T) {
			each(t, []int{2, 3, 4}, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
				const iters = 6
				n, me := rt.Size(), rt.Rank()
				w, err := Allocate(ctx, rt, 256, 8, d.opts...)
				require.NoError(t, err)
				for _, typ := range []Type{Int32, Int64, Float32, Float64} {
					require.NoError(t, rt.Barrier(ctx))
					clear(w.Local())
					require.NoError(t, rt.Barrier(ctx))
					seen := make([]byte, 8*n*iters)
					one := encode(typ, []complex128{1})
					res := make([]byte, typ.Size())
					for k := 0; k < iters; k++ {
						require.NoError(t, w.Lock(ctx, LockShared, 0, 0))
						require.NoError(t, w.FetchAndOp(ctx, one, res, typ, 0, 0, OpSum))
						require.NoError(t, w.Unlock(ctx, 0))
						v := int(real(decode(typ, res)[0]))
						require.True(t, v >= 0 && v < n*iters, "%v fetched %d", typ, v)
						le.PutUint64(seen[8*v:], 1)
					}
					require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, seen))
					for v := 0; v < n*iters; v++ {
						require.Equal(t, int64(1), geti64(seen, v), "%v value %d fetched once", typ, v)
					}
				}
				// GetAccumulate SUM of an array at disp 8 (element 8 on): the fetched values of
				// all ranks sum to n·init + (0+1+...+n-1) per element
				require.NoError(t, rt.Barrier(ctx))
				if me == 0 {
					clear(w.Local())
					for i := 0; i < 4; i++ {
						le.PutUint64(w.Local()[64+8*i:], uint64(10*i))
					}
				}
				require.NoError(t, rt.Barrier(ctx))
				ones := encode(Int64, []complex128{1, 1, 1, 1})
				got := make([]byte, 32)
				require.NoError(t, w.LockAll(ctx, 0))
				require.NoError(t, w.GetAccumulate(ctx, ones, got, Int64, 0, 8, OpSum))
				require.NoError(t, w.FlushAll(ctx))
				maxed := make([]byte, 8)
				require.NoError(t, w.GetAccumulate(ctx, i64(int64(100+me)), maxed, Int64, 0, 16, OpMax))
				require.NoError(t, w.UnlockAll(ctx))
				require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, got))
				for i := 0; i < 4; i++ {
					require.Equal(t, int64(n*10*i+n*(n-1)/2), geti64(got, i), "element %d", i)
				}
				// CompareAndSwap: one winner among the ranks, on a 64- and a 32-bit word
				res64, res32 := make([]byte, 8), make([]byte, 4)
				require.NoError(t, w.Lock(ctx, LockShared, 0, 0))
				require.NoError(t, w.CompareAndSwap(ctx, i64(int64(me+1)), i64(0), res64, Int64, 0, 1))
				require.NoError(t, w.CompareAndSwap(ctx, encode(Int32, []complex128{complex(float64(me+1), 0)}), make([]byte, 4), res32, Int32, 0, 2))
				require.NoError(t, w.Unlock(ctx, 0))
				zeros := make([]byte, 16)
				if geti64(res64, 0) == 0 {
					le.PutUint64(zeros, 1)
				}
				if le.Uint32(res32) == 0 {
					le.PutUint64(zeros[8:], 1)
				}
				require.NoError(t, rt.AllReduce(ctx, rma.AccInt64, rma.ReduceSum, zeros))
				require.Equal(t, int64(1), geti64(zeros, 0), "one 64-bit CAS winner")
				require.Equal(t, int64(1), geti64(zeros, 1), "one 32-bit CAS winner")
				require.NoError(t, rt.Barrier(ctx))
				if me == 0 {
					require.Equal(t, int64(100+n-1), geti64(w.Local(), 16), "MAX by GetAccumulate")
					wv := geti64(w.Local(), 1)
					require.True(t, wv >= 1 && wv <= int64(n))
				}
				require.NoError(t, rt.Barrier(ctx))
				require.NoError(t, w.Free(ctx))
			})
		})
	}
}
