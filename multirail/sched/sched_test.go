package sched

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkStripes asserts the Policy.Schedule contract: disjoint stripes in offset order covering
// [0, size) exactly, distinct subchannels in range, boundaries on multiples of align.
func checkStripes(t *testing.T, op Op, n int, st []Stripe) {
	t.Helper()
	require.NotEmpty(t, st)
	off := 0
	seen := map[int]bool{}
	for _, s := range st {
		require.Equal(t, off, s.Off, "stripes %v", st)
		require.Positive(t, s.Len, "stripes %v", st)
		require.True(t, s.Sub >= 0 && s.Sub < n, "sub %d of %d", s.Sub, n)
		require.False(t, seen[s.Sub], "subchannel %d twice in %v", s.Sub, st)
		seen[s.Sub] = true
		if op.Align > 1 {
			require.Zero(t, s.Off%op.Align, "stripe at %d not aligned to %d", s.Off, op.Align)
		}
		off += s.Len
	}
	require.Equal(t, op.Size, off, "stripes %v", st)
}

func subsOf(st []Stripe) []int {
	var s []int
	for _, x := range st {
		s = append(s, x.Sub)
	}
	return s
}

func lensOf(st []Stripe) []int {
	var s []int
	for _, x := range st {
		s = append(s, x.Len)
	}
	return s
}

func mustNew(t *testing.T, spec string, cfg Config) Policy {
	t.Helper()
	p, err := New(spec, cfg)
	require.NoError(t, err)
	return p
}

// TestMultiplexing: binding, round robin and window-based round robin [Vishnu07 §4.1.2] send
// every operation whole, on the subchannel sequence the policy defines.
func TestMultiplexing(t *testing.T) {
	big := Op{Kind: Put, Size: 1 << 20, Blocking: true}
	cases := []struct {
		spec string
		n    int
		want []int
	}{
		{"binding", 3, []int{0, 0, 0, 0}},
		{"binding:2", 3, []int{2, 2, 2, 2}},
		{"binding:5", 3, []int{2, 2, 2, 2}},
		{"round-robin", 3, []int{0, 1, 2, 0, 1}},
		{"rr", 2, []int{0, 1, 0, 1}},
		{"window:2", 3, []int{0, 0, 1, 1, 2, 2, 0}},
		{"window:1", 2, []int{0, 1, 0}},
		{"window", 2, []int{0, 0, 0, 0, 1, 1, 1, 1, 0}},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			p := mustNew(t, c.spec, Config{Subchannels: c.n})
			assert.False(t, p.Feedback())
			var got []int
			for range c.want {
				st := p.Schedule(big, nil)
				checkStripes(t, big, c.n, st)
				require.Len(t, st, 1)
				got = append(got, st[0].Sub)
			}
			assert.Equal(t, c.want, got)
			// A pinned operation goes where it is told and does not move the sequence.
			pin := big
			pin.Pinned, pin.Sub = true, c.n-1
			assert.Equal(t, []Stripe{{Sub: c.n - 1, Len: big.Size}}, p.Schedule(pin, nil))
		})
	}
}

