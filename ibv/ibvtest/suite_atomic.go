package ibvtest

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (s *suite) needAtomics(t *testing.T) {
	t.Helper()
	if !s.caps.Atomics {
		t.Skip("provider declares no atomics (Caps.Atomics false)")
	}
}

func (s *suite) needAccumulate(t *testing.T) {
	t.Helper()
	if !s.caps.Accumulate {
		t.Skip("provider declares no accumulate (Caps.Accumulate false)")
	}
}

type atomicCase struct {
	name        string
	op          ibv.Opcode
	size        int    // operand bytes
	init        uint64 // target word before
	compareAdd  uint64
	swap        uint64
	wantOld     uint64
	wantTarget  uint64
	misalign4ok bool // 32-bit operands only need 4-byte alignment
}

var atomicCases = []atomicCase{
	{"FetchAdd64", ibv.OpAtomicFetchAdd, 8, 0x00000000ffffffff, 1, 0, 0x00000000ffffffff, 0x0000000100000000, false},
	{"FetchAdd64Wrap", ibv.OpAtomicFetchAdd, 8, math.MaxUint64, 3, 0, math.MaxUint64, 2, false},
	{"CmpSwap64Hit", ibv.OpAtomicCmpSwap, 8, 0x1122334455667788, 0x1122334455667788, 0xa5a5a5a5_5a5a5a5a, 0x1122334455667788, 0xa5a5a5a5_5a5a5a5a, false},
	{"CmpSwap64Miss", ibv.OpAtomicCmpSwap, 8, 0x1122334455667788, 0x1122334455667789, 0xa5a5a5a5_5a5a5a5a, 0x1122334455667788, 0x1122334455667788, false},
	{"CmpSwap64MissHighHalf", ibv.OpAtomicCmpSwap, 8, 0x1122334455667788, 0x0122334455667788, 7, 0x1122334455667788, 0x1122334455667788, false},
	{"Swap64", ibv.OpAtomicSwap64, 8, 0xdeadbeefcafef00d, 0x0102030405060708, 0, 0xdeadbeefcafef00d, 0x0102030405060708, false},
	{"FetchAdd32", ibv.OpAtomicFetchAdd32, 4, 0xfffffffe, 5, 0, 0xfffffffe, 3, true},
	{"Swap32", ibv.OpAtomicSwap32, 4, 0x89abcdef, 0x01234567, 0, 0x89abcdef, 0x01234567, true},
	{"CmpSwap32Hit", ibv.OpAtomicCmpSwap32, 4, 0x89abcdef, 0x89abcdef, 0x55aa55aa, 0x89abcdef, 0x55aa55aa, true},
	{"CmpSwap32Miss", ibv.OpAtomicCmpSwap32, 4, 0x89abcdef, 0x89abcdee, 0x55aa55aa, 0x89abcdef, 0x89abcdef, true},
}

