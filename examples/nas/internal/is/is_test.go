package is

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

func TestParams(t *testing.T) {
	p, err := ParamsFor(npb.ClassA)
	require.NoError(t, err)
	assert.Equal(t, 1<<23, p.NumKeys())
	assert.Equal(t, 1<<19, p.MaxKey())
	assert.Equal(t, 1024, p.NumBuckets())
	s, _ := ParamsFor(npb.ClassS)
	assert.Equal(t, 512, s.NumBuckets())
	_, err = ParamsFor('Q')
	assert.ErrorIs(t, err, npb.ErrClass)
}

func TestGenerateKeysBlocks(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	all := make([]int32, p.NumKeys())
	p.GenerateKeys(0, all)
	for _, k := range all {
		require.True(t, k >= 0 && int(k) < p.MaxKey())
	}
	for _, lo := range []int{1, 7, 1000, p.NumKeys() - 3} {
		blk := make([]int32, min(100, p.NumKeys()-lo))
		p.GenerateKeys(lo, blk)
		assert.Equal(t, all[lo:lo+len(blk)], blk, "block at %d", lo)
	}
	// the reference generator, step by step in double precision
	x := float64(npb.Seed)
	k := float64(p.MaxKey() / 4)
	for i := 0; i < 1000; i++ {
		r := npb.Randlc(&x, float64(npb.Mult))
		r += npb.Randlc(&x, float64(npb.Mult))
		r += npb.Randlc(&x, float64(npb.Mult))
		r += npb.Randlc(&x, float64(npb.Mult))
		require.Equal(t, int32(k*r), all[i], "key %d", i)
	}
}

var variants = map[string]func(Params) (Result, error){"counts": Serial, "buckets": SerialBuckets}

func TestSerialClassS(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	for name, run := range variants {
		res, err := run(p)
		require.NoError(t, err)
		assert.Empty(t, res.Failures, name)
		assert.Equal(t, Passes, res.Passed, name)
		assert.True(t, res.Verified, name)
	}
}

func TestSerialClassW(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("class W in -short mode or under the race detector")
	}
	p, _ := ParamsFor(npb.ClassW)
	for name, run := range variants {
		res, err := run(p)
		require.NoError(t, err)
		assert.Empty(t, res.Failures, name)
		assert.True(t, res.Verified, name)
	}
}

// With a wrong expected rank table the partial verification must fail.
func TestSerialDetectsWrongRanks(t *testing.T) {
	p, _ := ParamsFor(npb.ClassS)
	p.TestRank[2]++
	for name, run := range variants {
		res, err := run(p)
		require.NoError(t, err)
		assert.False(t, res.Verified, name)
		assert.Equal(t, Passes-MaxIterations, res.Passed, name)
		assert.Len(t, res.Failures, MaxIterations, name)
	}
}

func TestOutOfOrder(t *testing.T) {
	assert.Equal(t, 0, OutOfOrder([]int32{1, 1, 2, 5}))
	assert.Equal(t, 2, OutOfOrder([]int32{3, 1, 2, 0}))
	k := []int32{5, 3, 9}
	slices.Sort(k)
	assert.Equal(t, 0, OutOfOrder(k))
}

func BenchmarkSerialClassW(b *testing.B) {
	p, _ := ParamsFor(npb.ClassW)
	for name, run := range variants {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if res, err := run(p); err != nil || !res.Verified {
					b.Fatal("not verified")
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []npb.Class{npb.ClassS, npb.ClassW, npb.ClassA, npb.ClassB} {
		p, _ := ParamsFor(c)
		require.NoError(t, p.Validate(), c)
	}
	p, _ := ParamsFor(npb.ClassS)
	bad := []func(*Params){
		func(p *Params) { p.TotalKeysLog2 = 4 },
		func(p *Params) { p.MaxKeyLog2 = 31 },
		func(p *Params) { p.NumBucketsLog2 = p.MaxKeyLog2 + 1 },
		func(p *Params) { p.TestIndex[4] = int64(p.NumKeys()) },
	}
	for i, f := range bad {
		q := p
		f(&q)
		assert.ErrorIs(t, q.Validate(), ErrParams, "case %d", i)
		_, err := Serial(q)
		assert.ErrorIs(t, err, ErrParams, "case %d", i)
	}
	assert.Equal(t, int64(-1), p.ExpectedRank(TestArraySize, 1))
}
