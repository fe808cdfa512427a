package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/goarmci/goarmci/rma"
)

// RunTimeline issues operations from rank 0 to rank 1 for o.DurationMs and records every one:
// an operation is o.Window ARMCI_NbPut (o.Op "put") or ARMCI_NbGet ("get") of o.Size bytes,
// waited for (and fenced, for puts). It is the timeline of [Vishnu09 Fig. 10/11] (bandwidth per
// iteration with a fault in the middle) and of the hot-spot experiment of [Vishnu07 §7.4] (a rail
// slowed mid-run): the launcher fires the event while the operations flow. started, when not
// nil, is called on rank 0 just before the first timed operation with its wall-clock time (the
// launcher places its events on the same clock).
//
// The Result has one row per operation (Size = the operation's index from 0) with columns
// "Time (ms)" (from the start to the operation's end), "Op (ms)" (its duration), ColBandwidth
// (MB/s = 10^6 B/s) and "Stripes rail r" for every rail r (work requests posted on that
// subchannel during the operation); TimelineOf reads them back. The header's "Start:" line is the start in Unix
// nanoseconds. Collective; rank 0 returns the Result, the others nil. Errors: ErrOptions,
// ErrRanks, and rma's errors (a fault the runtime could not mask ends the run with its error).
func RunTimeline(ctx context.Context, rt *rma.Runtime, o ScenarioOptions, started func(time.Time)) (*Result, error) {
	o, err := o.Check(ScenarioFault)
	if err != nil {
		return nil, err
	}
	if rt.Size() < 2 {
		return nil, fmt.Errorf("%w: timeline needs 2 ranks, the job has %d", ErrRanks, rt.Size())
	}
	seg, err := rt.Malloc(ctx, o.Window*o.Size)
	if err != nil {
		return nil, err
	}
	defer seg.Free(ctx)
	if err := rt.Barrier(ctx); err != nil {
		return nil, err
	}
	var rows []Row
	var start time.Time
	peer := target
	if rt.Rank() == target {
		peer = origin
	}
	ch := rt.Rails(peer)
	subs := 0
	if ch != nil {
		subs = ch.Len()
	}
	if rt.Rank() == origin {
		buf := make([]byte, o.Size)
		for i := range buf {
			buf[i] = byte(i * 13)
		}
		hs := make([]*rma.Handle, 0, o.Window)
		op := func() error {
			hs = hs[:0]
			for k := 0; k < o.Window; k++ {
				var h *rma.Handle
				var err error
				if o.Op == "get" {
					h, err = rt.NbGet(ctx, seg, target, k*o.Size, buf)
				} else {
					h, err = rt.NbPut(ctx, buf, seg, target, k*o.Size)
				}
				if err != nil {
					return err
				}
				hs = append(hs, h)
			}
			for _, h := range hs {
				if err := h.Wait(ctx); err != nil {
					return err
				}
			}
			if o.Op == "put" {
				return rt.Fence(ctx, target)
			}
			return nil
		}
		if err := op(); err != nil { // warm-up
			return nil, err
		}
		posted := make([]int64, subs)
		for s := range posted {
			posted[s] = ch.Posted(s)
		}
		start = time.Now()
		if started != nil {
			started(start)
		}
		end := start.Add(time.Duration(o.DurationMs) * time.Millisecond)
		prev := start
		for i := 0; prev.Before(end); i++ {
			if err := op(); err != nil {
				return nil, fmt.Errorf("bench: timeline operation %d at %v: %w", i, prev.Sub(start).Round(time.Millisecond), err)
			}
			now := time.Now()
			d := now.Sub(prev)
			row := Row{Size: i, Values: make([]float64, 3+subs)}
			row.Values[0] = ms(now.Sub(start))
			row.Values[1] = ms(d)
			row.Values[2] = float64(o.Size*o.Window) / d.Seconds() / 1e6
			for s := 0; s < subs; s++ {
				p := ch.Posted(s)
				row.Values[3+s] = float64(p - posted[s])
				posted[s] = p
			}
			rows = append(rows, row)
			prev = now
		}
	}
	if err := rt.Barrier(ctx); err != nil {
		return nil, err
	}
	if rt.Rank() != origin {
		return nil, nil
	}
	cols := []string{colTime, colOpTime, ColBandwidth}
	for s := 0; s < subs; s++ {
		cols = append(cols, colStripes(s))
	}
	name := map[string]string{"put": "ARMCI_NbPut", "get": "ARMCI_NbGet"}[o.Op]
	return &Result{
		Name: "timeline_" + o.Op, Title: fmt.Sprintf("# goarmci %s Bandwidth Timeline", name), KeyLabel: "Iteration",
		Columns: cols, Rows: rows, Transport: rt.TransportTo(target), Ranks: rt.Size(),
		Header: []string{
			fmt.Sprintf("Start: %d", start.UnixNano()),
			fmt.Sprintf("Rails: %d, policy %s", subs, policyName(ch.Policy())),
			fmt.Sprintf("Operation: %d x %s of %d bytes, waited%s", o.Window, name, o.Size, map[bool]string{true: " + ARMCI_Fence"}[o.Op == "put"]),
		},
	}, nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// Timeline is a timeline Result's operations: end times (ms from the start), durations (ms) and
// bandwidths (MB/s), and the stripes posted per rail.
type Timeline struct {
	End, Dur, BW []float64
	Stripes      [][]float64 // [rail][operation]
}

// TimelineOf reads the columns of a RunTimeline result. Errors wrap ErrParse when a column is
// missing.
func TimelineOf(r *Result) (Timeline, error) {
	var tl Timeline
	tl.End, tl.Dur, tl.BW = r.column(colTime), r.column(colOpTime), r.column(ColBandwidth)
	if tl.End == nil || tl.Dur == nil || tl.BW == nil {
		return tl, fmt.Errorf("%w: not a timeline (columns %v)", ErrParse, r.Columns)
	}
	for s := 0; ; s++ {
		c := r.column(colStripes(s))
		if c == nil {
			break
		}
		tl.Stripes = append(tl.Stripes, c)
	}
	return tl, nil
}

// median returns the median bandwidth (MB/s) of the operations that ended in [from, to) ms, and
// how many there were (NaN, 0 for none).
func (tl Timeline) median(from, to float64) (float64, int) {
	var v []float64
	for i, e := range tl.End {
		if e >= from && e < to {
			v = append(v, tl.BW[i])
		}
	}
	if len(v) == 0 {
		return math.NaN(), 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], len(v)
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, len(v)
}

// recovery finds the first operation that started at or after event (ms) from which sustain
// consecutive operations (at least 1) each reach target MB/s. It returns that operation's
// index counted from the first operation started after the event (0 = at once), the time from
// the event to that operation's start (ms), and false when the timeline never recovers.
func (tl Timeline) recovery(event, target float64, sustain int) (ops int, after float64, ok bool) {
	sustain = max(sustain, 1)
	first := -1
	for i := range tl.End {
		if tl.End[i]-tl.Dur[i] >= event {
			first = i
			break
		}
	}
	if first < 0 {
		return 0, 0, false
	}
	for i := first; i+sustain <= len(tl.End); i++ {
		good := true
		for k := i; k < i+sustain; k++ {
			if tl.BW[k] < target {
				good = false
				break
			}
		}
		if good {
			return i - first, tl.End[i] - tl.Dur[i] - event, true
		}
	}
	return 0, 0, false
}

// stripeShare returns the share (0..1) of the stripes posted on rail of all stripes posted by
// the operations that ended in [from, to) ms (NaN when none were posted).
func (tl Timeline) stripeShare(rail int, from, to float64) float64 {
	if rail < 0 || rail >= len(tl.Stripes) {
		return math.NaN()
	}
	var mine, all float64
	for i, e := range tl.End {
		if e < from || e >= to {
			continue
		}
		for r := range tl.Stripes {
			all += tl.Stripes[r][i]
		}
		mine += tl.Stripes[rail][i]
	}
	if all == 0 {
		return math.NaN()
	}
	return mine / all
}

// FaultStats summarizes a timeline around a cable pulled at Down ms and plugged back at Up ms
// [Vishnu09 Fig. 10/11]. Times in ms, bandwidths in MB/s.
type FaultStats struct {
	Before float64 // median bandwidth before the pull
	// During: the bytes of the operations that ended while the cable was out, divided by the
	// time it was out (the effective bandwidth of the fault period, stalls included).
	During float64
	After  float64 // median bandwidth of the last third of the time after the plug-in
	// Detect: from the pull to the end of the first operation that ended after it and took
	// more than 3× the median duration before (the operation that hit the fault, completed once
	// the runtime noticed and migrated or re-issued its work requests); if no operation was that
	// slow, to the end of the first operation after the pull.
	Detect float64
	// Stall: the longest operation that overlaps the down time, minus the median duration of
	// operations before the pull (the extra time the fault cost at once).
	Stall float64
	// Failover: from the pull to the start of the first 3 consecutive operations, started while
	// the cable was out, at ≥ 80 % of Before × survivors (the share of the bandwidth the rails
	// left can carry); NaN if none.
	Failover float64
	// Full: from the plug-in to the start of the first 3 consecutive operations at ≥ 90 % of
	// Before (NaN if never).
	Full float64
}

// Fault computes FaultStats for a pull at down and a plug-in at up (ms on the timeline's
// clock); survivors (0..1) is the share of the bandwidth left while the cable is out
// ((R-1)/R for R equal rails).
func (tl Timeline) Fault(down, up, survivors float64) FaultStats {
	var st FaultStats
	st.Before, _ = tl.median(0, down)
	var durs []float64
	for i, e := range tl.End {
		if e < down {
			durs = append(durs, tl.Dur[i])
		}
	}
	medDur := 0.0
	if len(durs) > 0 {
		slices.Sort(durs)
		medDur = durs[len(durs)/2]
	}
	st.Detect, st.Stall = math.NaN(), math.NaN()
	first := math.NaN()
	var bytes float64 // MB/s × ms = 10^3 bytes
	for i, e := range tl.End {
		s := e - tl.Dur[i]
		if e > down && math.IsNaN(first) {
			first = e - down
		}
		if e > down && math.IsNaN(st.Detect) && tl.Dur[i] > 3*medDur {
			st.Detect = e - down
		}
		if e > down && s <= up {
			if math.IsNaN(st.Stall) || tl.Dur[i]-medDur > st.Stall {
				st.Stall = tl.Dur[i] - medDur
			}
		}
		if e > down && e <= up {
			bytes += tl.BW[i] * tl.Dur[i]
		}
	}
	if math.IsNaN(st.Detect) {
		st.Detect = first
	}
	st.During = math.NaN()
	if up > down {
		st.During = bytes / (up - down)
	}
	last := 0.0
	if n := len(tl.End); n > 0 {
		last = tl.End[n-1]
	}
	st.After, _ = tl.median(up+2*(last-up)/3, math.Inf(1))
	st.Full = math.NaN()
	if _, after, ok := tl.recovery(up, 0.9*st.Before, 3); ok {
		st.Full = after
	}
	st.Failover = math.NaN()
	if _, after, ok := tl.recovery(down, 0.8*survivors*st.Before, 3); ok && down+after < up {
		st.Failover = after
	}
	return st
}
