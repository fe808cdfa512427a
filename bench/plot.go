package bench

import (
	"fmt"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePNG plots every column of r against the size (both axes logarithmic; sizes of 0 and
// values ≤ 0 are left out) and saves it as a PNG (or any format gonum/plot knows by the
// file's extension) of 16×10 cm.
func (r *Result) WritePNG(path string) error {
	p := plot.New()
	p.Title.Text = strings.TrimSpace(strings.TrimPrefix(r.Title, "#"))
	p.X.Label.Text = r.keyLabel()
	if r.keyLabel() == "Size" {
		p.X.Label.Text = "Size (bytes)"
	}
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
	for i, c := range r.Columns {
		var xys plotter.XYs
		for _, row := range r.Rows {
			if i < len(row.Values) && row.Values[i] > 0 {
				xys = append(xys, plotter.XY{X: float64(row.Size), Y: row.Values[i]})
			}
		}
		if len(xys) > 0 {
			args = append(args, c, xys)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: nothing to plot", ErrOptions)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	p.Legend.Top = true
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}