func (s *suite) testAtomics(t *testing.T) {
	s.needAtomics(t)
	qa, qb := s.connect(t)
	const span = 64
	bg := Pattern(0xa7, span)
	target := RegMR(t, s.p, qb.PD(), span, ibv.AccessAll, nil)
	result := RegMR(t, s.p, qa.PD(), span, ibv.AccessLocalWrite, nil)
	id := uint64(100)
	for _, c := range atomicCases {
		for _, viaSGL := range []bool{false, true} {
			name := c.name + "/LocalBuf"
			if viaSGL {
				name = c.name + "/SGL"
			}
			t.Run(name, func(t *testing.T) {
				off := alignedOff(target, 16, 8)
				if c.misalign4ok {
					off += 4 // 4-byte aligned, not 8
				}
				tb := target.Buf()
				copy(tb, bg)
				if c.size == 8 {
					put64(tb[off:], c.init)
				} else {
					put32(tb[off:], uint32(c.init))
				}
				want := append([]byte(nil), tb...)
				if c.size == 8 {
					put64(want[off:], c.wantTarget)
				} else {
					put32(want[off:], uint32(c.wantTarget))
				}
				id++
				wr := &ibv.SendWR{ID: id, Opcode: c.op, Flags: ibv.SendSignaled, RemoteAddr: target.Addr + uint64(off),
					RKey: target.RKey, CompareAdd: c.compareAdd, Swap: c.swap}
				var res []byte
				roff := alignedOff(result, 8, 8)
				if viaSGL {
					copy(result.Buf(), bg)
					res = result.Buf()[roff : roff+c.size]
					wr.SGL = []ibv.SGE{result.SGE(roff, c.size)}
				} else {
					res = make([]byte, c.size)
					wr.LocalBuf = res
				}
				require.NoError(t, qa.PostSend(wr))
				wc := WaitOK(t, qa.SendCQ(), id)
				assert.Equal(t, provider.WCOpcodeOf(c.op), wc.Opcode)
				if c.size == 8 {
					assert.Equal(t, c.wantOld, le64(res), "returned old value")
				} else {
					assert.Equal(t, uint32(c.wantOld), le32(res), "returned old value")
				}
				SameBytes(t, "target after "+c.name, want, tb)
				if viaSGL {
					wantR := append([]byte(nil), bg...)
					copy(wantR[roff:], res)
					SameBytes(t, "result MR outside the result word", wantR, result.Buf())
				}
			})
		}
	}
	t.Run("FetchAddSequence", func(t *testing.T) {
		// Fetch-adds from one QP are applied in order: the returned values count up.
		off := alignedOff(target, 0, 8)
		put64(target.Buf()[off:], 1000)
		const k = 64
		res := make([][]byte, k)
		for i := range res {
			res[i] = make([]byte, 8)
			require.NoError(t, qa.PostSend(&ibv.SendWR{ID: uint64(i), Opcode: ibv.OpAtomicFetchAdd, Flags: ibv.SendSignaled,
				LocalBuf: res[i], RemoteAddr: target.Addr + uint64(off), RKey: target.RKey, CompareAdd: 2}))
		}
		for i := 0; i < k; i++ {
			WaitOK(t, qa.SendCQ(), uint64(i))
		}
		for i := range res {
			assert.Equal(t, uint64(1000+2*i), le64(res[i]), "fetch-add %d", i)
		}
		assert.Equal(t, uint64(1000+2*k), le64(target.Buf()[off:]))
	})
}

func (s *suite) testAtomicAlignment(t *testing.T) {
	s.needAtomics(t)
	qa, qb := s.connect(t)
	target := RegMR(t, s.p, qb.PD(), 64, ibv.AccessAll, Pattern(3, 64))
	before := append([]byte(nil), target.Buf()...)
	off := uint64(alignedOff(target, 8, 8))
	bad := []struct {
		name string
		wr   ibv.SendWR
	}{
		{"FetchAdd64 at +4", ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: make([]byte, 8), RemoteAddr: target.Addr + off + 4}},
		{"CmpSwap64 at +1", ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap, LocalBuf: make([]byte, 8), RemoteAddr: target.Addr + off + 1}},
		{"Swap64 at +2", ibv.SendWR{Opcode: ibv.OpAtomicSwap64, LocalBuf: make([]byte, 8), RemoteAddr: target.Addr + off + 2}},
		{"FetchAdd32 at +2", ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd32, LocalBuf: make([]byte, 4), RemoteAddr: target.Addr + off + 2}},
		{"CmpSwap32 at +1", ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap32, LocalBuf: make([]byte, 4), RemoteAddr: target.Addr + off + 1}},
		{"Swap32 at +3", ibv.SendWR{Opcode: ibv.OpAtomicSwap32, LocalBuf: make([]byte, 4), RemoteAddr: target.Addr + off + 3}},
		{"FetchAdd64 4-byte result", ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: make([]byte, 4), RemoteAddr: target.Addr + off}},
		{"FetchAdd32 8-byte result", ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd32, LocalBuf: make([]byte, 8), RemoteAddr: target.Addr + off}},
		{"Accumulate int64 at +4", ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt64, LocalBuf: make([]byte, 16), RemoteAddr: target.Addr + off + 4}},
		{"Accumulate ragged", ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccFloat64, LocalBuf: make([]byte, 12), RemoteAddr: target.Addr + off}},
	}
	for i, b := range bad {
		wr := b.wr
		wr.ID = uint64(i)
		wr.Flags = ibv.SendSignaled
		wr.RKey = target.RKey
		wr.CompareAdd = 1
		err := qa.PostSend(&wr)
		assert.ErrorIs(t, err, ibv.ErrInvalidArgument, b.name)
	}
	// Nothing was started: the next request's completion is the only one, and the target is intact.
	require.NoError(t, qa.PostSend(&ibv.SendWR{ID: 77, Opcode: ibv.OpRDMARead, Flags: ibv.SendSignaled,
		LocalBuf: make([]byte, 1), RemoteAddr: target.Addr, RKey: target.RKey}))
	WaitOK(t, qa.SendCQ(), 77)
	checkQueuesEmpty(t, qa, "refused atomics")
	SameBytes(t, "target after refused atomics", before, target.Buf())
	assert.Equal(t, ibv.StateRTS, qa.State(), "refused posts do not break the QP")
}

