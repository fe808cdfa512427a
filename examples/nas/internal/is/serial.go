package is

import (
	"fmt"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Result is the outcome of an IS run.
type Result struct {
	Params   Params
	Seconds  float64 // the MaxIterations timed rankings
	Passed   int     // verification checks passed (Passes when all did)
	Verified bool
	Failures []string // one line per failed check
}

// Mops returns the result's Mop/s by NPB's count.
func (r Result) Mops() float64 { return r.Params.Mops(r.Seconds) }

// Report returns the NPB report block for the result.
func (r Result) Report(ranks int) npb.Report {
	return npb.Report{
		Name: "IS", Class: r.Params.Class, Size: fmt.Sprint(r.Params.NumKeys()),
		Iterations: MaxIterations, Ranks: ranks, Seconds: r.Seconds, Mops: r.Mops(),
		OpType: "keys ranked", Verified: r.Verified,
	}
}

// serial is the serial reference's working set (is.c, one thread; with or without USE_BUCKETS).
type serial struct {
	p          Params
	buckets    bool    // rank through a bucket sort (USE_BUCKETS) or count key values directly
	keys       []int32 // key_array
	buff1      []int32 // key_buff1: population, then ranks, per key value
	buff2      []int32 // key_buff2: keys in bucket order
	bucketSize []int32
	bucketPtrs []int32
	passed     int
	failures   []string
}

// Count returns the population of each bucket (key >> shift) of keys into counts (cleared first).
// Keys are in [0, MaxKey): the shift is of the key's bits as unsigned, by a count masked to the
// width, so the loop is a load, a shift and an increment (a signed shift by a variable count
// checks the count on every key).
func Count(keys []int32, shift int, counts []int32) {
	clear(counts)
	sh := uint(shift) & 31
	for _, k := range keys {
		counts[uint32(k)>>sh]++
	}
}

func (s *serial) rank(iteration int) {
	p := s.p
	shift := p.Shift()
	nbk := int32(1) << shift
	idx, val := p.Modify(iteration)
	s.keys[idx[0]], s.keys[idx[1]] = val[0], val[1]

	var pv [TestArraySize]int32
	for i := range pv {
		pv[i] = s.keys[p.TestIndex[i]]
	}

	if !s.buckets {
		// without buckets: count every key value, then prefix-sum over all values
		buff1 := s.buff1
		clear(buff1)
		for _, k := range s.keys {
			buff1[k]++
		}
		for k := 1; k < len(buff1); k++ {
			buff1[k] += buff1[k-1]
		}
		s.partialVerify(iteration, pv)
		return
	}

	Count(s.keys, shift, s.bucketSize)
	ptr := s.bucketPtrs
	ptr[0] = 0
	for i := 1; i < len(ptr); i++ {
		ptr[i] = ptr[i-1] + s.bucketSize[i-1]
	}
	buff2 := s.buff2
	for _, k := range s.keys {
		b := k >> shift
		buff2[ptr[b]] = k
		ptr[b]++
	}
	// ptr[b] now is the end of bucket b
	buff1 := s.buff1
	for b := range ptr {
		k1 := int32(b) * nbk
		k2 := k1 + nbk
		seg := buff1[k1:k2]
		clear(seg)
		m := int32(0)
		if b > 0 {
			m = ptr[b-1]
		}
		for _, k := range buff2[m:ptr[b]] {
			buff1[k]++
		}
		seg[0] += m
		for k := 1; k < len(seg); k++ {
			seg[k] += seg[k-1]
		}
	}
	s.partialVerify(iteration, pv)
}

// partialVerify checks the ranks of the test keys (values pv) against the class table.
func (s *serial) partialVerify(iteration int, pv [TestArraySize]int32) {
	p, buff1 := s.p, s.buff1
	for i, k := range pv {
		if 0 < k && int(k) <= p.NumKeys()-1 {
			if got, want := int64(buff1[k-1]), p.ExpectedRank(i, iteration); got == want {
				s.passed++
			} else {
				s.failures = append(s.failures, fmt.Sprintf(
					"Failed partial verification: iteration %d, test key %d (rank %d, want %d)",
					iteration, i, got, want))
			}
		}
	}
}

// OutOfOrder returns how many adjacent pairs of keys are in decreasing order.
func OutOfOrder(keys []int32) int {
	n := 0
	for i := 1; i < len(keys); i++ {
		if keys[i-1] > keys[i] {
			n++
		}
	}
	return n
}

// fullVerify sorts the keys with the ranks of the last iteration and counts keys out of order.
func (s *serial) fullVerify() {
	if s.buckets {
		m := int32(0)
		for _, end := range s.bucketPtrs {
			for _, k := range s.buff2[m:end] {
				s.buff1[k]--
				s.keys[s.buff1[k]] = k
			}
			m = end
		}
	} else {
		copy(s.buff2, s.keys)
		for _, k := range s.buff2 {
			s.buff1[k]--
			s.keys[s.buff1[k]] = k
		}
	}
	if n := OutOfOrder(s.keys); n != 0 {
		s.failures = append(s.failures, fmt.Sprintf("Full_verify: number of keys out of sort: %d", n))
	} else {
		s.passed++
	}
}

// Serial runs the serial reference IS of class p: create_seq, one untimed rank(1), then
// MaxIterations timed rankings with partial verification, then the full verification. It ranks
// by counting key values directly (is.c without USE_BUCKETS), which is the faster variant on
// this kind of machine; SerialBuckets is the bucket-sort variant.
// Errors: ErrParams (see Params.Validate).
func Serial(p Params) (Result, error) { return serialRun(p, false) }

// SerialBuckets is Serial with is.c's default USE_BUCKETS ranking: keys are first bucket-sorted
// by their high bits, then counted bucket by bucket.
func SerialBuckets(p Params) (Result, error) { return serialRun(p, true) }

func serialRun(p Params, buckets bool) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	s := &serial{
		p:          p,
		buckets:    buckets,
		keys:       make([]int32, p.NumKeys()),
		buff1:      make([]int32, p.MaxKey()),
		buff2:      make([]int32, p.NumKeys()),
		bucketSize: make([]int32, p.NumBuckets()),
		bucketPtrs: make([]int32, p.NumBuckets()),
	}
	p.GenerateKeys(0, s.keys)
	s.rank(1)
	s.passed = 0
	s.failures = nil
	var t npb.Timer
	t.Start()
	for it := 1; it <= MaxIterations; it++ {
		s.rank(it)
	}
	t.Stop()
	s.fullVerify()
	return Result{Params: p, Seconds: t.Seconds(), Passed: s.passed, Verified: s.passed == Passes,
		Failures: s.failures}, nil
}
