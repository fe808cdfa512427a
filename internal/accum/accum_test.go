package accum

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

var le = binary.LittleEndian

// put/get element i of type t as a complex128 (integers and reals in the real part).
func put(t Type, b []byte, i int, v complex128) {
	switch t {
	case Int32:
		le.PutUint32(b[4*i:], uint32(int32(real(v))))
	case Int64:
		le.PutUint64(b[8*i:], uint64(int64(real(v))))
	case Float32:
		le.PutUint32(b[4*i:], math.Float32bits(float32(real(v))))
	case Float64:
		le.PutUint64(b[8*i:], math.Float64bits(real(v)))
	case Complex64:
		le.PutUint32(b[8*i:], math.Float32bits(float32(real(v))))
		le.PutUint32(b[8*i+4:], math.Float32bits(float32(imag(v))))
	case Complex128:
		le.PutUint64(b[16*i:], math.Float64bits(real(v)))
		le.PutUint64(b[16*i+8:], math.Float64bits(imag(v)))
	}
}

func get(t Type, b []byte, i int) complex128 {
	switch t {
	case Int32:
		return complex(float64(int32(le.Uint32(b[4*i:]))), 0)
	case Int64:
		return complex(float64(int64(le.Uint64(b[8*i:]))), 0)
	case Float32:
		return complex(float64(math.Float32frombits(le.Uint32(b[4*i:]))), 0)
	case Float64:
		return complex(math.Float64frombits(le.Uint64(b[8*i:])), 0)
	case Complex64:
		return complex(float64(math.Float32frombits(le.Uint32(b[8*i:]))), float64(math.Float32frombits(le.Uint32(b[8*i+4:]))))
	case Complex128:
		return complex(math.Float64frombits(le.Uint64(b[16*i:])), math.Float64frombits(le.Uint64(b[16*i+8:])))
	}
	return 0
}

var allTypes = []Type{Int32, Int64, Float32, Float64, Complex64, Complex128}

// accumulated is what an accumulate of in with scale s leaves in an element holding init, as a
// complex128: integer types scale by the truncated real part, real types by the real part.
func accumulated(ty Type, init, in, s complex128) complex128 {
	switch ty {
	case Int32, Int64:
		return complex(real(init)+float64(int64(real(s)))*real(in), 0)
	case Float32, Float64:
		return complex(real(init)+real(s)*real(in), 0)
	}
	return init + s*in
}

func TestSizesAndNames(t *testing.T) {
	want := map[Type][2]int{Int32: {4, 4}, Int64: {8, 8}, Float32: {4, 4}, Float64: {8, 8}, Complex64: {8, 4}, Complex128: {16, 8}}
	for ty, w := range want {
		require.Equal(t, w[0], ty.Size(), "%v", ty)
		require.Equal(t, w[1], ty.Align(), "%v", ty)
		require.NotContains(t, ty.String(), "Type(")
	}
	require.Equal(t, 0, Type(0).Size())
	require.Equal(t, 0, Type(99).Size())
	require.Equal(t, "Type(99)", Type(99).String())
}

func TestApplyEveryTypeAndScale(t *testing.T) {
	const n = 9
	for _, ty := range allTypes {
		scales := []complex128{1, -2, 3}
		switch ty {
		case Float32, Float64:
			scales = append(scales, 0.5, -0.25)
		case Complex64, Complex128:
			scales = append(scales, 0.5, complex(2, 1), complex(0, -1))
		}
		for _, s := range scales {
			dst, src := aligned(n*ty.Size()), make([]byte, n*ty.Size()+1)[1:] // src deliberately unaligned
			init := make([]complex128, n)
			in := make([]complex128, n)
			for i := 0; i < n; i++ {
				init[i] = complex(float64(10*i-7), 0)
				in[i] = complex(float64(i+1), 0)
				if ty == Complex64 || ty == Complex128 {
					init[i] += complex(0, float64(i))
					in[i] += complex(0, float64(2-i))
				}
				put(ty, dst, i, init[i])
				put(ty, src, i, in[i])
			}
			require.NoError(t, Apply(ty, dst, src, s), "%v scale %v", ty, s)
			for i := 0; i < n; i++ {
				require.Equal(t, accumulated(ty, init[i], in[i], s), get(ty, dst, i), "%v scale %v element %d", ty, s, i)
			}
		}
	}
}

func TestApplyIntegerScaleTruncates(t *testing.T) {
	dst, src := aligned(8), aligned(8)
	put(Int64, src, 0, 10)
	require.NoError(t, Apply(Int64, dst, src, 2.9))
	require.Equal(t, complex128(20), get(Int64, dst, 0), "scale 2.9 → 2")
	put(Int32, src, 0, -3)
	dst32 := aligned(4)
	require.NoError(t, Apply(Int32, dst32, src[:4], complex(-1.5, 7)))
	require.Equal(t, complex128(3), get(Int32, dst32, 0), "real part, truncated toward zero")
}

