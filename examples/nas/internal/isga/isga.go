// Package isga is the NPB IS kernel on goarmci's Global Arrays layer.
//
// Data: the key sequence is a 1-D global array of NumKeys int32, block-distributed; each rank
// generates its block directly (the generator jumps ahead, as NPB's find_my_seed does). A second
// global array of NumKeys int32 receives the redistributed keys, and a 1-D global array of
// Size·NumBuckets int32 holds every rank's bucket counts (row r = rank r).
//
// One ranking (NPB's rank()):
//  1. rank 0 Puts the two modified keys (key[it] = it, key[it+10] = MaxKey − it); GA_Sync.
//  2. every rank Gets the five test keys of the partial verification.
//  3. each rank counts its keys per bucket (the high bits of the key) and Puts its counts row;
//     GA_Sync; every rank Gets all counts. The prefix sums of the bucket totals give where each
//     bucket starts in key order; bucket b is ranked by the rank whose block of the
//     redistribution array holds that start, so each rank ranks a contiguous range of buckets
//     (of key values) whose keys land mostly in its own block.
//  4. each rank sorts its keys by bucket (so by destination rank) and Puts each destination's
//     part, in one NGA_Put, into the destination's range of the redistribution array, after
//     the parts of the lower ranks (the layout of NPB's MPI all-to-all); GA_Sync.
//  5. each rank Gets its range but its own part (which never left its memory), counts each key
//     value and prefix-sums from the range start: the rank of value v is the number of keys ≤ v,
//     as key_buff1 in NPB.
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
	redist *globalarray.Array[int32] // key_buff2: keys grouped by the rank that ranks them
	counts *globalarray.Array[int32] // Size × NumBuckets bucket counts, row per rank

	myKeys   []int32 // local block of keys (NGA_Access, released at the end)
	accessed bool
	keyLo    int   // global index of myKeys[0]
	blockLo  []int // first index of each rank's block of redist (ranks owning nothing: -1)

	cnt   []int32 // my bucket counts
	all   []int32 // every rank's counts
	start []int   // where each bucket starts in key order, NumBuckets+1 entries
	dest  []int32 // the rank that ranks each bucket
	b1    []int   // rank r ranks buckets [b1[r], b1[r+1]); Size+1 entries
	put   []int   // where my part for rank r goes in redist
	part  []int   // start of my part for rank r in local; Size+1 entries
	cur   []int   // fill cursor per bucket
	local []int32 // my keys sorted by bucket (so grouped by destination)

	own      []int32 // the keys I rank from my own part (in local: never Put)
	mine     []int32 // the keys I rank from the other ranks' parts (Get from redist)
	buff1    []int32 // key_buff1 for my values [b1·nbk, b2·nbk)
	passed   int
	failures []string
}

