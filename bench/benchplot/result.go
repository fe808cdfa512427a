// Package benchplot draws bench results with gonum/plot: OSU tables against the message size
// and bandwidth timelines with their events. It is kept out of package bench so that programs
// that run benchmarks (goarmci itself) do not compile the plotting stack; cmd/goarmci-plot is
// the command that uses it.
//
// A figure says what it shows without its table: the title names the benchmark, the
// synchronization mode, the transport and the ranks; the size axis is logarithmic in powers of
// two labelled in B/KiB/MiB; the value axis is labelled with its quantity and unit (latency in
// µs, bandwidth in MB/s = 10^6 B/s) and has labelled ticks whatever the data's range; the legend
// stands to the right of the data, never over it.
package benchplot

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"

	"github.com/goarmci/goarmci/bench"
)

// Render draws one request: its Result if it has one, else its timeline.
func Render(req bench.PlotRequest) error {
	if req.Path == "" {
		return fmt.Errorf("%w: plot request without a path", bench.ErrOptions)
	}
	if req.Result != nil {
		return WriteResult(req.Result, req.Path)
	}
	return WriteTimeline(req.Path, req.Title, req.Series, req.Events)
}

// Series is one system or configuration of a result figure: a value per row of the result
// (NaN: none) and, for comparisons, the range over the runs (Lo and Hi, nil without).
type Series struct {
	Name   string
	Values []float64
	Lo, Hi []float64
}

// Figure is what WriteResult draws for a result, decided from the table alone.
type Figure struct {
	Title  string    // two lines: the table's title; benchmark, sync mode, transport, ranks
	XLabel string    // "Message size" or the key's name ("Ranks"); Categorical: "System" or "Configuration"
	YLabel string    // quantity and unit: "Latency (µs)", "Bandwidth (MB/s)"
	Keys   []float64 // the rows' keys: message sizes in bytes, or rank counts
	Series []Series
	// SizeAxis: the keys are message sizes, drawn on a log2 axis with SizeTicks.
	SizeAxis bool
	// LogY: the values span a max/min ratio of 30 or more, drawn on a log axis; else a linear axis
	// from 0.
	LogY bool
	// Categorical: at most two rows, drawn as one column of markers per series (the series'
	// names along the x axis) instead of lines over two points or one.
	Categorical bool
}

// logSpan is the smallest max/min ratio of a figure's values that gets a logarithmic value axis.
const logSpan = 30