func TestApplyEmpty(t *testing.T) {
	for _, ty := range allTypes {
		require.NoError(t, Apply(ty, nil, nil, 1))
	}
}

func TestApplyErrorsChangeNothing(t *testing.T) {
	for _, ty := range allTypes {
		es := ty.Size()
		dst := aligned(4*es + 16)
		src := make([]byte, 4*es)
		for i := range src {
			src[i] = 1
		}
		before := append([]byte(nil), dst...)
		// misaligned target
		require.ErrorIs(t, Apply(ty, dst[1:1+4*es], src, 1), ErrShape, "%v misaligned", ty)
		// length not a multiple of the element size
		require.ErrorIs(t, Apply(ty, dst[:es+1], src[:es+1], 1), ErrShape, "%v ragged", ty)
		// length mismatch
		require.ErrorIs(t, Apply(ty, dst[:2*es], src[:es], 1), ErrShape, "%v mismatch", ty)
		require.Equal(t, before, dst, "%v: nothing written", ty)
	}
	// a type whose components are 4-byte aligned accepts 4-byte alignment
	d := aligned(32)
	require.NoError(t, Apply(Complex64, d[4:12], make([]byte, 8), 1))
	require.ErrorIs(t, Apply(Type(0), aligned(8), make([]byte, 8), 1), ErrType)
	require.ErrorIs(t, Apply(Type(42), aligned(8), make([]byte, 8), 1), ErrType)
	require.ErrorIs(t, Check(Type(42), nil, nil), ErrType)
}

