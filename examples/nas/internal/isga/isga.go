// Package isga is the NPB IS kernel on goarmci's Global Arrays layer.
//
// Data: the key sequence is a 1-D global array of NumKeys int32, block-distributed; each rank
// generates its block directly (the generator jumps ahead, as NPB's find_my_seed does). A second
// global array holds the keys in global bucket order, and a 1-D global array of Size·NumBuckets
// int32 holds every rank's bucket counts (row r = rank r).
//
// One ranking (NPB's rank()):
//  1. rank 0 Puts the two modified keys (key[it] = it, key[it+10] = MaxKey − it); GA_Sync.
//  2. every rank Gets the five test keys of the partial verification.
//  3. each rank counts its keys per bucket and Puts its counts row; GA_Sync; Gets all counts and
//     forms the prefix sums: the global start of each bucket and, inside it, this rank's offset
//     (the counts of lower ranks).
//  4. each rank orders its keys by bucket locally and Puts each bucket's run into the bucket-ordered
//     array at that offset; GA_Sync.
//  5. buckets are assigned to ranks by where they start in the bucket-ordered array (so the keys
//     a rank ranks are mostly its own block); each rank Gets its buckets' keys, counts each key
//     value and prefix-sums: the rank of value v is the number of keys ≤ v, as key_buff1 in NPB.
//  6. the rank that owns a test key's value checks its rank against the class table.
//
// After the last iteration the full verification places every key at its rank (each rank Puts
// its contiguous sorted run into the key array), then each rank checks its block and the element
// before it; the counts of keys out of order are summed with GA_Igop.
//
// Source: NPB 3.x IS (is.c: create_seq, rank, full_verify; the MPI version's bucket
// redistribution); GA's NGA_Create/NGA_Put/NGA_Get/NGA_Access/GA_Sync/GA_Igop.
package isga

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/goarmci/goarmci/examples/nas/internal/is"
	"github.com/goarmci/goarmci/examples/nas/internal/npb"
	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// sorter is one rank's part of the distributed IS.
type sorter struct {
	rt    *rma.Runtime
	p     is.Params
	rank  int
	size  int
	nb    int // buckets
	shift int
	nbk   int // key values per bucket

	keys   *globalarray.Array[int32] // key_array
	sorted *globalarray.Array[int32] // key_buff2: keys in global bucket order
	counts *globalarray.Array[int32] // Size × NumBuckets bucket counts, row per rank

	myKeys   []int32 // local block of keys (NGA_Access, released at the end)
	accessed bool
	keyLo    int     // global index of myKeys[0]
	blockLo  []int   // first index of each rank's block of sorted (ranks owning nothing: -1)
	local    []int32 // my keys in bucket order
	cnt      []int32 // my bucket counts
	all      []int32 // every rank's counts
	start    []int   // global start of each bucket in sorted, NumBuckets+1 entries
	offset   []int   // my offset inside each bucket
	lstart   []int   // start of each bucket in local
	cursor   []int   // fill cursor per bucket
	b1, b2   int     // my buckets for ranking: [b1, b2)
	mine     []int32 // keys of my buckets (Get from sorted)
	buff1    []int32 // key_buff1 for values [b1·nbk, b2·nbk)
	passed   int
	failures []string
}

// Run runs IS of class p on every rank of rt (collective) and returns the result, the same on
// every rank (Failures lists only this rank's failed checks). If log is not nil, progress lines
// are written to it (pass it on one rank only).
func Run(ctx context.Context, rt *rma.Runtime, p is.Params, log io.Writer) (res is.Result, err error) {
	s := &sorter{rt: rt, p: p, rank: rt.Rank(), size: rt.Size(), nb: p.NumBuckets(), shift: p.Shift()}
	s.nbk = 1 << s.shift
	defer func() {
		if s.accessed {
			s.keys.Release()
		}
		for _, a := range []*globalarray.Array[int32]{s.keys, s.sorted, s.counts} {
			if a != nil {
				if derr := a.Destroy(ctx); derr != nil && err == nil {
					err = fmt.Errorf("isga: destroy: %w", derr)
				}
			}
		}
	}()
	if err := s.setup(ctx); err != nil {
		return is.Result{}, err
	}
	if err := s.rankKeys(ctx, 1); err != nil { // untimed
		return is.Result{}, err
	}
	s.passed, s.failures = 0, nil
	if err := s.sync(ctx); err != nil {
		return is.Result{}, err
	}
	var t npb.Timer
	t.Start()
	for it := 1; it <= is.MaxIterations; it++ {
		if log != nil && p.Class != npb.ClassS {
			fmt.Fprintf(log, "        %d\n", it)
		}
		if err := s.rankKeys(ctx, it); err != nil {
			return is.Result{}, err
		}
	}
	if err := s.sync(ctx); err != nil {
		return is.Result{}, err
	}
	t.Stop()
	if err := s.fullVerify(ctx); err != nil {
		return is.Result{}, err
	}
	secs := []float64{t.Seconds()}
	if err := globalarray.GopMax(ctx, rt, secs); err != nil {
		return is.Result{}, fmt.Errorf("isga: time max: %w", err)
	}
	passed := []int64{int64(s.passed)}
	if err := globalarray.GopSum(ctx, rt, passed); err != nil {
		return is.Result{}, fmt.Errorf("isga: igop: %w", err)
	}
	return is.Result{Params: p, Seconds: secs[0], Passed: int(passed[0]),
		Verified: passed[0] == is.Passes, Failures: s.failures}, nil
}