// accCase is one accumulate element type with values whose results are exact in that type.
type accCase struct {
	typ   ibv.AccType
	scale complex128
}

var accCases = []accCase{
	{ibv.AccInt32, -3},
	{ibv.AccInt64, 3 + 7i}, // integers take the real part
	{ibv.AccFloat32, 2.5},
	{ibv.AccFloat64, -0.5},
	{ibv.AccComplex64, 2 + 1i},
	{ibv.AccComplex128, -1.5 + 0.5i},
}

// accValues fills n elements of type typ: element i of the target is base+i, of the source
// (i%7)-3 (with imaginary parts i%5 and 2-(i%3) for complex types).
func accEncode(typ ibv.AccType, n int, f func(i int) complex128) []byte {
	es := typ.Size()
	b := make([]byte, n*es)
	for i := 0; i < n; i++ {
		v := f(i)
		e := b[i*es:]
		switch typ {
		case ibv.AccInt32:
			put32(e, uint32(int32(real(v))))
		case ibv.AccInt64:
			put64(e, uint64(int64(real(v))))
		case ibv.AccFloat32:
			put32(e, math.Float32bits(float32(real(v))))
		case ibv.AccFloat64:
			put64(e, math.Float64bits(real(v)))
		case ibv.AccComplex64:
			put32(e, math.Float32bits(float32(real(v))))
			put32(e[4:], math.Float32bits(float32(imag(v))))
		case ibv.AccComplex128:
			put64(e, math.Float64bits(real(v)))
			put64(e[8:], math.Float64bits(imag(v)))
		}
	}
	return b
}

// accExpect is dst + scale·src element-wise as the type defines it, computed with exact values.
func accExpect(typ ibv.AccType, dst, src func(i int) complex128, scale complex128) func(i int) complex128 {
	return func(i int) complex128 {
		switch typ {
		case ibv.AccInt32, ibv.AccInt64, ibv.AccFloat32, ibv.AccFloat64:
			s := real(scale)
			if typ == ibv.AccInt32 || typ == ibv.AccInt64 {
				s = math.Trunc(s)
			}
			return complex(real(dst(i))+s*real(src(i)), 0)
		}
		return dst(i) + scale*src(i)
	}
}

func (s *suite) testAccumulate(t *testing.T) {
	s.needAccumulate(t)
	qa, qb := s.connect(t)
	const n, pad = 37, 3 // elements accumulated; untouched elements on each side
	target := RegMR(t, s.p, qb.PD(), (n+2*pad)*16+16, ibv.AccessAll, nil)
	local := RegMR(t, s.p, qa.PD(), (n+2*pad)*16+16, ibv.AccessLocalWrite, nil)
	dstF := func(i int) complex128 { return complex(float64(100+i), float64(i%5)) }
	srcF := func(i int) complex128 { return complex(float64(i%7-3), float64(2-i%3)) }
	id := uint64(0)
	for _, c := range accCases {
		for _, viaSGL := range []bool{false, true} {
			name := c.typ.String() + "/LocalBuf"
			if viaSGL {
				name = c.typ.String() + "/SGL"
			}
			t.Run(name, func(t *testing.T) {
				es := c.typ.Size()
				off := alignedOff(target, 0, 16)
				tb := target.Buf()[off : off+(n+2*pad)*es]
				all := func(i int) complex128 { return dstF(i - pad) }
				copy(tb, accEncode(c.typ, n+2*pad, all))
				src := accEncode(c.typ, n, srcF)
				exp := accExpect(c.typ, dstF, srcF, c.scale)
				want := accEncode(c.typ, n+2*pad, func(i int) complex128 {
					if i < pad || i >= pad+n {
						return all(i)
					}
					return exp(i - pad)
				})
				id++
				wr := &ibv.SendWR{ID: id, Opcode: ibv.OpAccumulate, Flags: ibv.SendSignaled, AccType: c.typ, Scale: c.scale,
					RemoteAddr: target.Addr + uint64(off+pad*es), RKey: target.RKey}
				if viaSGL {
					// Two SGEs split inside an element.
					cut := (n/2)*es + es/2
					copy(local.Buf()[0:], src[:cut])
					copy(local.Buf()[cut+16:], src[cut:])
					wr.SGL = []ibv.SGE{local.SGE(0, cut), local.SGE(cut+16, len(src)-cut)}
				} else {
					wr.LocalBuf = src
				}
				require.NoError(t, qa.PostSend(wr))
				wc := WaitOK(t, qa.SendCQ(), id)
				assert.Equal(t, ibv.WCAtomicExt, wc.Opcode)
				SameBytes(t, "target after accumulate "+c.typ.String(), want, tb)
			})
		}
	}
}

