package transport

import (
	"testing"
	"time"
)

// pair is the origin side of one (origin, target) pair as a driver would keep it: the
// target's Switch, the operations in flight with the path each went on, and the operations
// queued while suspended.
type pair struct {
	w      *Switch
	next   uint64
	pathOf map[uint64]Path
	queued int
}

// switchedCluster is a cluster whose decisions drive each pair's Switch; operations issued in
// one tick complete in the next one, newest first (out of order).
type switchedCluster struct {
	*cluster
	pairs              map[[2]int]*pair
	switches, suspends int
}

func (c *switchedCluster) pair(o, t int) *pair {
	k := [2]int{o, t}
	if c.pairs[k] == nil {
		c.pairs[k] = &pair{w: NewSwitch(PathShared), pathOf: map[uint64]Path{}}
	}
	return c.pairs[k]
}

// step feeds e to the (o, t) switch and carries out its actions; ready says whether the RC
// connection a Connect asks for is there (admitted or pooled).
func (c *switchedCluster) step(o, t int, e Event, ready bool) {
	p := c.pair(o, t)
	acts, err := p.w.Step(e)
	if err != nil {
		c.t.Fatalf("%v: pair %d→%d %+v: %v", c.now.Sub(t0), o, t, e, err)
	}
	for _, a := range acts {
		switch a.Kind {
		case ActConnect:
			ev := Event{Kind: ConnFailed}
			if ready {
				ev.Kind = ConnReady
			}
			c.step(o, t, ev, false)
		case ActSwitch:
			if len(p.pathOf) != 0 {
				c.t.Fatalf("%v: pair %d→%d switches to %v with %d operations in flight", c.now.Sub(t0), o, t, a.To, len(p.pathOf))
			}
			c.switches++
		case ActSuspend:
			c.suspends++
		case ActResume:
			n := p.queued
			p.queued = 0
			for range n {
				c.issue(o, t)
			}
		}
	}
}

func (c *switchedCluster) issue(o, t int) {
	p := c.pair(o, t)
	if p.w.Suspended() {
		p.queued++
		return
	}
	for id, path := range p.pathOf {
		if path != p.w.Path() {
			c.t.Fatalf("pair %d→%d: operation issued on %v while %d is in flight on %v", o, t, p.w.Path(), id, path)
		}
	}
	p.next++
	p.pathOf[p.next] = p.w.Path()
	c.step(o, t, Event{Kind: OpIssued, ID: p.next}, false)
}

// completeAll completes every operation in flight, newest first.
func (c *switchedCluster) completeAll() {
	for k, p := range c.pairs {
		for id := p.next; len(p.pathOf) > 0 && id > 0; id-- {
			if _, ok := p.pathOf[id]; ok {
				delete(p.pathOf, id)
				c.step(k[0], k[1], Event{Kind: OpCompleted, ID: id}, false)
			}
		}
	}
}

// evaluate is cluster.evaluate with the decisions fed to the switches.
func (c *switchedCluster) evaluate() {
	for r, s := range c.sel {
		ds, err := s.Evaluate(c.now)
		if err != nil {
			c.t.Fatal(err)
		}
		c.apply(r, ds)
	}
	c.check()
}

func (c *switchedCluster) apply(r int, ds []Decision) {
	for _, d := range ds {
		switch {
		case d.Action == Promote:
			ready := d.Reuse
			if !d.Reuse {
				ok, more, err := c.sel[d.Peer].Admit(r, c.now)
				if err != nil {
					c.t.Fatal(err)
				}
				c.apply(d.Peer, more)
				if ready = ok; !ok {
					if err := c.sel[r].ConnFailed(d.Peer, c.now); err != nil {
						c.t.Fatal(err)
					}
				}
			}
			c.step(r, d.Peer, Event{Kind: SwitchRequested, To: PathRC}, ready)
		case d.Action == Demote:
			c.step(r, d.Peer, Event{Kind: SwitchRequested, To: PathShared}, false)
		}
		if d.Action == Evict || d.Action == Demote && d.Close {
			if err := c.sel[d.Peer].Closed(r, c.now); err != nil {
				c.t.Fatal(err)
			}
			// The other end's operations on the closed connection move to the shared path.
			if q := c.pairs[[2]int{d.Peer, r}]; q != nil && (q.w.Path() == PathRC || q.w.target == PathRC) {
				c.step(d.Peer, r, Event{Kind: ConnFailed}, false)
			}
		}
	}
}

func (c *switchedCluster) run(d time.Duration, pattern func(send func(o, t, n int))) {
	for range d / (100 * time.Millisecond) {
		c.now = c.now.Add(100 * time.Millisecond)
		c.completeAll()
		pattern(func(o, t, n int) {
			c.send(o, t, n)
			for range n {
				c.issue(o, t)
			}
		})
		if c.now.Sub(t0)%time.Second == 0 {
			c.evaluate()
		}
	}
}

// TestPatternsDriveSwitches runs the repeat pattern at 64 ranks with every decision carried
// out through the pairs' Switches: no switch happens with operations in flight, no operation
// is issued on a path while an earlier one is in flight on the other, and once the operations
// drain every pair's path is the one its selector chose.
func TestPatternsDriveSwitches(t *testing.T) {
	c := &switchedCluster{cluster: newCluster(t, 64, DefaultConfig()), pairs: map[[2]int]*pair{}}
	one := func(send func(o, t, n int)) {
		for p := 1; p < 64; p++ {
			send(0, p, 10)
		}
	}
	many := func(send func(o, t, n int)) {
		for r := 1; r < 64; r++ {
			send(r, 0, 10)
		}
	}
	for range 3 {
		c.run(12*time.Second, one)
		c.run(12*time.Second, many)
	}
	c.now = c.now.Add(100 * time.Millisecond)
	c.completeAll()
	for k, p := range c.pairs {
		if p.w.Suspended() || p.queued != 0 {
			t.Fatalf("pair %v still suspended with %d queued", k, p.queued)
		}
		if on := c.sel[k[0]].OnRC(k[1]); on != (p.w.Path() == PathRC) {
			t.Fatalf("pair %v: selector on RC %v, switch path %v", k, on, p.w.Path())
		}
	}
	if c.switches == 0 || c.suspends == 0 {
		t.Fatalf("%d switches, %d of them with a suspension: the run did not exercise the protocol", c.switches, c.suspends)
	}
	t.Logf("%d switches, %d suspensions", c.switches, c.suspends)
}
