package transport

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// cluster runs one Selector per rank of a job and plays their drivers: messages, an evaluation
// of every rank once a second, admission at the target, closes told to the other end. After
// every step it checks the bound h at every rank and that both ends agree on every connection.
type cluster struct {
	t   *testing.T
	sel []*Selector
	h   int
	now time.Time
	log []logged // every decision carried out
}

func newCluster(t *testing.T, ranks int, cfg Config) *cluster {
	c := &cluster{t: t, sel: make([]*Selector, ranks), h: cfg.MaxRC, now: t0}
	for r := range c.sel {
		s, err := NewSelector(ranks, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.sel[r] = s
	}
	return c
}

// logged is one decision of one rank.
type logged struct {
	at   time.Duration
	rank int
	Decision
}

// send records n messages from origin to target at the current time.
func (c *cluster) send(origin, target, n int) {
	for range n {
		if err := c.sel[origin].Record(target, 8, c.now); err != nil {
			c.t.Fatal(err)
		}
	}
	if c.sel[origin].OnRC(target) {
		if err := c.sel[target].Incoming(origin, c.now); err != nil {
			c.t.Fatal(err)
		}
	}
}

// evaluate runs every rank's evaluation at the current time and carries the decisions out.
func (c *cluster) evaluate() {
	for r, s := range c.sel {
		ds, err := s.Evaluate(c.now)
		if err != nil {
			c.t.Fatal(err)
		}
		c.apply(r, ds)
	}
	c.check()
}

func (c *cluster) apply(r int, ds []Decision) {
	for _, d := range ds {
		c.log = append(c.log, logged{c.now.Sub(t0), r, d})
		switch {
		case d.Action == Evict || d.Action == Demote && d.Close:
			if err := c.sel[d.Peer].Closed(r, c.now); err != nil {
				c.t.Fatalf("rank %d closes its connection to %d: the other end: %v", r, d.Peer, err)
			}
		case d.Action == Promote && !d.Reuse:
			ok, more, err := c.sel[d.Peer].Admit(r, c.now)
			if err != nil {
				c.t.Fatal(err)
			}
			c.apply(d.Peer, more)
			if !ok {
				if err := c.sel[r].ConnFailed(d.Peer, c.now); err != nil {
					c.t.Fatal(err)
				}
			}
		case d.Action == Promote && d.Reuse:
			if c.sel[d.Peer].conns[r] == connNone {
				c.t.Fatalf("rank %d reuses a connection to %d that %d closed", r, d.Peer, d.Peer)
			}
		}
	}
}

// check: at most h connections open at every rank, the selector's count right, both ends
// agree, and no connection unused for longer than the idle timeout (plus the evaluation
// period) stays open.
func (c *cluster) check() {
	for r, s := range c.sel {
		open := 0
		for p, k := range s.conns {
			if k != connNone {
				open++
				if idle := c.now.Sub(s.lastUse(p)); idle > s.cfg.IdleTimeout+time.Second {
					c.t.Fatalf("%v: rank %d keeps its connection to %d idle for %v", c.now.Sub(t0), r, p, idle)
				}
				if c.sel[p].conns[r] == connNone {
					c.t.Fatalf("%v: rank %d has a connection to %d that %d has not", c.now.Sub(t0), r, p, p)
				}
			}
		}
		if open != s.Open() || open > c.h {
			c.t.Fatalf("%v: rank %d has %d connections open (counted %d), bound %d", c.now.Sub(t0), r, open, s.Open(), c.h)
		}
	}
}

func (c *cluster) onRC(r int) []int {
	var out []int
	for p := range c.sel {
		if c.sel[r].OnRC(p) {
			out = append(out, p)
		}
	}
	return out
}

// run plays pattern for d: every 100 ms tick pattern(tick) sends, every second all evaluate.
func (c *cluster) run(d time.Duration, pattern func(c *cluster)) {
	for range d / (100 * time.Millisecond) {
		c.now = c.now.Add(100 * time.Millisecond)
		pattern(c)
		if c.now.Sub(t0)%time.Second == 0 {
			c.evaluate()
		}
		c.check()
	}
}

// The three patterns of [Takagi15 §4.3] at 64 ranks: 100 messages per peer per 100 ms tick.
func oneToMany(c *cluster) {
	for p := 1; p < len(c.sel); p++ {
		c.send(0, p, 100)
	}
}

func manyToOne(c *cluster) {
	for r := 1; r < len(c.sel); r++ {
		c.send(r, 0, 100)
	}
}

func TestSelectorOneToMany(t *testing.T) {
	c := newCluster(t, 64, DefaultConfig())
	c.run(5*time.Second, oneToMany)
	if got := len(c.onRC(0)); got != c.h {
		t.Fatalf("one→many: rank 0 has %d peers on RC, want h = %d", got, c.h)
	}
	for r := 1; r < 64; r++ {
		if len(c.onRC(r)) != 0 {
			t.Fatalf("rank %d sends nothing but has peers on RC", r)
		}
	}
}

func TestSelectorManyToOne(t *testing.T) {
	c := newCluster(t, 64, DefaultConfig())
	c.run(5*time.Second, manyToOne)
	onRC := 0
	for r := 1; r < 64; r++ {
		onRC += len(c.onRC(r))
	}
	// The target admits h connections; the other origins are refused and stay on the shared
	// path (and do not ask again before the idle timeout).
	if onRC != c.h || c.sel[0].Open() != c.h {
		t.Fatalf("many→one: %d origins on RC, rank 0 has %d open; want h = %d", onRC, c.sel[0].Open(), c.h)
	}
	promotes := 0
	for _, l := range c.log {
		if l.Action == Promote {
			promotes++
		}
	}
	if promotes != 63 {
		t.Fatalf("many→one: %d promotions in 5 s, want 63 (one per origin, refused ones wait)", promotes)
	}
}

// TestSelectorRepeat alternates one→many and many→one five times ([Takagi15 §4.3] repeat),
// 12 s each (longer than the idle timeout): the bound holds at every step and no connection
// stays idle past the timeout (cluster.check); rank 0 gives h peers RC while it sends, and
// while it receives, h origins reach it over RC.
func TestSelectorRepeat(t *testing.T) {
	cfg := DefaultConfig()
	c := newCluster(t, 64, cfg)
	for i := range 5 {
		c.run(12*time.Second, oneToMany)
		if got := len(c.onRC(0)); got != c.h {
			t.Fatalf("round %d one→many: rank 0 has %d peers on RC, want %d", i, got, c.h)
		}
		c.run(12*time.Second, manyToOne)
		origins := 0
		for r := 1; r < 64; r++ {
			origins += len(c.onRC(r))
		}
		if origins != c.h {
			t.Fatalf("round %d many→one: %d origins on RC to rank 0, want %d", i, origins, c.h)
		}
	}
}

// single is a selector over 8 peers with h = 2, driven directly.
func single(t *testing.T) (*Selector, Config) {
	cfg := DefaultConfig()
	cfg.MaxRC = 2
	s, err := NewSelector(8, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, cfg
}

// feed sends rate messages per second to each peer of rates for d, evaluating every second,
// and returns the decisions.
func feed(t *testing.T, s *Selector, from, d time.Duration, rates map[int]int) []Decision {
	var out []Decision
	for tick := from + 100*time.Millisecond; tick <= from+d; tick += 100 * time.Millisecond {
		for p, r := range rates {
			for range r / 10 {
				if err := s.Record(p, 64, at(tick)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if tick%time.Second == 0 {
			ds, err := s.Evaluate(at(tick))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ds...)
		}
		if s.Open() > s.cfg.MaxRC {
			t.Fatalf("%v: %d open, bound %d", tick, s.Open(), s.cfg.MaxRC)
		}
	}
	return out
}

func peersOn(s *Selector) []int {
	var out []int
	for p := range s.conns {
		if s.OnRC(p) {
			out = append(out, p)
		}
	}
	return out
}

func TestSelectorHotColdEvictReadmit(t *testing.T) {
	s, cfg := single(t)
	hot := map[int]int{1: 1000, 2: 2000, 3: 10, 4: 10, 5: 10}
	ds := feed(t, s, 0, 3*time.Second, hot)
	if want := []Decision{{Peer: 2, Action: Promote}, {Peer: 1, Action: Promote}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("hot peers: decisions %+v, want %+v", ds, want)
	}
	// Peer 1 goes cold, 3 goes hot: 1 is demoted (pooled), 3 promoted; the pool is full (h = 2)
	// so 1's connection is closed for 3's.
	ds = feed(t, s, 3*time.Second, 3*time.Second, map[int]int{2: 2000, 3: 1500})
	if want := []Decision{{Peer: 1, Action: Demote, Close: true}, {Peer: 3, Action: Promote}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("1 cold, 3 hot: decisions %+v, want %+v", ds, want)
	}
	// Everything stops: after the idle timeout both connections are evicted (demoted and closed).
	ds = feed(t, s, 6*time.Second, cfg.IdleTimeout+time.Second, nil)
	if want := []Decision{{Peer: 2, Action: Demote, Close: true}, {Peer: 3, Action: Demote, Close: true}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("idle: decisions %+v, want %+v", ds, want)
	}
	if s.Open() != 0 {
		t.Fatalf("idle: %d connections open", s.Open())
	}
	// Hot again: re-admitted with new connections.
	ds = feed(t, s, 17*time.Second, 2*time.Second, map[int]int{3: 3000})
	if want := []Decision{{Peer: 3, Action: Promote}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("hot again: decisions %+v, want %+v", ds, want)
	}
}

func TestSelectorReusesPooledConnection(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRC = 4
	s, _ := NewSelector(8, cfg)
	feed(t, s, 0, 2*time.Second, map[int]int{1: 2000})
	// 1 falls silent while 2 is hot: demoted, its connection pooled (room in the pool).
	ds := feed(t, s, 2*time.Second, 3*time.Second, map[int]int{2: 2000})
	if want := []Decision{{Peer: 1, Action: Demote}, {Peer: 2, Action: Promote}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("decisions %+v, want %+v", ds, want)
	}
	// 1 hot again before the idle timeout: promoted on its pooled connection.
	ds = feed(t, s, 5*time.Second, 2*time.Second, map[int]int{1: 2000, 2: 2000})
	if want := []Decision{{Peer: 1, Action: Promote, Reuse: true}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("decisions %+v, want %+v", ds, want)
	}
	if s.Open() != 2 {
		t.Fatalf("%d open, want 2", s.Open())
	}
}

// TestSelectorNoFlapWithinGamma: with h = 1 and two peers of nearly equal traffic whose order
// keeps changing, the gain of a swap per message stays under γ and nothing moves; a clear
// change of pattern moves the connection.
func TestSelectorNoFlapWithinGamma(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRC = 1
	s, _ := NewSelector(4, cfg)
	ds := feed(t, s, 0, 2*time.Second, map[int]int{1: 1000, 2: 900})
	if want := []Decision{{Peer: 1, Action: Promote}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("start: decisions %+v, want %+v", ds, want)
	}
	from := 2 * time.Second
	for i := range 10 {
		rates := map[int]int{1: 1000, 2: 1100}
		if i%2 == 1 {
			rates = map[int]int{1: 1100, 2: 1000}
		}
		if ds := feed(t, s, from, 2*time.Second, rates); len(ds) != 0 {
			t.Fatalf("round %d: near-equal traffic moved connections: %+v", i, ds)
		}
		from += 2 * time.Second
	}
	ds = feed(t, s, from, 2*time.Second, map[int]int{1: 100, 2: 3000})
	if want := []Decision{{Peer: 1, Action: Demote, Close: true}, {Peer: 2, Action: Promote}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("clear change: decisions %+v, want %+v", ds, want)
	}
}

func TestSelectorGammaGates(t *testing.T) {
	for _, tt := range []struct {
		gamma time.Duration
		want  int
	}{{0, 1}, {25 * time.Nanosecond, 1}, {time.Microsecond, 0}} {
		cfg := DefaultConfig()
		cfg.Gamma = tt.gamma
		s, _ := NewSelector(4, cfg)
		feed(t, s, 0, 2*time.Second, map[int]int{1: 1000})
		if got := len(peersOn(s)); got != tt.want {
			t.Errorf("γ %v: %d peers on RC, want %d", tt.gamma, got, tt.want)
		}
	}
}

func TestSelectorMaxRCZeroSharedOnly(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRC = 0
	s, _ := NewSelector(4, cfg)
	if ds := feed(t, s, 0, 3*time.Second, map[int]int{1: 5000}); len(ds) != 0 {
		t.Fatalf("h = 0: decisions %+v", ds)
	}
	if ok, _, _ := s.Admit(2, at(3*time.Second)); ok {
		t.Fatal("h = 0: a connection was admitted")
	}
}

func TestSelectorAdmit(t *testing.T) {
	s, _ := single(t) // h = 2
	now := at(time.Second)
	for _, p := range []int{1, 2} {
		if ok, ds, err := s.Admit(p, now); !ok || ds != nil || err != nil {
			t.Fatalf("Admit(%d) = %v %v %v", p, ok, ds, err)
		}
	}
	if ok, _, _ := s.Admit(1, now); !ok {
		t.Fatal("a peer already connected was refused")
	}
	// Full of idle pooled connections: a third peer gets the least recently used one.
	if err := s.Incoming(1, at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	ok, ds, err := s.Admit(3, at(3*time.Second))
	if want := []Decision{{Peer: 2, Action: Evict}}; !ok || err != nil || !reflect.DeepEqual(ds, want) {
		t.Fatalf("Admit(3) on a full pool = %v %+v %v, want true %+v", ok, ds, err, want)
	}
	// Full of connections in use: refused.
	s2, _ := single(t)
	feed(t, s2, 0, 2*time.Second, map[int]int{1: 2000, 2: 2000})
	if ok, ds, _ := s2.Admit(3, at(2*time.Second)); ok || ds != nil {
		t.Fatalf("Admit on a pool in use = %v %+v, want refused", ok, ds)
	}
}

func TestSelectorConnFailedBacksOff(t *testing.T) {
	s, cfg := single(t)
	feed(t, s, 0, 2*time.Second, map[int]int{1: 2000})
	if err := s.ConnFailed(1, at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s.OnRC(1) || s.Open() != 0 {
		t.Fatal("a failed connection stayed")
	}
	if ds := feed(t, s, 2*time.Second, cfg.IdleTimeout-time.Second, map[int]int{1: 2000}); len(ds) != 0 {
		t.Fatalf("promoted again within the back-off: %+v", ds)
	}
	ds := feed(t, s, 1*time.Second+cfg.IdleTimeout, 2*time.Second, map[int]int{1: 2000})
	if want := []Decision{{Peer: 1, Action: Promote}}; !reflect.DeepEqual(ds, want) {
		t.Fatalf("after the back-off: %+v, want %+v", ds, want)
	}
}

func cloneSelector(s *Selector) Selector {
	c := *s
	st := *s.stats
	st.peers = slices.Clone(st.peers)
	c.stats = &st
	c.conns, c.since, c.remote, c.retry = slices.Clone(s.conns), slices.Clone(s.since), slices.Clone(s.remote), slices.Clone(s.retry)
	return c
}

func TestSelectorBadInputChangesNothing(t *testing.T) {
	s, _ := single(t)
	feed(t, s, 0, 2*time.Second, map[int]int{1: 2000, 2: 10})
	before := cloneSelector(s)
	past, now := at(time.Second), at(3*time.Second)
	for _, tt := range []struct {
		name string
		call func() error
		want error
	}{
		{"Record bad peer", func() error { return s.Record(8, 1, now) }, ErrBadPeer},
		{"Record negative", func() error { return s.Record(1, -1, now) }, ErrBadEvent},
		{"Record in the past", func() error { return s.Record(1, 1, past) }, ErrBadTime},
		{"Evaluate in the past", func() error { _, err := s.Evaluate(past); return err }, ErrBadTime},
		{"Admit bad peer", func() error { _, _, err := s.Admit(-1, now); return err }, ErrBadPeer},
		{"Admit in the past", func() error { _, _, err := s.Admit(3, past); return err }, ErrBadTime},
		{"Incoming bad peer", func() error { return s.Incoming(99, now) }, ErrBadPeer},
		{"ConnFailed without a connection", func() error { return s.ConnFailed(3, now) }, ErrBadEvent},
		{"Closed without a connection", func() error { return s.Closed(3, now) }, ErrBadEvent},
		{"ConnFailed in the past", func() error { return s.ConnFailed(1, past) }, ErrBadTime},
	} {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if got := cloneSelector(s); !reflect.DeepEqual(got, before) {
			t.Fatalf("%s changed the selector", tt.name)
		}
	}
	if s.OnRC(-1) || s.OnRC(8) {
		t.Error("OnRC out of range")
	}
}