// testConcurrentAccumulate: accumulates from two origins on two QPs (two devices) to the same
// elements are each applied exactly once and atomically per element.
func (s *suite) testConcurrentAccumulate(t *testing.T) {
	s.needAccumulate(t)
	s.needRC(t)
	tgt := s.p.Open(t)
	pd, err := tgt.AllocPD()
	require.NoError(t, err)
	const n, k = 64, 200 // elements, accumulates per origin per type
	target := RegMR(t, s.p, pd, 2*n*8+8, ibv.AccessAll, nil)
	off := alignedOff(target, 0, 8)
	var qps []*ibv.QP
	for o := 0; o < 2; o++ {
		qa, _ := ConnectRCWith(t, s.p.Open(t), tgt, RCOptions{Port: s.port, PDB: pd})
		qps = append(qps, qa)
	}
	ones := accEncode(ibv.AccInt64, n, func(int) complex128 { return 1 })
	halves := accEncode(ibv.AccFloat64, n, func(int) complex128 { return 0.25 })
	var wg sync.WaitGroup
	errs := make([]error, len(qps))
	for o, qp := range qps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < k; i++ {
				err := qp.PostSend(&ibv.SendWR{ID: uint64(2 * i), Opcode: ibv.OpAccumulate, Flags: ibv.SendSignaled,
					AccType: ibv.AccInt64, Scale: complex(float64(o+1), 0), LocalBuf: ones,
					RemoteAddr: target.Addr + uint64(off), RKey: target.RKey})
				if err == nil {
					err = qp.PostSend(&ibv.SendWR{ID: uint64(2*i + 1), Opcode: ibv.OpAccumulate, Flags: ibv.SendSignaled,
						AccType: ibv.AccFloat64, Scale: 4, LocalBuf: halves,
						RemoteAddr: target.Addr + uint64(off+n*8), RKey: target.RKey})
				}
				if err == nil && i%16 == 15 {
					// Keep the send queue short: reap what is done.
					for j := 0; j < 32 && err == nil; j++ {
						var wc ibv.WC
						wc, err = NextWC(qp.SendCQ())
						if err == nil && wc.Status != ibv.WCSuccess {
							err = fmt.Errorf("accumulate WR %d: %v", wc.WRID, wc.Status)
						}
					}
				}
				if err != nil {
					errs[o] = err
					return
				}
			}
			for j := 0; j < 2*k-2*16*(k/16); j++ {
				wc, err := NextWC(qp.SendCQ())
				if err == nil && wc.Status != ibv.WCSuccess {
					err = fmt.Errorf("accumulate WR %d: %v", wc.WRID, wc.Status)
				}
				if err != nil {
					errs[o] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for o, err := range errs {
		require.NoError(t, err, "origin %d", o)
	}
	tb := target.Buf()[off:]
	for i := 0; i < n; i++ {
		assert.Equal(t, uint64(3*k), le64(tb[i*8:]), "int64 element %d: 1·k + 2·k", i)
		assert.Equal(t, float64(2*k), math.Float64frombits(le64(tb[(n+i)*8:])), "float64 element %d: 2·(4·0.25)·k", i)
	}
}