// TestStriping: even and weighted striping (§4.1.2) and EPC (§6.2): who stripes, how much goes
// on each subchannel, and that small operations and atomics go whole, round robin.
func TestStriping(t *testing.T) {
	cases := []struct {
		name string
		spec string
		cfg  Config
		op   Op
		subs []int
		lens []int
	}{
		{"even 2", "even", Config{Subchannels: 2}, Op{Kind: Put, Size: 64 << 10}, []int{0, 1}, []int{32 << 10, 32 << 10}},
		{"even 4 MiB on 4", "even", Config{Subchannels: 4}, Op{Kind: Get, Size: 4 << 20}, []int{0, 1, 2, 3}, []int{1 << 20, 1 << 20, 1 << 20, 1 << 20}},
		{"even odd size", "even", Config{Subchannels: 3}, Op{Kind: Put, Size: 100001}, []int{0, 1, 2}, []int{33441, 33280, 33280}},
		{"even at threshold", "even", Config{Subchannels: 2, Threshold: 4096}, Op{Kind: Put, Size: 4096}, []int{0, 1}, []int{2048, 2048}},
		{"even below threshold", "even", Config{Subchannels: 2, Threshold: 4096}, Op{Kind: Put, Size: 4095}, []int{0}, []int{4095}},
		{"even 1 byte", "even", Config{Subchannels: 2, Threshold: 1}, Op{Kind: Put, Size: 1}, []int{0}, []int{1}},
		{"even smaller than a grain per path", "even", Config{Subchannels: 4, Threshold: 1}, Op{Kind: Put, Size: 130}, []int{0}, []int{130}},
		{"even atomic", "even", Config{Subchannels: 2, Threshold: 1}, Op{Kind: Atomic, Size: 8}, []int{0}, []int{8}},
		{"even acc complex", "even", Config{Subchannels: 3}, Op{Kind: Acc, Size: 16 * 2001, Align: 16}, []int{0, 1, 2}, []int{10768, 10624, 10624}},
		{"weighted 1:3", "weighted:1:3", Config{Subchannels: 2}, Op{Kind: Put, Size: 64 << 10}, []int{0, 1}, []int{16 << 10, 48 << 10}},
		{"weighted 3:1:0.5", "weighted:3:1:0.5", Config{Subchannels: 3}, Op{Kind: Put, Size: 90 << 10}, []int{0, 1, 2}, []int{60 << 10, 20 << 10, 10 << 10}},
		{"weighted default equal", "weighted", Config{Subchannels: 2}, Op{Kind: Put, Size: 1 << 20}, []int{0, 1}, []int{512 << 10, 512 << 10}},
		{"weighted config weights", "weighted", Config{Subchannels: 2, Weights: []float64{1, 1}}, Op{Kind: Put, Size: 1 << 20}, []int{0, 1}, []int{512 << 10, 512 << 10}},
		{"epc blocking stripes", "epc", Config{Subchannels: 2}, Op{Kind: Put, Size: 1 << 20, Blocking: true}, []int{0, 1}, []int{512 << 10, 512 << 10}},
		{"epc collective stripes", "epc", Config{Subchannels: 2}, Op{Kind: Put, Size: 1 << 20, Collective: true}, []int{0, 1}, []int{512 << 10, 512 << 10}},
		{"epc non-blocking whole", "epc", Config{Subchannels: 2}, Op{Kind: Put, Size: 1 << 20}, []int{0}, []int{1 << 20}},
		{"epc blocking small whole", "epc", Config{Subchannels: 2}, Op{Kind: Get, Size: 1 << 10, Blocking: true}, []int{0}, []int{1 << 10}},
		{"fragment empty loads", "fragment", Config{Subchannels: 2}, Op{Kind: Put, Size: 64 << 10}, []int{0, 1}, []int{32 << 10, 32 << 10}},
		{"fragment get", "fragment", Config{Subchannels: 2}, Op{Kind: Get, Size: 64 << 10}, []int{0, 1}, []int{32 << 10, 32 << 10}},
		{"auto is adaptive over every path", "auto", Config{Subchannels: 3}, Op{Kind: Put, Size: 3 << 20}, []int{0, 1, 2}, []int{1 << 20, 1 << 20, 1 << 20}},
		{"fragment below threshold", "fragment", Config{Subchannels: 2}, Op{Kind: Get, Size: 16<<10 - 1}, []int{0}, []int{16<<10 - 1}},
		{"bss (4,2) first batch", "bss:2", Config{Subchannels: 4}, Op{Kind: Put, Size: 1 << 20}, []int{0, 1}, []int{512 << 10, 512 << 10}},
		{"hsam all paths", "hsam", Config{Subchannels: 3}, Op{Kind: Put, Size: 3 << 20}, []int{0, 1, 2}, []int{1 << 20, 1 << 20, 1 << 20}},
		{"adaptive small whole", "adaptive", Config{Subchannels: 3}, Op{Kind: Put, Size: 100}, []int{0}, []int{100}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustNew(t, c.spec, c.cfg)
			st := p.Schedule(c.op, nil)
			checkStripes(t, c.op, c.cfg.Subchannels, st)
			assert.Equal(t, c.subs, subsOf(st), "%v", st)
			assert.Equal(t, c.lens, lensOf(st), "%v", st)
		})
	}
}

// TestScheduleAppends: Schedule appends to the caller's buffer without touching what is there.
func TestScheduleAppends(t *testing.T) {
	p := mustNew(t, "even", Config{Subchannels: 2})
	buf := []Stripe{{Sub: 9, Off: 9, Len: 9}}
	buf = p.Schedule(Op{Kind: Put, Size: 1 << 20}, buf)
	require.Len(t, buf, 3)
	assert.Equal(t, Stripe{Sub: 9, Off: 9, Len: 9}, buf[0])
	assert.Equal(t, Stripe{Sub: 1, Off: 512 << 10, Len: 512 << 10}, buf[2])
}

