// Package benchplot draws bench results with gonum/plot: OSU tables against the message size
// and bandwidth timelines with their events. It is kept out of package bench so that programs
// that run benchmarks (goarmci itself) do not compile the plotting stack; cmd/goarmci-plot is
// the command that uses it.
package benchplot

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
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

// WriteResult plots every column of r against the size (both axes logarithmic; sizes of 0 and
// values ≤ 0 are left out) and saves it as a PNG (or any format gonum/plot knows by the
// file's extension) of 16×10 cm. Errors wrap bench.ErrOptions when there is nothing to plot.
func WriteResult(r *bench.Result, path string) error {
	p := plot.New()
	p.Title.Text = strings.TrimSpace(strings.TrimPrefix(r.Title, "#"))
	label := r.KeyLabel
	if label == "" || label == "Size" {
		label = "Size (bytes)"
	}
	p.X.Label.Text = label
	logX := true
	for _, row := range r.Rows {
		if row.Size <= 0 {
			logX = false
		}
	}
	if logX && len(r.Rows) > 1 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var args []any
	yMin, yMax := math.Inf(1), math.Inf(-1)
	for i, c := range r.Columns {
		var xys plotter.XYs
		for _, row := range r.Rows {
			if i < len(row.Values) && row.Values[i] > 0 && !math.IsInf(row.Values[i], 0) {
				xys = append(xys, plotter.XY{X: float64(row.Size), Y: row.Values[i]})
				yMin, yMax = min(yMin, row.Values[i]), max(yMax, row.Values[i])
			}
		}
		if len(xys) > 0 {
			args = append(args, c, xys)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	if yMin == yMax {
		// One value: gonum/plot would widen the range by ±1, below 0 on a log axis.
		p.Y.Min, p.Y.Max = yMin/2, yMax*2
	}
	p.Legend.Top = true
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}