// TestApplyConcurrentExact: accumulates from many goroutines into the same elements give the
// exact sum for every type (each element is updated atomically; the values are exactly
// representable, so float order does not matter).
func TestApplyConcurrentExact(t *testing.T) {
	const workers, rounds, n = 8, 500, 16
	for _, ty := range allTypes {
		dst := aligned(n * ty.Size())
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				src := make([]byte, n*ty.Size())
				for i := 0; i < n; i++ {
					put(ty, src, i, complex(float64(i+1), float64(w)))
				}
				for r := 0; r < rounds; r++ {
					if err := Apply(ty, dst, src, 1); err != nil {
						t.Error(err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		for i := 0; i < n; i++ {
			want := complex(float64(workers*rounds*(i+1)), 0)
			if ty == Complex64 || ty == Complex128 {
				want += complex(0, float64(rounds*workers*(workers-1)/2))
			}
			require.Equal(t, want, get(ty, dst, i), "%v element %d", ty, i)
		}
	}
}

func TestRMW64(t *testing.T) {
	b := aligned(16)
	old, err := FetchAdd64(b, 5)
	require.NoError(t, err)
	require.Equal(t, uint64(0), old)
	old, err = FetchAdd64(b, math.MaxUint64) // -1
	require.NoError(t, err)
	require.Equal(t, uint64(5), old)
	v, err := Load64(b)
	require.NoError(t, err)
	require.Equal(t, uint64(4), v)
	old, err = Swap64(b, 77)
	require.NoError(t, err)
	require.Equal(t, uint64(4), old)
	old, err = CmpSwap64(b, 1, 2)
	require.NoError(t, err)
	require.Equal(t, uint64(77), old, "compare fails")
	v, _ = Load64(b)
	require.Equal(t, uint64(77), v, "unchanged")
	old, err = CmpSwap64(b, 77, 1<<63)
	require.NoError(t, err)
	require.Equal(t, uint64(77), old)
	require.NoError(t, Store64(b[8:], 9))
	require.Equal(t, uint64(1<<63), le.Uint64(b))
	require.Equal(t, uint64(9), le.Uint64(b[8:]))
}

func TestRMW32(t *testing.T) {
	b := aligned(8)
	old, err := FetchAdd32(b[4:], 3)
	require.NoError(t, err)
	require.Equal(t, uint32(0), old)
	old, err = Swap32(b[4:], 10)
	require.NoError(t, err)
	require.Equal(t, uint32(3), old)
	old, err = CmpSwap32(b[4:], 9, 1)
	require.NoError(t, err)
	require.Equal(t, uint32(10), old)
	old, err = CmpSwap32(b[4:], 10, 11)
	require.NoError(t, err)
	require.Equal(t, uint32(10), old)
	require.Equal(t, uint32(11), le.Uint32(b[4:]))
	require.Equal(t, uint32(0), le.Uint32(b), "neighbour untouched")
}

func TestRMWMisalignedOrShort(t *testing.T) {
	b := aligned(32)
	before := append([]byte(nil), b...)
	_, err := FetchAdd64(b[4:], 1)
	require.ErrorIs(t, err, ErrShape)
	_, err = FetchAdd64(b[:7], 1)
	require.ErrorIs(t, err, ErrShape)
	_, err = Swap64(b[1:], 1)
	require.ErrorIs(t, err, ErrShape)
	_, err = CmpSwap64(b[2:], 0, 1)
	require.ErrorIs(t, err, ErrShape)
	_, err = Load64(b[3:])
	require.ErrorIs(t, err, ErrShape)
	require.ErrorIs(t, Store64(b[5:], 1), ErrShape)
	_, err = FetchAdd32(b[2:], 1)
	require.ErrorIs(t, err, ErrShape)
	_, err = FetchAdd32(b[:3], 1)
	require.ErrorIs(t, err, ErrShape)
	_, err = Swap32(b[1:], 1)
	require.ErrorIs(t, err, ErrShape)
	_, err = CmpSwap32(b[3:], 0, 1)
	require.ErrorIs(t, err, ErrShape)
	_, err = FetchAdd64(nil, 1)
	require.ErrorIs(t, err, ErrShape)
	require.Equal(t, before, b, "nothing written")
}

func TestRMWConcurrentExact(t *testing.T) {
	const workers, rounds = 8, 5000
	b := aligned(16)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				if _, err := FetchAdd64(b, 2); err != nil {
					t.Error(err)
					return
				}
				if _, err := FetchAdd32(b[8:], 1); err != nil {
					t.Error(err)
					return
				}
				// CAS increment loop on the upper 4 bytes
				for {
					v, err := CmpSwap32(b[12:], 0, 0) // an atomic read (a CAS that changes nothing)
					if err != nil {
						t.Error(err)
						return
					}
					if got, _ := CmpSwap32(b[12:], v, v+1); got == v {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, uint64(2*workers*rounds), le.Uint64(b))
	require.Equal(t, uint32(workers*rounds), le.Uint32(b[8:]))
	require.Equal(t, uint32(workers*rounds), le.Uint32(b[12:]))
}

// ApplyLocked with both buffers aligned takes gonum's vector AXPY for the real and complex128
// types: every element right (the kernels' unrolled bodies and their tails) for every scale, and
// the byte after dst untouched.
func TestApplyLockedVectorPath(t *testing.T) {
	var l Lock
	for _, ty := range allTypes {
		for _, n := range []int{1, 3, 9, 16, 1027} {
			for _, s := range []complex128{1, -2, 0.5, complex(2, 1)} {
				if (ty == Float32 || ty == Float64) && imag(s) != 0 {
					continue
				}
				buf := aligned(n*ty.Size() + 16)
				dst, src := buf[:n*ty.Size()], aligned(n*ty.Size())
				for i := 0; i < len(buf)-len(dst); i++ {
					buf[len(dst)+i] = 0xee
				}
				init, in := make([]complex128, n), make([]complex128, n)
				for i := 0; i < n; i++ {
					init[i] = complex(float64(3*i-5), 0)
					in[i] = complex(float64(i%7+1), 0)
					if ty == Complex64 || ty == Complex128 {
						init[i] += complex(0, float64(i%5))
						in[i] += complex(0, float64(1-i%3))
					}
					put(ty, dst, i, init[i])
					put(ty, src, i, in[i])
				}
				require.NoError(t, ApplyLocked(&l, ty, dst, src, s))
				for i := 0; i < n; i++ {
					require.Equal(t, accumulated(ty, init[i], in[i], s), get(ty, dst, i), "%v n %d scale %v element %d", ty, n, s, i)
				}
				require.Equal(t, byte(0xee), buf[len(dst)], "%v n %d: wrote past dst", ty, n)
			}
		}
	}
}

// A release store is seen whole by loads and by RMW operations on the word, and a misaligned or
// short word is refused without a store.
func TestStoreRelease64(t *testing.T) {
	b := make([]byte, 24)
	w := b[8:16]
	require.NoError(t, StoreRelease64(w, 0x0102030405060708))
	v, err := Load64(w)
	require.NoError(t, err)
	require.Equal(t, uint64(0x0102030405060708), v)
	old, err := RMW(OpFetchAdd64, w, 1, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(0x0102030405060708), old)
	require.NoError(t, StoreRelease64(w, 7))
	old, err = RMW(OpSwap64, w, 9, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(7), old)
	require.ErrorIs(t, StoreRelease64(b[1:9], 1), ErrShape)
	require.ErrorIs(t, StoreRelease64(b[:7], 1), ErrShape)
	require.Equal(t, make([]byte, 8), b[:8], "nothing stored")
}

// Another goroutine polling a word sees the release store and, after it, the bytes written
// before it.
func TestStoreReleaseOrder(t *testing.T) {
	data := make([]uint64, 64)
	flag := make([]byte, 8)
	done := make(chan bool)
	go func() {
		for {
			if v, _ := Load64(flag); v == 1 {
				ok := true
				for i := range data {
					ok = ok && atomic.LoadUint64(&data[i]) == uint64(i+1)
				}
				done <- ok
				return
			}
			runtime.Gosched()
		}
	}()
	for i := range data {
		atomic.StoreUint64(&data[i], uint64(i+1))
	}
	require.NoError(t, StoreRelease64(flag, 1))
	require.True(t, <-done)
}