// TestEverySizeEveryPolicy: the Schedule contract holds for every policy, odd sizes, alignments
// and subchannel counts, with feedback in between.
func TestEverySizeEveryPolicy(t *testing.T) {
	sizes := []int{1, 7, 63, 64, 65, 4095, 16<<10 - 1, 16 << 10, 16<<10 + 1, 100003, 1 << 20, 64 << 20}
	for _, spec := range Names() {
		for _, n := range []int{1, 2, 3, 4} {
			p := mustNew(t, spec, Config{Subchannels: n})
			for i, size := range sizes {
				for _, k := range []Kind{Put, Get, Acc, Atomic} {
					op := Op{Kind: k, Size: size, Blocking: i%2 == 0}
					if k == Acc {
						op.Align = 8
						op.Size = (size + 7) / 8 * 8
					}
					if k == Atomic {
						op.Size = 8
					}
					st := p.Schedule(op, nil)
					checkStripes(t, op, n, st)
					if k == Atomic {
						require.Len(t, st, 1, "%s: atomic striped", spec)
					}
					done := make([]Done, len(st))
					for j, s := range st {
						done[j] = Done{Sub: s.Sub, Bytes: s.Len, Delivery: time.Duration(s.Len*(s.Sub+1)) + time.Microsecond}
					}
					p.Complete(op, done)
				}
			}
			if f, ok := p.(*Fragment); ok {
				for s := 0; s < n; s++ {
					w, r := f.Load(s)
					require.Zero(t, w, "%s: write load left on %d", spec, s)
					require.Zero(t, r, "%s: read load left on %d", spec, s)
				}
			}
		}
	}
}

// TestUpdateEquation checks eq. 7.4 / 8.3 by hand.
func TestUpdateEquation(t *testing.T) {
	us := time.Microsecond
	cases := []struct {
		name  string
		w     []float64
		done  []Done
		alpha float64
		want  []float64
		moved bool
	}{
		// rates 1000 B/µs and 333 B/µs: the fast path gets 3/4 of W_batch (α = 1, eq. 7.3).
		{"eq 7.3", []float64{0.5, 0.5}, []Done{{0, 1000, us}, {1, 1000, 3 * us}}, 1, []float64{0.75, 0.25}, true},
		// α = 0.5 keeps half of the history (eq. 7.4).
		{"eq 7.4", []float64{0.5, 0.5}, []Done{{0, 1000, us}, {1, 1000, 3 * us}}, 0.5, []float64{0.625, 0.375}, true},
		// Balanced stripes finishing together: weights are right, nothing moves.
		{"balanced", []float64{0.25, 0.75}, []Done{{0, 1000, us}, {1, 3000, us}}, 0.5, []float64{0.25, 0.75}, true},
		// Only the batch's weight W_batch = 0.5 is redistributed (eq. 8.3); path 2 keeps its own.
		{"batch", []float64{0.25, 0.25, 0.5}, []Done{{0, 1000, us}, {1, 1000, us / 2}}, 1, []float64{0.5 / 3, 1.0 / 3, 0.5}, true},
		// One measured stripe: identity, reported as no change.
		{"one stripe", []float64{0.5, 0.5}, []Done{{0, 1000, us}, {1, 1000, 0}}, 1, []float64{0.5, 0.5}, false},
		// Floor: a path measured 1000× slower keeps MinShare (0.01) of the total.
		{"floor", []float64{0.5, 0.5}, []Done{{0, 1000, us}, {1, 1, us}}, 1, []float64{0.99, 0.01}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := append([]float64(nil), c.w...)
			assert.Equal(t, c.moved, Update(w, c.done, c.alpha, 0.01))
			assert.InDeltaSlice(t, c.want, w, 1e-9)
			var sum, want float64
			for i := range w {
				sum += w[i]
				want += c.w[i]
			}
			assert.InDelta(t, want, sum, 1e-9, "total weight conserved")
		})
	}
}

