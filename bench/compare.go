package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
)

// System is one contender of a comparison: goarmci or a peer. Run performs one complete run
// and returns its table (the first column is the figure compared).
type System struct {
	Name string
	Run  func(ctx context.Context) (*Result, error)
}

// Compare runs every system runs times, alternating (run k starts with system k mod n, so no
// system always runs on a warm or a cold machine), and returns one table: per size the median
// of each system's figure, then the first system's ratio to each other system. A system other
// than the first that fails is reported on log and left out; the first failing is an error.
func Compare(ctx context.Context, name string, systems []System, runs int, log io.Writer) (*Result, error) {
	if len(systems) == 0 || runs < 1 {
		return nil, fmt.Errorf("%w: compare needs a system and a run", ErrOptions)
	}
	s, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	vals := make([]map[int][]float64, len(systems)) // per system: size → figures
	var sizes []int
	failed := make([]bool, len(systems))
	for k := range runs {
		for j := range systems {
			i := (k + j) % len(systems)
			if failed[i] {
				continue
			}
			res, err := systems[i].Run(ctx)
			if err == nil && len(res.Rows) == 0 {
				err = fmt.Errorf("%w: no rows", ErrParse)
			}
			if err != nil {
				if i == 0 {
					return nil, fmt.Errorf("bench: compare %s: %s: %w", name, systems[i].Name, err)
				}
				fmt.Fprintf(log, "goarmci: bench: %s: %s left out: %v\n", name, systems[i].Name, err)
				failed[i] = true
				continue
			}
			if vals[i] == nil {
				vals[i] = map[int][]float64{}
			}
			for _, row := range res.Rows {
				if len(row.Values) > 0 {
					vals[i][row.Size] = append(vals[i][row.Size], row.Values[0])
				}
			}
			if i == 0 && sizes == nil {
				for _, row := range res.Rows {
					sizes = append(sizes, row.Size)
				}
			}
		}
	}
	var live []int
	for i := range systems {
		if !failed[i] {
			live = append(live, i)
		}
	}
	unit := ColLatency
	if s.Kind == Bandwidth {
		unit = ColBandwidth
	}
	out := &Result{
		Name:     name,
		Title:    s.Title + " - goarmci vs peers",
		KeyLabel: "Size",
		Header: []string{
			fmt.Sprintf("Figure: %s, median of %d runs per system, runs alternating", unit, runs),
			"Ratio: " + systems[0].Name + " / peer (" + betterDoc(s.Kind) + ")",
		},
	}
	if name == "barrier" {
		out.KeyLabel = "Ranks"
	}
	for _, i := range live {
		out.Columns = append(out.Columns, systems[i].Name)
	}
	for _, i := range live[1:] {
		out.Columns = append(out.Columns, systems[0].Name+"/"+systems[i].Name)
	}
	for _, size := range sizes {
		row := Row{Size: size}
		med := make([]float64, len(live))
		for k, i := range live {
			med[k] = Median(vals[i][size])
			row.Values = append(row.Values, med[k])
		}
		for k := range live[1:] {
			r := 0.0
			if med[k+1] > 0 {
				r = med[0] / med[k+1]
			}
			row.Values = append(row.Values, r)
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

func betterDoc(k Kind) string {
	if k == Bandwidth {
		return "bandwidth: above 1 = goarmci faster"
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