func (s *sorter) sync(ctx context.Context) error {
	if err := globalarray.Sync(ctx, s.rt); err != nil {
		return fmt.Errorf("isga: sync: %w", err)
	}
	return nil
}

func (s *sorter) setup(ctx context.Context) error {
	n := s.p.NumKeys()
	var err error
	if s.keys, err = globalarray.Create[int32](ctx, s.rt, "is.keys", []int{n}); err != nil {
		return fmt.Errorf("isga: create keys: %w", err)
	}
	if s.sorted, err = globalarray.Create[int32](ctx, s.rt, "is.sorted", []int{n}); err != nil {
		return fmt.Errorf("isga: create sorted: %w", err)
	}
	if s.counts, err = globalarray.Create[int32](ctx, s.rt, "is.counts", []int{s.size * s.nb}); err != nil {
		return fmt.Errorf("isga: create counts: %w", err)
	}
	lo, hi := s.keys.Distribution(s.rank)
	if hi[0] >= lo[0] {
		data, _, err := s.keys.Access()
		if err != nil {
			return fmt.Errorf("isga: access keys: %w", err)
		}
		s.myKeys = data[:hi[0]-lo[0]+1]
		s.keyLo = lo[0]
		s.accessed = true
	}
	s.p.GenerateKeys(s.keyLo, s.myKeys)
	s.blockLo = make([]int, s.size)
	for r := range s.blockLo {
		l, h := s.sorted.Distribution(r)
		s.blockLo[r] = -1
		if h[0] >= l[0] {
			s.blockLo[r] = l[0]
		}
	}
	s.local = make([]int32, len(s.myKeys))
	s.cnt = make([]int32, s.nb)
	s.all = make([]int32, s.size*s.nb)
	s.start = make([]int, s.nb+1)
	s.offset = make([]int, s.nb)
	s.lstart = make([]int, s.nb+1)
	s.cursor = make([]int, s.nb)
	return s.sync(ctx)
}

// ownerOf returns the rank whose block of sorted holds position pos (pos = NumKeys: the last
// owner).
func (s *sorter) ownerOf(pos int) int {
	owner := 0
	for r, lo := range s.blockLo {
		if lo >= 0 && lo <= pos {
			owner = r
		}
	}
	return owner
}