// simulate runs ops operations of size bytes through p on paths of the given bandwidths (bytes
// per ns); each stripe's delivery time is its bytes over its path's bandwidth plus 1 µs.
func simulate(p Policy, bw []float64, size, ops int) []Stripe {
	var last []Stripe
	op := Op{Kind: Put, Size: size, Blocking: true}
	for i := 0; i < ops; i++ {
		last = p.Schedule(op, last[:0])
		done := make([]Done, len(last))
		for j, s := range last {
			done[j] = Done{Sub: s.Sub, Bytes: s.Len, Delivery: time.Microsecond + time.Duration(float64(s.Len)/bw[s.Sub])}
		}
		p.Complete(op, done)
	}
	return last
}

// TestAdaptiveConverges: adaptive striping (ch. 7) on rails of rates 1:3 converges to stripes of
// 1:3, and after the fast rail drops to a tenth it moves the load back.
func TestAdaptiveConverges(t *testing.T) {
	p := mustNew(t, "adaptive", Config{Subchannels: 2})
	share0 := func(st []Stripe) float64 {
		for _, s := range st {
			if s.Sub == 0 {
				return float64(s.Len) / float64(4<<20)
			}
		}
		return 0
	}
	st := simulate(p, []float64{1, 3}, 4<<20, 30)
	require.Len(t, st, 2)
	assert.InDelta(t, 0.25, share0(st), 0.01, "%v", st)
	st = simulate(p, []float64{1, 0.3}, 4<<20, 30)
	assert.InDelta(t, 1/1.3, share0(st), 0.01, "%v", st)
	assert.Equal(t, "adaptive:0.5", p.Name())
}

// TestBSSDropsSlowPath: BSS (4,2) (ch. 8) stripes over two of four paths; when one of them turns
// slow its weight falls below the unused paths', the re-sort swaps it out of the batch and it is
// no longer used. HSAM (n_batch = n_paths) keeps using every path.
func TestBSSDropsSlowPath(t *testing.T) {
	p, err := NewBSS(4, 2, 0.5, 1024, 0.01)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, p.Batch())
	bw := []float64{1, 0.1, 1, 1}
	st := simulate(p, bw, 1<<20, 20)
	for _, s := range st {
		assert.NotEqual(t, 1, s.Sub, "the slow path is still striped on: %v", st)
	}
	assert.NotContains(t, p.Batch(), 1)
	w := p.Weights()
	assert.Less(t, w[1], w[0])
	assert.Less(t, w[1], w[2])

	h, err := NewBSS(4, 4, 0.5, 1024, 0.01)
	require.NoError(t, err)
	st = simulate(h, bw, 1<<20, 20)
	assert.Len(t, st, 4)
	// The slow path carries about its share of the summed bandwidth, 0.1/3.1.
	for _, s := range st {
		if s.Sub == 1 {
			assert.InDelta(t, 0.1/3.1, float64(s.Len)/float64(1<<20), 0.01)
		}
	}
}

// TestFragmentLoads: load-balanced fragmentation (§5.2.2) fills the least loaded subchannels of
// the operation's own direction first; completions drain the queues.
func TestFragmentLoads(t *testing.T) {
	p := NewFragment(3, 1024)
	put := func(size int) []Stripe { return p.Schedule(Op{Kind: Put, Size: size}, nil) }
	get := func(size int) []Stripe { return p.Schedule(Op{Kind: Get, Size: size}, nil) }

	a := put(30 << 10) // 10K each
	assert.Equal(t, []int{10 << 10, 10 << 10, 10 << 10}, lensOf(a))
	p.Complete(Op{Kind: Put, Size: 30 << 10}, []Done{{Sub: 0, Bytes: 10 << 10}}) // sub 0 drained
	b := put(10 << 10)                                                           // fills sub 0 only
	assert.Equal(t, []Stripe{{Sub: 0, Len: 10 << 10}}, b)
	c := put(12 << 10) // all at 10K: 4K each
	assert.Equal(t, []int{4 << 10, 4 << 10, 4 << 10}, lensOf(c))
	// Reads have their own queue: write loads do not bend a get.
	g := get(3 << 10)
	assert.Equal(t, []int{1 << 10, 1 << 10, 1 << 10}, lensOf(g))
	w, r := p.Load(1)
	assert.Equal(t, int64(14<<10), w)
	assert.Equal(t, int64(1<<10), r)
	// Loads of 0: 14K, 1: 14K, 2: 14K → a 2K put that makes sub 2 drop first goes to sub 2.
	p.Complete(Op{Kind: Put}, []Done{{Sub: 2, Bytes: 10 << 10}})
	d := put(8 << 10) // sub 2 at 4K, others at 14K: 8K fits under them
	assert.Equal(t, []Stripe{{Sub: 2, Len: 8 << 10}}, d)
	e := put(6 << 10) // all at 12K+: sub 2 at 12K gets 2K+, then even
	checkStripes(t, Op{Kind: Put, Size: 6 << 10}, 3, e)
	assert.Equal(t, []int{0, 1, 2}, subsOf(e))
	assert.Equal(t, []int{1344, 1344, 3456}, lensOf(e))
	// Small operations go round robin whole, and still count in the loads.
	s := put(100)
	assert.Len(t, s, 1)
}

