// Package is is the NPB IS kernel (integer sort: bucket sort and ranking of uniformly
// distributed-ish integer keys): class parameters, key generation (create_seq), the partial and
// full verification rules, and the serial reference run.
//
// Source: NPB 3.x IS (is.c: create_seq, find_my_seed, rank, full_verify) and the specification in
// NAS report RNR-94-007 §2.6 (kernel IS).
package is

import (
	"errors"
	"fmt"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

const (
	// MaxIterations is the number of timed ranking iterations.
	MaxIterations = 10
	// TestArraySize is the number of keys checked by the partial verification per iteration.
	TestArraySize = 5
	// Passes is the verification count of a successful run: TestArraySize checks in each of the
	// MaxIterations iterations plus the full verification.
	Passes = TestArraySize*MaxIterations + 1
)

// Params are the class parameters of IS.
type Params struct {
	Class          npb.Class
	TotalKeysLog2  int
	MaxKeyLog2     int
	NumBucketsLog2 int
	// TestIndex are the key indices whose ranks the partial verification checks, TestRank their
	// ranks in iteration 0 (shifted per class and iteration, see ExpectedRank).
	TestIndex [TestArraySize]int64
	TestRank  [TestArraySize]int64
}

var classes = map[npb.Class]Params{
	npb.ClassS: {npb.ClassS, 16, 11, 9,
		[5]int64{48427, 17148, 23627, 62548, 4431}, [5]int64{0, 18, 346, 64917, 65463}},
	npb.ClassW: {npb.ClassW, 20, 16, 10,
		[5]int64{357773, 934767, 875723, 898999, 404505}, [5]int64{1249, 11698, 1039987, 1043896, 1048018}},
	npb.ClassA: {npb.ClassA, 23, 19, 10,
		[5]int64{2112377, 662041, 5336171, 3642833, 4250760}, [5]int64{104, 17523, 123928, 8288932, 8388264}},
	npb.ClassB: {npb.ClassB, 25, 21, 10,
		[5]int64{41869, 812306, 5102857, 18232239, 26860214}, [5]int64{33422937, 10244, 59149, 33135281, 99}},
}

// ParamsFor returns the parameters of class c, or npb.ErrClass.
func ParamsFor(c npb.Class) (Params, error) {
	p, ok := classes[c]
	if !ok {
		return Params{}, fmt.Errorf("is class %s: %w", c, npb.ErrClass)
	}
	return p, nil
}

// ErrParams is returned for class parameters the kernel cannot run with.
var ErrParams = errors.New("is: bad parameters")

// Validate checks that the parameters describe a runnable problem: at least 2·MaxIterations+1
// keys (the per-iteration modification writes keys up to index 2·MaxIterations) and key values
// above MaxIterations, at most 2^30 keys and key values, buckets no finer than key values, test
// indices inside the key array.
func (p Params) Validate() error {
	switch {
	case p.TotalKeysLog2 < 5 || p.TotalKeysLog2 > 30:
		return fmt.Errorf("%w: 2^%d keys", ErrParams, p.TotalKeysLog2)
	case p.MaxKeyLog2 < 4 || p.MaxKeyLog2 > 30: // key MaxKey − iteration must stay ≥ 0
		return fmt.Errorf("%w: max key 2^%d", ErrParams, p.MaxKeyLog2)
	case p.NumBucketsLog2 < 0 || p.NumBucketsLog2 > p.MaxKeyLog2:
		return fmt.Errorf("%w: 2^%d buckets for max key 2^%d", ErrParams, p.NumBucketsLog2, p.MaxKeyLog2)
	}
	for _, ix := range p.TestIndex {
		if ix < 0 || ix >= int64(p.NumKeys()) {
			return fmt.Errorf("%w: test index %d outside %d keys", ErrParams, ix, p.NumKeys())
		}
	}
	return nil
}

// NumKeys is the number of keys (TOTAL_KEYS).
func (p Params) NumKeys() int { return 1 << p.TotalKeysLog2 }

// MaxKey bounds the key values: 0 ≤ key < MaxKey.
func (p Params) MaxKey() int { return 1 << p.MaxKeyLog2 }

// NumBuckets is the number of buckets of the bucket sort.
func (p Params) NumBuckets() int { return 1 << p.NumBucketsLog2 }

// Shift is the bucket of key k: k >> Shift.
func (p Params) Shift() int { return p.MaxKeyLog2 - p.NumBucketsLog2 }

// Mops returns NPB's Mop/s for IS: MaxIterations·NumKeys keys ranked per second, in millions.
func (p Params) Mops(seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return 1e-6 * float64(p.NumKeys()) * MaxIterations / seconds
}

// ExpectedRank returns the rank test key i must have in the given iteration (1-based): the
// class's test_rank_array value shifted as NPB's rank() shifts it (the keys modified in each
// iteration move some ranks up and others down).
// It returns -1 for i outside [0, TestArraySize).
func (p Params) ExpectedRank(i, iteration int) int64 {
	if i < 0 || i >= TestArraySize {
		return -1
	}
	r, it := p.TestRank[i], int64(iteration)
	switch p.Class {
	case npb.ClassS:
		if i <= 2 {
			return r + it
		}
		return r - it
	case npb.ClassW:
		if i < 2 {
			return r + it - 2
		}
		return r - it
	case npb.ClassA:
		if i <= 2 {
			return r + it - 1
		}
		return r - (it - 1)
	case npb.ClassB:
		if i == 1 || i == 2 || i == 4 {
			return r + it
		}
		return r - it
	}
	return -1
}

// Modify applies the per-iteration change of the key sequence: key[iteration] = iteration and
// key[iteration+MaxIterations] = MaxKey − iteration. It returns the two (global index, value)
// pairs so a distributed version can apply them where the keys live.
func (p Params) Modify(iteration int) (idx [2]int, val [2]int32) {
	return [2]int{iteration, iteration + MaxIterations},
		[2]int32{int32(iteration), int32(p.MaxKey() - iteration)}
}

// GenerateKeys writes keys [lo, lo+len(keys)) of the global key sequence (create_seq): key i is
// ⌊(MaxKey/4)·(r_{4i+1} + r_{4i+2} + r_{4i+3} + r_{4i+4})⌋ with r the NPB generator from seed
// 314159265, multiplier 5^13. Any block can be generated independently (find_my_seed's jump).
func (p Params) GenerateKeys(lo int, keys []int32) {
	rng := npb.NewRand(npb.Seed, npb.Mult)
	rng.Skip(4 * uint64(lo))
	k := float64(p.MaxKey() / 4)
	for i := range keys {
		x := rng.Next()
		x += rng.Next()
		x += rng.Next()
		x += rng.Next()
		keys[i] = int32(k * x)
	}
}