// rankKeys is one iteration of NPB's rank().
func (s *sorter) rankKeys(ctx context.Context, iteration int) error {
	p := s.p
	// 1. the per-iteration modification of two keys
	if s.rank == 0 {
		idx, val := p.Modify(iteration)
		for i := range idx {
			if err := s.keys.Put(ctx, []int{idx[i]}, []int{idx[i]}, val[i:i+1], nil); err != nil {
				return fmt.Errorf("isga: put modified key: %w", err)
			}
		}
	}
	if err := s.sync(ctx); err != nil {
		return err
	}
	// 2. the partial verification keys
	var pv [is.TestArraySize]int32
	for i, ix := range p.TestIndex {
		if err := s.keys.Get(ctx, []int{int(ix)}, []int{int(ix)}, pv[i:i+1], nil); err != nil {
			return fmt.Errorf("isga: get test key: %w", err)
		}
	}
	// 3. bucket counts, exchanged through the counts array
	is.Count(s.myKeys, s.shift, s.cnt)
	row := s.rank * s.nb
	if err := s.counts.Put(ctx, []int{row}, []int{row + s.nb - 1}, s.cnt, nil); err != nil {
		return fmt.Errorf("isga: put counts: %w", err)
	}
	if err := s.sync(ctx); err != nil {
		return err
	}
	if err := s.counts.Get(ctx, []int{0}, []int{len(s.all) - 1}, s.all, nil); err != nil {
		return fmt.Errorf("isga: get counts: %w", err)
	}
	pos := 0
	for b := 0; b < s.nb; b++ {
		s.start[b] = pos
		for r := 0; r < s.size; r++ {
			if r == s.rank {
				s.offset[b] = pos - s.start[b]
			}
			pos += int(s.all[r*s.nb+b])
		}
	}
	s.start[s.nb] = pos
	// 4. local bucket order, then one Put per non-empty bucket into the bucket-ordered array
	l := 0
	for b := 0; b < s.nb; b++ {
		s.lstart[b] = l
		l += int(s.cnt[b])
	}
	s.lstart[s.nb] = l
	cur := s.cursor
	copy(cur, s.lstart[:s.nb])
	for _, k := range s.myKeys {
		b := k >> s.shift
		s.local[cur[b]] = k
		cur[b]++
	}
	for b := 0; b < s.nb; b++ {
		c := int(s.cnt[b])
		if c == 0 {
			continue
		}
		at := s.start[b] + s.offset[b]
		if err := s.sorted.Put(ctx, []int{at}, []int{at + c - 1}, s.local[s.lstart[b]:s.lstart[b]+c], nil); err != nil {
			return fmt.Errorf("isga: put bucket %d: %w", b, err)
		}
	}
	if err := s.sync(ctx); err != nil {
		return err
	}
	// 5. rank the keys of my buckets
	s.b1, s.b2 = s.nb, s.nb
	for b := 0; b < s.nb; b++ {
		if s.ownerOf(s.start[b]) == s.rank {
			if s.b1 == s.nb {
				s.b1 = b
			}
			s.b2 = b + 1
		}
	}
	if s.b1 > s.b2 {
		s.b1 = s.b2
	}
	klo, khi := s.start[s.b1], s.start[s.b2]
	s.mine = slices.Grow(s.mine[:0], khi-klo)[:khi-klo]
	if khi > klo {
		if err := s.sorted.Get(ctx, []int{klo}, []int{khi - 1}, s.mine, nil); err != nil {
			return fmt.Errorf("isga: get my buckets: %w", err)
		}
	}
	v1, v2 := s.b1*s.nbk, s.b2*s.nbk
	s.buff1 = slices.Grow(s.buff1[:0], v2-v1)[:v2-v1]
	clear(s.buff1)
	for _, k := range s.mine {
		s.buff1[int(k)-v1]++
	}
	acc := int32(klo)
	for i, c := range s.buff1 {
		acc += c
		s.buff1[i] = acc
	}
	// 6. partial verification of the test keys whose value k-1 falls in my range
	for i, k := range pv {
		if 0 < k && int(k) <= p.NumKeys()-1 && int(k-1) >= v1 && int(k-1) < v2 {
			if got, want := int64(s.buff1[int(k-1)-v1]), p.ExpectedRank(i, iteration); got == want {
				s.passed++
			} else {
				s.failures = append(s.failures, fmt.Sprintf(
					"Failed partial verification: iteration %d, test key %d (rank %d, want %d)",
					iteration, i, got, want))
			}
		}
	}
	return nil
}

// fullVerify sorts the keys with the last ranks (each rank Puts its sorted run into the key
// array) and counts keys out of order across the whole array.
func (s *sorter) fullVerify(ctx context.Context) error {
	klo, khi := s.start[s.b1], s.start[s.b2]
	v1 := s.b1 * s.nbk
	out := make([]int32, khi-klo)
	for _, k := range s.mine {
		r := &s.buff1[int(k)-v1]
		*r--
		out[int(*r)-klo] = k
	}
	if khi > klo {
		if err := s.keys.Put(ctx, []int{klo}, []int{khi - 1}, out, nil); err != nil {
			return fmt.Errorf("isga: put sorted run: %w", err)
		}
	}
	if err := s.sync(ctx); err != nil {
		return err
	}
	bad := is.OutOfOrder(s.myKeys)
	if len(s.myKeys) > 0 && s.keyLo > 0 {
		var prev [1]int32
		if err := s.keys.Get(ctx, []int{s.keyLo - 1}, []int{s.keyLo - 1}, prev[:], nil); err != nil {
			return fmt.Errorf("isga: get boundary key: %w", err)
		}
		if prev[0] > s.myKeys[0] {
			bad++
		}
	}
	total := []int64{int64(bad)}
	if err := globalarray.GopSum(ctx, s.rt, total); err != nil {
		return fmt.Errorf("isga: igop: %w", err)
	}
	if total[0] != 0 {
		s.failures = append(s.failures, fmt.Sprintf("Full_verify: number of keys out of sort: %d", total[0]))
	} else if s.rank == 0 {
		s.passed++
	}
	return nil
}