func TestParse(t *testing.T) {
	good := []struct {
		spec, name string
		check      func(t *testing.T, c Config)
	}{
		{"AUTO", "auto", nil},
		{"lbf", "fragment", nil},
		{"round-robin", "round-robin", nil},
		{"window:8", "window", func(t *testing.T, c Config) { assert.Equal(t, 8, c.Window) }},
		{"weighted:1:3", "weighted", func(t *testing.T, c Config) { assert.Equal(t, []float64{1, 3}, c.Weights) }},
		{"bss:3", "bss", func(t *testing.T, c Config) { assert.Equal(t, 3, c.Batch) }},
		{"bss:2:0.9", "bss", func(t *testing.T, c Config) { assert.Equal(t, 2, c.Batch); assert.Equal(t, 0.9, c.Alpha) }},
		{"hsam:0.25", "hsam", func(t *testing.T, c Config) { assert.Equal(t, 0.25, c.Alpha) }},
		{"binding:1", "binding", func(t *testing.T, c Config) { assert.Equal(t, 1, c.Bind) }},
	}
	for _, g := range good {
		name, c, err := Parse(g.spec, Config{})
		require.NoError(t, err, g.spec)
		assert.Equal(t, g.name, name)
		if g.check != nil {
			g.check(t, c)
		}
	}
	for _, bad := range []string{"", "fastest", "even:2", "window:x", "weighted:1:-1", "bss:1:2:3", "adaptive:0", "bss:-1"} {
		_, err := New(bad, Config{Subchannels: 2})
		require.Error(t, err, bad)
		assert.True(t, errors.Is(err, ErrUnknownPolicy) || errors.Is(err, ErrBadConfig), "%q: %v", bad, err)
	}
	for _, cfg := range []Config{{Subchannels: 0}, {Subchannels: MaxSubchannels + 1}, {Subchannels: 2, Batch: 3}, {Subchannels: 2, Alpha: 1.5}} {
		_, err := New("bss", cfg)
		assert.ErrorIs(t, err, ErrBadConfig, "%+v", cfg)
	}
	_, err := New("weighted:1:2:3", Config{Subchannels: 3})
	require.NoError(t, err)
	p, err := New("weighted:1:2", Config{Subchannels: 2})
	require.NoError(t, err)
	assert.Equal(t, "weighted:1:2", p.Name())
}

