// Package isga is the NPB IS kernel on goarmci's Global Arrays layer.
//
// Data: the key sequence is a 1-D global array of NumKeys int32, block-distributed; each rank
// generates its block directly (the generator jumps ahead, as NPB's find_my_seed does). A second
// global array receives the redistributed keys: one block per rank, of the rank's share of the
// keys plus the largest bucket (a rank's range of buckets never holds more; NPB's MPI version
// sizes its key_buff2 likewise with a margin). Every rank's bucket counts and the test keys it
// holds (a row of NumBuckets+5 int32) reach every rank by an all-gather.
//
// Every exchange pushes data into the memory of the rank that reads it, as NPB-MPI's
// collectives: the all-gather of the rows (globalarray.AllGather, NPB's MPI_Allreduce and
// MPI_Alltoall of the counts in one) and the redistribution's Puts followed by GA_Sync (NPB's
// MPI_Alltoallv). No rank ever Gets from a rank that may be computing (over a network, a Get
// from a rank busy outside the runtime waits for its next call).
//
// One ranking (NPB's rank()):
//  1. rank 0 changes the two modified keys (key[it] = it, key[it+10] = MaxKey − it) in its
//     block; a job whose rank 0 does not hold them all Puts them, then GA_Syncs.
//  2. each rank counts its keys per bucket (the high bits of the key), reads the test keys of
//     the partial verification that lie in its block, and all-gathers that row (no GA_Sync: the
//     all-gather ends when every row has arrived). The prefix sums of the bucket totals give
//     where each bucket starts in key order; bucket b is ranked by the rank whose share of the
//     keys holds that start, so each rank ranks a contiguous range of buckets (of key values).
//  3. each rank sorts its keys by bucket (so by destination rank) and Puts each destination's
//     part, in one NGA_NbPut, into the destination's block of the redistribution array, after the
//     parts of the lower ranks (the layout of NPB's MPI all-to-all); GA_Sync.
//  4. each rank counts each key value of its block and of its own part (which never left its
//     memory) and prefix-sums from the range start: the rank of value v is the number of keys
//     ≤ v, as key_buff1 in NPB.
//  5. the rank that owns a test key's value checks its rank against the class table.
//
// After the last iteration the full verification places every key at its rank (each rank Puts
// its contiguous sorted run into the key array), then each rank checks its block and the element
// before it; the counts of keys out of order are summed with GA_Igop.
//
// Source: NPB 3.x IS (is.c: create_seq, rank, full_verify; the MPI version's bucket
// redistribution); GA's NGA_Create/NGA_Put/NGA_Get/NGA_Access/GA_Sync/GA_Igop, and the
// all-gather a GA program calls MPI for.
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
	row    int                       // NumBuckets counts + TestArraySize test keys

	myKeys         []int32 // local block of keys (NGA_Access, released at the end)
	accessed       bool
	redistAccessed bool    // myRedist is accessed (released at the end)
	keyLo          int     // global index of myKeys[0]
	blockLo        []int   // first key of each rank's share (ranks owning nothing: -1)
	slot           int     // keys per rank's block of redist
	myRows         []int32 // every rank's row: rank r's at r·row
	rowOffs        []int   // where each rank's row starts in myRows; Size+1 entries
	myRedist       []int32 // my block of redist (NGA_Access)
	testRank       []int   // the rank whose block of keys holds each test key
	// modifyLocal: rank 0's block holds every key the iterations modify, so it changes them in
	// place and no GA_Sync has to make its Puts visible
	modifyLocal bool
	hs          []*globalarray.Handle // the non-blocking Puts of an exchange

	cnt   []int32  // my bucket counts
	out   []int32  // my row: cnt, then the test keys of my share (0 elsewhere)
	all   []int32  // every rank's counts
	start []int    // where each bucket starts in key order, NumBuckets+1 entries
	dest  []int32  // the rank that ranks each bucket
	b1    []int    // rank r ranks buckets [b1[r], b1[r+1]); Size+1 entries
	put   []int    // where my part for rank r goes in redist
	part  []int    // start of my part for rank r in local; Size+1 entries
	cur   []uint32 // fill cursor per bucket
	local []int32  // my keys sorted by bucket (so grouped by destination)

	own      []int32    // the keys I rank from my own part (in local: never Put)
	mine     [2][]int32 // the keys I rank from the other ranks' parts (my block of redist)
	buff1    []int32    // key_buff1 for my values [b1·nbk, b2·nbk)
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
		if s.redistAccessed {
			s.redist.Release()
		}
		for _, a := range []*globalarray.Array[int32]{s.keys, s.redist} {
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

// syncPuts waits for the exchange's non-blocking Puts (NGA_NbWait: they travel to their ranks
// at once), then GA_Syncs.
func (s *sorter) syncPuts(ctx context.Context) error {
	var err error
	for _, h := range s.hs {
		if werr := h.Wait(ctx); werr != nil && err == nil {
			err = fmt.Errorf("isga: put: %w", werr)
		}
	}
	s.hs = s.hs[:0]
	if err != nil {
		return err
	}
	return s.sync(ctx)
}

func (s *sorter) setup(ctx context.Context) error {
	n := s.p.NumKeys()
	var err error
	if s.keys, err = globalarray.Create[int32](ctx, s.rt, "is.keys", []int{n}); err != nil {
		return fmt.Errorf("isga: create keys: %w", err)
	}
	s.row = s.nb + is.TestArraySize
	s.myRows = make([]int32, s.size*s.row)
	s.rowOffs = make([]int, s.size+1)
	for r := range s.rowOffs {
		s.rowOffs[r] = r * s.row
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
	share := 0 // the largest share of the keys
	for r := range s.blockLo {
		l, h := s.keys.Distribution(r)
		s.blockLo[r] = -1
		if h[0] >= l[0] {
			s.blockLo[r] = l[0]
			share = max(share, h[0]-l[0]+1)
		}
	}
	s.testRank = make([]int, is.TestArraySize)
	for i, ix := range s.p.TestIndex {
		s.testRank[i] = s.ownerOf(int(ix))
	}
	idx, _ := s.p.Modify(is.MaxIterations) // the largest index modified
	s.modifyLocal = s.ownerOf(idx[0]) == 0 && s.ownerOf(idx[1]) == 0
	s.cnt = make([]int32, s.nb)
	s.all = make([]int32, s.size*s.nb)
	s.out = make([]int32, s.row)
	s.start = make([]int, s.nb+1)
	s.dest = make([]int32, s.nb)
	s.b1 = make([]int, s.size+1)
	s.put = make([]int, s.size)
	s.part = make([]int, s.size+1)
	s.cur = make([]uint32, s.nb)
	s.local = make([]int32, len(s.myKeys))
	if err := s.sync(ctx); err != nil { // every rank's keys generated
		return err
	}
	// A rank ranks the buckets that start in its share of the keys: their keys number less than
	// the share plus the last bucket. The ranking changes 2 keys per iteration.
	var pv [is.TestArraySize]int32
	if err := s.exchangeRows(ctx, &pv); err != nil {
		return err
	}
	largest := 0
	for b := 0; b < s.nb; b++ {
		c := 0
		for r := 0; r < s.size; r++ {
			c += int(s.all[r*s.nb+b])
		}
		largest = max(largest, c)
	}
	s.slot = share + largest + 2*is.MaxIterations
	if s.redist, err = globalarray.Create[int32](ctx, s.rt, "is.redist", []int{s.size * s.slot},
		globalarray.Irregular([][]int{blockStarts(s.size, s.slot)})); err != nil {
		return fmt.Errorf("isga: create redist: %w", err)
	}
	if s.myRedist, _, err = s.redist.Access(); err != nil {
		return fmt.Errorf("isga: access redist: %w", err)
	}
	s.redistAccessed = true
	return s.sync(ctx)
}

// blockStarts is the irregular map of n blocks of size elements each.
func blockStarts(n, size int) []int {
	starts := make([]int, n)
	for r := range starts {
		starts[r] = r * size
	}
	return starts
}

// ownerOf is the rank whose share of the keys holds key index ix.
func (s *sorter) ownerOf(ix int) int {
	owner := 0
	for r, lo := range s.blockLo {
		if lo >= 0 && lo <= ix {
			owner = r
		}
	}
	return owner
}

// exchangeRows counts my keys per bucket, reads the test keys of my share, and all-gathers that
// row; then reads every rank's counts into all and the test keys into pv.
func (s *sorter) exchangeRows(ctx context.Context, pv *[is.TestArraySize]int32) error {
	is.Count(s.myKeys, s.shift, s.cnt)
	copy(s.out, s.cnt)
	for i, ix := range s.p.TestIndex {
		s.out[s.nb+i] = 0
		if s.testRank[i] == s.rank {
			s.out[s.nb+i] = s.myKeys[int(ix)-s.keyLo]
		}
	}
	copy(s.myRows[s.rank*s.row:], s.out)
	if err := globalarray.AllGather(ctx, s.rt, s.myRows, s.rowOffs); err != nil {
		return fmt.Errorf("isga: all-gather the counts: %w", err)
	}
	for r := 0; r < s.size; r++ {
		copy(s.all[r*s.nb:(r+1)*s.nb], s.myRows[r*s.row:])
	}
	for i := range pv {
		pv[i] = s.myRows[s.testRank[i]*s.row+s.nb+i]
	}
	return nil
}

// plan computes, from every rank's bucket counts, where each bucket starts in key order, which
// rank ranks it, and where my part for each rank goes. Errors: a rank's range of keys larger
// than its block of redist (not for NPB's keys: the block holds the largest bucket).
func (s *sorter) plan() error {
	pos := 0
	for b := 0; b < s.nb; b++ {
		s.start[b] = pos
		for r := 0; r < s.size; r++ {
			pos += int(s.all[r*s.nb+b])
		}
	}
	s.start[s.nb] = pos
	// bucket b goes to the rank whose share holds start[b]; start and the shares ascend, so each
	// rank gets a contiguous range of buckets
	for b := 0; b < s.nb; b++ {
		s.dest[b] = int32(s.ownerOf(s.start[b]))
	}
	d := 0
	for b := 0; b <= s.nb; b++ {
		for d < s.size && (b == s.nb || int(s.dest[b]) >= d) {
			s.b1[d] = b
			d++
		}
	}
	s.b1[s.size] = s.nb
	// my part for rank d goes into d's block after the parts of ranks below me
	s.part[0] = 0
	for d := 0; d < s.size; d++ {
		if n := s.start[s.b1[d+1]] - s.start[s.b1[d]]; n > s.slot {
			return fmt.Errorf("isga: rank %d ranks %d keys, more than its block of %d", d, n, s.slot)
		}
		at := d * s.slot
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
	return nil
}

// rankKeys is one iteration of NPB's rank().
func (s *sorter) rankKeys(ctx context.Context, iteration int) error {
	p := s.p
	// 1. the per-iteration modification of two keys
	switch idx, val := p.Modify(iteration); {
	case s.modifyLocal && s.rank == 0:
		for i := range idx {
			s.myKeys[idx[i]-s.keyLo] = val[i]
		}
	case !s.modifyLocal:
		if s.rank == 0 {
			for i := range idx {
				if err := s.keys.Put(ctx, []int{idx[i]}, []int{idx[i]}, val[i:i+1], nil); err != nil {
					return fmt.Errorf("isga: put modified key: %w", err)
				}
			}
		}
		if err := s.sync(ctx); err != nil {
			return err
		}
	}
	// 2. bucket counts and the partial verification keys, to every rank
	var pv [is.TestArraySize]int32
	if err := s.exchangeRows(ctx, &pv); err != nil {
		return err
	}
	if err := s.plan(); err != nil {
		return err
	}
	// 3. sort my keys by bucket (NPB's key_buff2), which groups them by destination too (each
	// rank ranks a contiguous range of buckets), one Put per destination. Bucket order also makes
	// step 4's counting walk key_buff1 almost sequentially: counting keys in their original
	// order hits it at random and costs more than the sort (class B at one rank: 2x the time).
	// (locals: the stores below cannot alias them; the cursor is loaded and stored, not
	// incremented in memory, and the shift is unsigned by a masked count, as in is.Count)
	local, cur, shift := s.local, s.cur, uint(s.shift)&31
	pos := uint32(0)
	for b, c := range s.cnt {
		cur[b] = pos
		pos += uint32(c)
	}
	for _, k := range s.myKeys {
		b := uint32(k) >> shift
		c := cur[b]
		local[c] = k
		cur[b] = c + 1
	}
	for k := 1; k < s.size; k++ {
		d := (s.rank + k) % s.size // each rank starts with its next one
		lo, hi := s.part[d], s.part[d+1]
		if hi == lo {
			continue // my own part stays in local (step 4 reads it there)
		}
		at := s.put[d]
		h, err := s.redist.NbPut(ctx, []int{at}, []int{at + hi - lo - 1}, local[lo:hi], nil)
		if err != nil {
			return fmt.Errorf("isga: put keys for rank %d: %w", d, err)
		}
		s.hs = append(s.hs, h)
	}
	if err := s.syncPuts(ctx); err != nil {
		return err
	}
	// 4. rank the keys of my buckets: my own part, and the other ranks' parts before and after
	// it in my block
	b1, b2 := s.b1[s.rank], s.b1[s.rank+1]
	klo, khi := s.start[b1], s.start[b2]
	s.own = local[s.part[s.rank]:s.part[s.rank+1]]
	at := s.put[s.rank] - s.rank*s.slot
	s.mine = [2][]int32{s.myRedist[:at], s.myRedist[at+len(s.own) : khi-klo]}
	v1, v2 := b1*s.nbk, b2*s.nbk
	s.buff1 = slices.Grow(s.buff1[:0], v2-v1)[:v2-v1]
	buff1 := s.buff1 // a local: the stores below cannot alias it
	clear(buff1)
	for _, keys := range [3][]int32{s.own, s.mine[0], s.mine[1]} {
		for _, k := range keys {
			buff1[int(k)-v1]++
		}
	}
	acc := int32(klo)
	for i, c := range buff1 {
		acc += c
		buff1[i] = acc
	}
	// 5. partial verification of the test keys whose value k-1 falls in my range
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
	for _, keys := range [3][]int32{s.own, s.mine[0], s.mine[1]} {
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