// Run runs IS of class p on every rank of rt (collective) and returns the result, the same on
// every rank (Failures lists only this rank's failed checks). If log is not nil, progress lines
// are written to it (pass it on one rank only). Errors: is.ErrParams (every rank returns it
// before any collective), errors of the GA layer wrapped.
func Run(ctx context.Context, rt *rma.Runtime, p is.Params, log io.Writer) (res is.Result, err error) {
	if err := p.Validate(); err != nil {
		return is.Result{}, err
	}
	s := &sorter{rt: rt, p: p, rank: rt.Rank(), size: rt.Size(), nb: p.NumBuckets(), shift: p.Shift()}
	s.nbk = 1 << s.shift
	defer func() {
		if s.accessed {
			s.keys.Release()
		}
		for _, a := range []*globalarray.Array[int32]{s.keys, s.redist, s.counts} {
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
	if s.redist, err = globalarray.Create[int32](ctx, s.rt, "is.redist", []int{n}); err != nil {
		return fmt.Errorf("isga: create redist: %w", err)
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
		s.accessed = true
		s.myKeys = data[:hi[0]-lo[0]+1]
		s.keyLo = lo[0]
	}
	s.p.GenerateKeys(s.keyLo, s.myKeys)
	s.blockLo = make([]int, s.size)
	for r := range s.blockLo {
		l, h := s.redist.Distribution(r)
		s.blockLo[r] = -1
		if h[0] >= l[0] {
			s.blockLo[r] = l[0]
		}
	}
	s.cnt = make([]int32, s.nb)
	s.all = make([]int32, s.size*s.nb)
	s.start = make([]int, s.nb+1)
	s.dest = make([]int32, s.nb)
	s.b1 = make([]int, s.size+1)
	s.put = make([]int, s.size)
	s.part = make([]int, s.size+1)
	s.cur = make([]int, s.nb)
	s.local = make([]int32, len(s.myKeys))
	return s.sync(ctx)
}

// plan computes, from every rank's bucket counts, where each bucket starts in key order, which
// rank ranks it, and where my part for each rank goes.
func (s *sorter) plan() {
	pos := 0
	for b := 0; b < s.nb; b++ {
		s.start[b] = pos
		for r := 0; r < s.size; r++ {
			pos += int(s.all[r*s.nb+b])
		}
	}
	s.start[s.nb] = pos
	// bucket b goes to the rank whose block holds start[b]; start and the blocks ascend, so each
	// rank gets a contiguous range of buckets
	owner := 0
	for b := 0; b < s.nb; b++ {
		for r := owner + 1; r < s.size; r++ {
			if s.blockLo[r] >= 0 && s.blockLo[r] <= s.start[b] {
				owner = r
			}
		}
		s.dest[b] = int32(owner)
	}
	d := 0
	for b := 0; b <= s.nb; b++ {
		for d < s.size && (b == s.nb || int(s.dest[b]) >= d) {
			s.b1[d] = b
			d++
		}
	}
	s.b1[s.size] = s.nb
	// my part for rank d goes after the parts of ranks below me in d's range
	s.part[0] = 0
	for d := 0; d < s.size; d++ {
		at := s.start[s.b1[d]]
		mine := 0
		for b := s.b1[d]; b < s.b1[d+1]; b++ {
			for r := 0; r < s.rank; r++ {
				at += int(s.all[r*s.nb+b])
			}
			mine += int(s.cnt[b])
		}
		s.put[d] = at
		s.part[d+1] = s.part[d] + mine
	}
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
	s.plan()
	// 4. sort my keys by bucket (NPB's key_buff2), which groups them by destination too (each
	// rank ranks a contiguous range of buckets), one Put per destination. Bucket order also makes
	// step 5's counting walk key_buff1 almost sequentially: counting keys in their original
	// order hits it at random and costs more than the sort (class B at one rank: 2x the time).
	local, cur, shift := s.local, s.cur, s.shift // locals: the stores below cannot alias them
	pos := 0
	for b, c := range s.cnt {
		cur[b] = pos
		pos += int(c)
	}
	for _, k := range s.myKeys {
		b := k >> shift
		local[cur[b]] = k
		cur[b]++
	}
	for d := 0; d < s.size; d++ {
		lo, hi := s.part[d], s.part[d+1]
		if hi == lo || d == s.rank {
			continue // my own part stays in local (step 5 reads it there)
		}
		at := s.put[d]
		if err := s.redist.Put(ctx, []int{at}, []int{at + hi - lo - 1}, local[lo:hi], nil); err != nil {
			return fmt.Errorf("isga: put keys for rank %d: %w", d, err)
		}
	}
	if err := s.sync(ctx); err != nil {
		return err
	}
	// 5. rank the keys of my buckets
	b1, b2 := s.b1[s.rank], s.b1[s.rank+1]
	klo, khi := s.start[b1], s.start[b2]
	// the other ranks' parts: before and after my own part in my range of redist
	s.own = local[s.part[s.rank]:s.part[s.rank+1]]
	at := s.put[s.rank]
	s.mine = slices.Grow(s.mine[:0], khi-klo-len(s.own))[:khi-klo-len(s.own)]
	for _, r := range [2][2]int{{klo, at}, {at + len(s.own), khi}} {
		if r[1] > r[0] {
			o := r[0] - klo // offset in s.mine: after my own part, less its length
			if r[0] > at {
				o -= len(s.own)
			}
			dst := s.mine[o : o+r[1]-r[0]]
			if err := s.redist.Get(ctx, []int{r[0]}, []int{r[1] - 1}, dst, nil); err != nil {
				return fmt.Errorf("isga: get my keys: %w", err)
			}
		}
	}
	v1, v2 := b1*s.nbk, b2*s.nbk
	s.buff1 = slices.Grow(s.buff1[:0], v2-v1)[:v2-v1]
	clear(s.buff1)
	for _, keys := range [2][]int32{s.own, s.mine} {
		for _, k := range keys {
			s.buff1[int(k)-v1]++
		}
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
	b1, b2 := s.b1[s.rank], s.b1[s.rank+1]
	klo, khi := s.start[b1], s.start[b2]
	v1 := b1 * s.nbk
	out := make([]int32, khi-klo)
	for _, keys := range [2][]int32{s.own, s.mine} {
		for _, k := range keys {
			r := &s.buff1[int(k)-v1]
			*r--
			out[int(*r)-klo] = k
		}
	}
	// (Run synchronized after the last iteration: no rank still reads the keys)
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
