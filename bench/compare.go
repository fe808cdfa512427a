package bench

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/goarmci/goarmci/bench/progress"
)

// System is one contender of a comparison: goarmci or a peer. Run performs one complete run
// and returns its table (the first column is the figure compared).
type System struct {
	Name string
	Run  func(ctx context.Context) (*Result, error)
	// Extra are further columns of the system's own table compared as systems of their own,
	// from the same runs: the -baseline limits (ColTCPStream as "socket", ...) measured between
	// the same two ranks in the same job as goarmci's figure.
	Extra []ExtraColumn
}

// ExtraColumn is a column of a system's table (Col) shown as a system named Name.
type ExtraColumn struct{ Col, Name string }

// ExtraSamples are the figures of one ExtraColumn over the runs of its system.
type ExtraSamples struct {
	ExtraColumn
	Vals map[int][]float64
}

// Samples are the figures Alternate gathered: per system, per row key (size or ranks), one
// figure per successful run.
type Samples struct {
	keys   []int               // the first system's row keys, in its order
	Vals   []map[int][]float64 // per system
	Failed []bool              // per system: left out after a failed run
	Extra  []ExtraSamples      // the systems' Extra columns found in their tables
}

// Alternate runs every system runs times, alternating (run k starts with system k mod n, so no
// system always runs on a warm or a cold machine), and gathers the first column of every row.
// A system other than the first that fails is reported on log and left out; the first failing
// is an error. prog (nil: none) is told of each run as it starts and ends ("run 3/5 goarmci
// done"): one step per run, runs × len(systems) in all, less the runs a left-out system skips.
func Alternate(ctx context.Context, name string, systems []System, runs int, log io.Writer, prog *progress.Bar) (*Samples, error) {
	if len(systems) == 0 || runs < 1 {
		return nil, fmt.Errorf("%w: compare needs a system and a run", ErrOptions)
	}
	s := &Samples{Vals: make([]map[int][]float64, len(systems)), Failed: make([]bool, len(systems))}
	for k := range runs {
		for j := range systems {
			i := (k + j) % len(systems)
			if s.Failed[i] {
				continue
			}
			run := fmt.Sprintf("run %d/%d %s", k+1, runs, systems[i].Name)
			prog.Start(run)
			res, err := systems[i].Run(ctx)
			if err == nil && len(res.Rows) == 0 {
				err = fmt.Errorf("%w: no rows", ErrParse)
			}
			if err != nil {
				if i == 0 {
					return nil, fmt.Errorf("bench: compare %s: %s: %w", name, systems[i].Name, err)
				}
				fmt.Fprintf(log, "goarmci: bench: %s: %s left out: %v\n", name, systems[i].Name, err)
				s.Failed[i] = true
				prog.AddTotal(-(runs - k - 1))
				prog.Step(run + " failed, left out")
				continue
			}
			if s.Vals[i] == nil {
				s.Vals[i] = map[int][]float64{}
			}
			for _, row := range res.Rows {
				if len(row.Values) > 0 {
					s.Vals[i][row.Size] = append(s.Vals[i][row.Size], row.Values[0])
				}
			}
			for _, x := range systems[i].Extra {
				col := slices.Index(res.Columns, x.Col)
				if col < 0 {
					continue
				}
				k := slices.IndexFunc(s.Extra, func(e ExtraSamples) bool { return e.ExtraColumn == x })
				if k < 0 {
					s.Extra = append(s.Extra, ExtraSamples{ExtraColumn: x, Vals: map[int][]float64{}})
					k = len(s.Extra) - 1
				}
				for _, row := range res.Rows {
					if col < len(row.Values) {
						s.Extra[k].Vals[row.Size] = append(s.Extra[k].Vals[row.Size], row.Values[col])
					}
				}
			}
			if i == 0 && s.keys == nil {
				for _, row := range res.Rows {
					s.keys = append(s.keys, row.Size)
				}
			}
			prog.Step(run + " done")
		}
	}
	return s, nil
}

// live returns the indices of the systems that did not fail.
func (s *Samples) live() []int {
	var live []int
	for i, f := range s.Failed {
		if !f {
			live = append(live, i)
		}
	}
	return live
}

// Compare runs the systems as Alternate does and returns one table: per size, each system's
// median, minimum and maximum over its runs (columns "NAME", "NAME min", "NAME max"; the
// systems' Extra columns after them, as systems of their own), then the first system's ratio
// of medians to each other system ("goarmci/NAME"). prog (nil: none) follows the runs as in
// Alternate.
func Compare(ctx context.Context, name string, systems []System, runs int, log io.Writer, prog *progress.Bar) (*Result, error) {
	s, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	smp, err := Alternate(ctx, name, systems, runs, log, prog)
	if err != nil {
		return nil, err
	}
	live := smp.live()
	unit := map[Kind]string{Latency: ColLatency, Bandwidth: ColBandwidth, Flops: ColGFlops}[s.Kind]
	out := &Result{
		Name:     name,
		Title:    s.Title + " - goarmci vs peers",
		KeyLabel: "Size",
		Header: []string{
			fmt.Sprintf("Figure: %s, median of %d runs per system, runs alternating; min and max over the runs", unit, runs),
			"Ratio: " + systems[0].Name + " / peer, of the medians (" + betterDoc(s.Kind) + ")",
		},
	}
	switch {
	case name == "barrier":
		out.KeyLabel = "Ranks"
	case s.Kind == Flops:
		out.KeyLabel = "N"
	}
	type col struct {
		name string
		vals map[int][]float64
	}
	var cols []col
	for _, i := range live {
		cols = append(cols, col{systems[i].Name, smp.Vals[i]})
	}
	for _, x := range smp.Extra {
		cols = append(cols, col{x.Name, x.Vals})
	}
	for _, c := range cols {
		out.Columns = append(out.Columns, c.name, c.name+" min", c.name+" max")
	}
	for _, c := range cols[1:] {
		out.Columns = append(out.Columns, cols[0].name+"/"+c.name)
	}
	for _, size := range smp.keys {
		row := Row{Size: size}
		med := make([]float64, len(cols))
		for k, c := range cols {
			v := c.vals[size]
			med[k] = Median(v)
			lo, hi := Range(v)
			row.Values = append(row.Values, med[k], lo, hi)
		}
		for k := range cols[1:] {
			row.Values = append(row.Values, Ratio(med[0], med[k+1]))
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// Ratio returns a/b, 0 when b is not positive.
func Ratio(a, b float64) float64 {
	if b > 0 {
		return a / b
	}
	return 0
}

func betterDoc(k Kind) string {
	switch k {
	case Bandwidth:
		return "bandwidth: above 1 = goarmci faster"
	case Flops:
		return "GFLOP/s: above 1 = goarmci faster"
	}
	return "latency: below 1 = goarmci faster"
}

// Median returns the median of v (the mean of the middle two for an even count), 0 for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Range returns the smallest and the largest of v, (0, 0) for none.
func Range(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return 0, 0
	}
	return slices.Min(v), slices.Max(v)
}
