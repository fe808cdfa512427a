package bench

import (
	"fmt"
	"math"
)

// MergeColumns turns per-configuration results (one per rail count and policy, as RunRails
// returns them) into one result per column: for cols[i], a table titled titles[i] whose columns
// are the configurations (names) and whose rows are the sizes of runs[0]; rows where no
// configuration has a value (> 0) are left out. header goes on every table.
func MergeColumns(runs []*Result, names, cols, titles, header []string) []*Result {
	var out []*Result
	if len(runs) == 0 {
		return out
	}
	for i, c := range cols {
		r := &Result{Name: c, Title: titles[i], Header: header, KeyLabel: runs[0].keyLabel(), Columns: names,
			Transport: runs[0].Transport, Ranks: runs[0].Ranks}
		for k, row := range runs[0].Rows {
			nr := Row{Size: row.Size, Values: make([]float64, len(runs))}
			any := false
			for j, run := range runs {
				if v := run.column(c); k < len(v) {
					nr.Values[j] = v[k]
					any = any || v[k] > 0
				}
			}
			if any {
				r.Rows = append(r.Rows, nr)
			}
		}
		out = append(out, r)
	}
	return out
}

// RatioTable compares every configuration with the first one-rail run: per bandwidth size, put
// and get bandwidth as a multiple of one rail's and as a percentage of the summed tbf rate of
// its rails (summed(n) MB/s; 0 = unlimited, no percentage); per latency size, put and get
// latency as a fraction of one rail's. rails[i] is the rail count of runs[i].
func RatioTable(runs []*Result, names []string, rails []int, summed func(n int) float64) *Table {
	t := &Table{Name: "rails_ratio", Title: "# goarmci multi-rail scaling against one rail", Key: "Config"}
	base := -1
	for i, n := range rails {
		if n == 1 {
			base = i
			break
		}
	}
	if len(runs) == 0 {
		return t
	}
	type col struct {
		name string
		val  func(i, k int) float64
	}
	var cols []col
	get := func(i, k int, c string) float64 {
		v := runs[i].column(c)
		if k < len(v) {
			return v[k]
		}
		return 0
	}
	ratio := func(a, b float64) float64 {
		if a > 0 && b > 0 {
			return a / b
		}
		return math.NaN()
	}
	for k, row := range runs[0].Rows {
		k, size := k, row.Size
		if get(0, k, ColPutBW) > 0 {
			for _, c := range []string{ColPutBW, ColGetBW} {
				c := c
				op := map[string]string{ColPutBW: "Put", ColGetBW: "Get"}[c]
				if base >= 0 {
					cols = append(cols, col{fmt.Sprintf("%s %s x1rail", op, sizeName(size)), func(i, k2 int) float64 {
						return ratio(get(i, k, c), get(base, k, c))
					}})
				}
				cols = append(cols, col{fmt.Sprintf("%s %s %%rate", op, sizeName(size)), func(i, k2 int) float64 {
					if s := summed(rails[i]); s > 0 && get(i, k, c) > 0 {
						return 100 * get(i, k, c) / s
					}
					return math.NaN()
				}})
			}
		}
		if get(0, k, ColPutLat) > 0 && base >= 0 {
			for _, c := range []string{ColPutLat, ColGetLat} {
				c := c
				op := map[string]string{ColPutLat: "Put", ColGetLat: "Get"}[c]
				cols = append(cols, col{fmt.Sprintf("%s lat %s /1rail", op, sizeName(size)), func(i, k2 int) float64 {
					return ratio(get(i, k, c), get(base, k, c))
				}})
			}
		}
	}
	for _, c := range cols {
		t.Columns = append(t.Columns, c.name)
	}
	for i := range runs {
		r := TableRow{Key: names[i]}
		for _, c := range cols {
			r.Values = append(r.Values, c.val(i, 0))
		}
		t.Rows = append(t.Rows, r)
	}
	return t
}

// sizeName prints a size as 8B, 64K, 1M.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// HotspotRow summarizes one policy's timeline around a rail's rate cut at event ms ([Vishnu07]
// §7.4, §8: adaptive striping and BSS move load off the hot spot): median bandwidth before and
// after (the last half of the time after the cut), that as a percentage of newSum (MB/s), after
// how many operations and ms 3 operations in a row reach share × newSum, and the slow rail's
// share of the stripes before the cut and in the last half after it (%).
func HotspotRow(policy string, tl Timeline, event, newSum, share float64, slowRail int) TableRow {
	last := 0.0
	if n := len(tl.End); n > 0 {
		last = tl.End[n-1]
	}
	before, _ := tl.median(0, event)
	late := event + (last-event)/2
	after, _ := tl.median(late, math.Inf(1))
	ops, ms, ok := tl.recovery(event, share*newSum, 3)
	r := TableRow{Key: policy, Values: []float64{before, after, math.NaN(), math.NaN(), math.NaN(),
		100 * tl.stripeShare(slowRail, 0, event), 100 * tl.stripeShare(slowRail, late, math.Inf(1))}}
	if newSum > 0 {
		r.Values[2] = 100 * after / newSum
	}
	if ok {
		r.Values[3], r.Values[4] = float64(ops), ms
	}
	return r
}

// NPBReport reads a NAS report (rank 0's output, ParseNPB): the " Time in seconds = T" value
// (NaN when absent) and whether " Verification = SUCCESSFUL" is there.
func NPBReport(out string) (seconds float64, verified bool) {
	r := ParseNPB(out)
	return r.Seconds, r.Verified
}