// ResultFigure decides the figure of r: which columns are series (a comparison's "NAME min" and
// "NAME max" become NAME's range, its "goarmci/NAME" ratios and columns of another unit are
// left out), the labels, the title and the scales. Errors wrap bench.ErrOptions when there is
// nothing to plot.
func ResultFigure(r *bench.Result) (Figure, error) {
	f := Figure{XLabel: r.KeyLabel}
	if f.XLabel == "" || f.XLabel == "Size" {
		f.XLabel, f.SizeAxis = "Message size", true
	}
	for _, row := range r.Rows {
		f.Keys = append(f.Keys, float64(row.Size))
		if row.Size <= 0 {
			f.SizeAxis = false
		}
	}
	col := func(i int) []float64 {
		out := make([]float64, len(r.Rows))
		for k, row := range r.Rows {
			out[k] = math.NaN()
			if i < len(row.Values) && !math.IsInf(row.Values[i], 0) {
				out[k] = row.Values[i]
			}
		}
		return out
	}
	unit := ""
	for _, c := range r.Columns {
		if unit = unitOf(c); unit != "" {
			break
		}
	}
	byName := map[string]int{}
	for i, c := range r.Columns {
		if base, ok := strings.CutSuffix(c, " min"); ok {
			if k, ok := byName[base]; ok {
				f.Series[k].Lo = col(i)
				continue
			}
		}
		if base, ok := strings.CutSuffix(c, " max"); ok {
			if k, ok := byName[base]; ok {
				f.Series[k].Hi = col(i)
				continue
			}
		}
		if len(f.Series) > 0 {
			if other, ok := strings.CutPrefix(c, f.Series[0].Name+"/"); ok {
				if _, known := byName[other]; known {
					continue // a ratio of two series
				}
			}
		}
		if unitOf(c) != unit {
			continue // another quantity (GA's bandwidth beside its latency, On/off ratios)
		}
		byName[c] = len(f.Series)
		f.Series = append(f.Series, Series{Name: c, Values: col(i)})
	}
	if unit != "" {
		for i := range f.Series {
			f.Series[i].Name = stripUnit(f.Series[i].Name)
		}
	} else {
		unit = resultUnit(r)
	}
	f.YLabel = AxisLabel(unit)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range f.Series {
		for _, vs := range [][]float64{s.Values, s.Lo, s.Hi} {
			for _, v := range vs {
				if v > 0 {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
		}
	}
	if len(f.Series) == 0 || len(r.Rows) == 0 || math.IsInf(lo, 1) {
		return f, fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	f.LogY = hi/lo >= logSpan
	f.Categorical = len(r.Rows) <= 2
	if f.Categorical {
		f.XLabel = "Configuration"
		if f.Series[0].Lo != nil {
			f.XLabel = "System"
		}
	}
	f.Title = resultTitle(r)
	if len(r.Rows) == 1 && f.SizeAxis {
		f.Title += ", " + FormatBytes(f.Keys[0])
	}
	for _, s := range f.Series {
		if s.Lo != nil && s.Hi != nil {
			f.Title += ", " + runsNote(r)
			break
		}
	}
	return f, nil
}

// runsNote says what a comparison's markers and bars are.
func runsNote(r *bench.Result) string {
	for _, h := range r.Header {
		if m := regexp.MustCompile(`median of (\d+) runs`).FindStringSubmatch(h); m != nil {
			return "median of " + m[1] + " runs, bars min to max"
		}
	}
	return "median, bars min to max"
}

// resultUnit is the unit of a table whose columns are systems or configurations without one:
// from the title ("... Test (MB/s)"), the "Figure:" header of a comparison, or the benchmark.
func resultUnit(r *bench.Result) string {
	if u := unitOf(strings.TrimSpace(r.Title)); u != "" {
		return u
	}
	for _, h := range r.Header {
		if rest, ok := strings.CutPrefix(h, "Figure: "); ok {
			if before, _, ok := strings.Cut(rest, ","); ok {
				if u := unitOf(before); u != "" {
					return u
				}
			}
		}
	}
	if s, err := bench.Lookup(r.Name); err == nil {
		if s.Kind == bench.Bandwidth {
			return unitOf(bench.ColBandwidth)
		}
		return unitOf(bench.ColLatency)
	}
	return ""
}

// tbfRe finds the rails and their rate in a scenario's "Testbed:" header line.
var tbfRe = regexp.MustCompile(`(\d+) veth rails, tbf (\S+) per rail`)

// resultTitle is a result figure's title: the table's title, then a line naming the benchmark, its
// synchronization mode, the transport and the ranks (from the result's fields, else its
// "Transport: shm, 2 ranks, sync lock" header line) and a scenario's rails and rate.
func resultTitle(r *bench.Result) string {
	t := strings.TrimSpace(strings.TrimPrefix(r.Title, "#"))
	sync, transport, ranks := r.Sync, r.Transport, r.Ranks
	rails := ""
	for _, h := range r.Header {
		if rest, ok := strings.CutPrefix(h, "Transport: "); ok {
			for i, part := range strings.Split(rest, ", ") {
				switch {
				case strings.HasSuffix(part, " ranks"):
					if ranks == 0 {
						ranks, _ = strconv.Atoi(strings.TrimSuffix(part, " ranks"))
					}
				case strings.HasPrefix(part, "sync "):
					if sync == "" {
						sync = strings.TrimPrefix(part, "sync ")
					}
				case i == 0 && transport == "":
					transport = part
				}
			}
		}
		if m := tbfRe.FindStringSubmatch(h); m != nil {
			rails = fmt.Sprintf("testbed of %s rails at %s each", m[1], m[2])
		}
	}
	var parts []string
	if r.Name != "" && !strings.ContainsAny(r.Name, " (") {
		parts = append(parts, r.Name)
	}
	if sync != "" && r.KeyLabel != "Ranks" {
		parts = append(parts, "sync "+sync)
	}
	if transport != "" {
		parts = append(parts, transport)
	}
	if ranks > 0 {
		parts = append(parts, fmt.Sprintf("%d ranks", ranks))
	}
	if rails != "" {
		parts = append(parts, rails)
	}
	if len(parts) == 0 {
		return t
	}
	return t + "\n" + strings.Join(parts, ", ")
}

// WriteResult draws r (ResultFigure) and saves it as a PNG (or any format gonum/plot knows by
// the file's extension: .svg, .pdf) of 20×11 cm, the legend to the right of the data. Errors
// wrap bench.ErrOptions when there is nothing to plot.
func WriteResult(r *bench.Result, path string) error {
	f, err := ResultFigure(r)
	if err != nil {
		return err
	}
	p, leg, n, err := f.plot()
	if err != nil {
		return err
	}
	return save(p, leg, n, path)
}

// style sets the fonts and the grid every figure shares.
func style(p *plot.Plot) {
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(10)
		a.Tick.Label.Font.Size = vg.Points(9)
	}
	p.X.Padding, p.Y.Padding = vg.Points(4), vg.Points(4)
}

// plot builds the gonum plot of f and its legend (n entries).
func (f Figure) plot() (*plot.Plot, plot.Legend, int, error) {
	p := plot.New()
	style(p)
	p.Title.Text = f.Title
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	leg := newLegend()
	n := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range f.Series {
		for _, vs := range [][]float64{s.Values, s.Lo, s.Hi} {
			for _, v := range vs {
				if v > 0 || !f.LogY && v >= 0 {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
		}
	}
	if f.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Min, p.Y.Max = lo/1.3, hi*1.3
	} else {
		p.Y.Min, p.Y.Max = 0, hi*1.08
	}
	p.Y.Tick.Marker = ValueTicks{Log: f.LogY}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = lightGray, lightGray
	p.Add(grid)
	ok := func(v float64) bool { return !math.IsNaN(v) && (v > 0 || !f.LogY && v >= 0) }
	if f.Categorical {
		names := make([]string, len(f.Series))
		for j, s := range f.Series {
			names[j] = s.Name
		}
		p.NominalX(names...)
		p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
		if len(names) > 4 {
			p.X.Tick.Label.Rotation = math.Pi / 6
			p.X.Tick.Label.XAlign = text.XRight
			p.X.Tick.Label.YAlign = text.YTop
		}
		grid.Vertical.Width = 0
		for k, key := range f.Keys {
			off := 0.0
			if len(f.Keys) > 1 {
				off = (float64(k) - float64(len(f.Keys)-1)/2) * 0.22
			}
			var xys plotter.XYs
			var bars []bar
			for j, s := range f.Series {
				if ok(s.Values[k]) {
					xys = append(xys, plotter.XY{X: float64(j) + off, Y: s.Values[k]})
					if s.Lo != nil && s.Hi != nil && ok(s.Lo[k]) && ok(s.Hi[k]) {
						bars = append(bars, bar{float64(j) + off, s.Values[k], s.Lo[k], s.Hi[k]})
					}
				}
			}
			if len(xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, leg, 0, err
			}
			sc.Shape = plotutil.Shape(k)
			sc.Color = plotutil.Color(k)
			sc.Radius = vg.Points(3.5)
			p.Add(sc)
			if eb := errorBars(bars, k); eb != nil {
				p.Add(eb)
			}
			if len(f.Keys) > 1 {
				name := formatValue(key)
				if f.SizeAxis {
					name = FormatBytes(key) + " messages"
				}
				leg.Add(name, sc)
				n++
			}
		}
		return p, leg, n, nil
	}
	if f.SizeAxis {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = SizeTicks{}
	} else {
		p.X.Tick.Marker = ValueTicks{}
	}
	for i, s := range f.Series {
		var xys plotter.XYs
		var bars []bar
		for k, key := range f.Keys {
			if ok(s.Values[k]) {
				xys = append(xys, plotter.XY{X: key, Y: s.Values[k]})
				if s.Lo != nil && s.Hi != nil && ok(s.Lo[k]) && ok(s.Hi[k]) {
					bars = append(bars, bar{key, s.Values[k], s.Lo[k], s.Hi[k]})
				}
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, leg, 0, err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Width = vg.Points(1.2)
		l.Dashes = plotutil.Dashes(i / 7)
		pts.Shape = plotutil.Shape(i)
		pts.Radius = vg.Points(2.5)
		p.Add(l, pts)
		if eb := errorBars(bars, i); eb != nil {
			p.Add(eb)
		}
		leg.Add(s.Name, l, pts)
		n++
	}
	if n == 1 {
		n = 0 // one series: the title and the axis say what it is
	}
	return p, leg, n, nil
}

// bar is one range of a comparison: at x, the median y from lo to hi.
type bar struct{ x, y, lo, hi float64 }

// errorBars draws the ranges in series i's colour (nil for none).
func errorBars(bars []bar, i int) *plotter.YErrorBars {
	if len(bars) == 0 {
		return nil
	}
	eb := &plotter.YErrorBars{CapWidth: vg.Points(4), LineStyle: plotter.DefaultLineStyle}
	for _, b := range bars {
		eb.XYs = append(eb.XYs, plotter.XY{X: b.x, Y: b.y})
		eb.YErrors = append(eb.YErrors, struct{ Low, High float64 }{b.y - b.lo, b.hi - b.y})
	}
	eb.Color = plotutil.Color(i)
	return eb
}