// TestMultiplexSmall: the striping policies send small operations and atomics whole, on the
// previous operation's subchannel while it is idle, else on the least busy one (round robin on
// ties), counting every stripe in flight (mux.go). Steps: "s" schedules an 8-byte put, "a" an
// atomic, "p<sub>" a pinned 8-byte put, "b" a 1 MiB put (striped), "c<i>" completes the i-th
// operation scheduled; want lists the subchannel of every whole operation, in order.
func TestMultiplexSmall(t *testing.T) {
	serial := "s c0 s c1 a c2 s c3 s c4"
	cases := []struct {
		name  string
		spec  string
		n     int
		steps string
		want  []int
	}{
		{"fragment serial stays", "fragment", 2, serial, []int{0, 0, 0, 0, 0}},
		{"fragment serial stays, 4", "fragment", 4, serial, []int{0, 0, 0, 0, 0}},
		{"even serial stays", "even", 3, serial, []int{0, 0, 0, 0, 0}},
		{"weighted serial stays", "weighted:1:3", 2, serial, []int{0, 0, 0, 0, 0}},
		{"epc serial stays", "epc", 2, serial, []int{0, 0, 0, 0, 0}},
		{"adaptive serial stays", "adaptive", 4, serial, []int{0, 0, 0, 0, 0}},
		{"fragment burst spreads", "fragment", 2, "s s s s s", []int{0, 1, 0, 1, 0}},
		{"fragment burst spreads, 3", "fragment", 3, "s s s s a", []int{0, 1, 2, 0, 1}},
		{"even burst spreads, 4", "even", 4, "s s s s s", []int{0, 1, 2, 3, 0}},
		{"epc burst spreads", "epc", 2, "s a s", []int{0, 1, 0}},
		// after a burst drains, the next operation stays where the last one went
		{"fragment after a burst", "fragment", 3, "s s c0 c1 s s", []int{0, 1, 1, 2}},
		// the least busy wins over round-robin order (1, not 0, after 2), then ties go round robin
		{"fragment least busy", "fragment", 3, "s s s c1 s s", []int{0, 1, 2, 1, 2}},
		// a pinned operation counts as busy but does not move the previous subchannel
		{"fragment pinned", "fragment", 2, "p0 s c1 p1 s", []int{0, 1, 1, 0}},
		// a striped operation in flight keeps every subchannel busy: the small one takes the
		// next in round-robin order, then the idle one
		{"fragment behind a striped put", "fragment", 2, "s c0 b s s", []int{0, 1, 0}},
		// bss multiplexes over its batch only (4 paths, n_batch 2: subchannels 0 and 1)
		{"bss batch", "bss:2", 4, "s s s c0 s", []int{0, 1, 0, 1}},
		{"bss batch serial", "bss:2", 4, "s c0 s c1 s", []int{0, 0, 0}},
		// the plain multiplexing policies keep their sequence
		{"round-robin unchanged", "round-robin", 2, serial, []int{0, 1, 0, 1, 0}},
		{"binding unchanged", "binding:1", 2, "s s c0 s", []int{1, 1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustNew(t, c.spec, Config{Subchannels: c.n})
			type sched struct {
				op Op
				st []Stripe
			}
			var ops []sched
			var got []int
			for _, step := range strings.Fields(c.steps) {
				var op Op
				switch step[0] {
				case 's':
					op = Op{Kind: Put, Size: 8, Blocking: true}
				case 'a':
					op = Op{Kind: Atomic, Size: 8}
				case 'p':
					op = Op{Kind: Put, Size: 8, Pinned: true, Sub: int(step[1] - '0')}
				case 'b':
					op = Op{Kind: Put, Size: 1 << 20, Blocking: true}
				case 'c':
					i, err := strconv.Atoi(step[1:])
					require.NoError(t, err)
					done := make([]Done, len(ops[i].st))
					for j, s := range ops[i].st {
						done[j] = Done{Sub: s.Sub, Bytes: s.Len, Delivery: time.Microsecond}
					}
					p.Complete(ops[i].op, done)
					continue
				default:
					t.Fatalf("bad step %q", step)
				}
				st := p.Schedule(op, nil)
				checkStripes(t, op, c.n, st)
				ops = append(ops, sched{op, st})
				if op.Size < 1<<20 {
					require.Len(t, st, 1)
					got = append(got, st[0].Sub)
				} else {
					require.Len(t, st, c.n, "%v", st)
				}
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// TestBSSSinglePathBatch: BSS with n_batch = 1 uses the single best path; when that path slows
// down it loses weight against what the others last delivered (or promise) until another path
// sorts first, and the batch then stays on the path that measures fastest.
func TestBSSSinglePathBatch(t *testing.T) {
	p, err := NewBSS(3, 1, 0.5, 1024, 0.01)
	require.NoError(t, err)
	st := simulate(p, []float64{1, 1, 1}, 1<<20, 10)
	assert.Equal(t, []Stripe{{Sub: 0, Len: 1 << 20}}, st, "equal paths: the first one")
	assert.Equal(t, []int{0}, p.Batch())
	st = simulate(p, []float64{0.1, 1, 1}, 1<<20, 10) // path 0 slows to a tenth
	assert.Equal(t, 1, st[0].Sub, "moved off the slow path")
	assert.Equal(t, []int{1}, p.Batch())
	w := p.Weights()
	assert.Less(t, w[0], w[1])
	assert.InDelta(t, 1, w[0]+w[1]+w[2], 1e-9)
	st = simulate(p, []float64{0.1, 1, 1}, 1<<20, 20)
	assert.Equal(t, 1, st[0].Sub, "stays on a path as fast as its promise")

	// below the threshold a delivery time says nothing about bandwidth: no change
	q, err := NewBSS(2, 1, 0.5, 1<<20, 0.01)
	require.NoError(t, err)
	simulate(q, []float64{0.001, 1}, 100, 50)
	assert.Equal(t, []float64{0.5, 0.5}, q.Weights())
}
