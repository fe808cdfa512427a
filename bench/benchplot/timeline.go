package benchplot

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/goarmci/goarmci/bench"
)

// WriteTimeline plots bandwidth (MB/s) against time (s) for every series, with a dashed
// vertical line per event, and saves it (PNG or any extension gonum/plot knows) at 16×10 cm.
// Errors wrap bench.ErrOptions when there is nothing to plot.
func WriteTimeline(path, title string, series []bench.Series, events []bench.Event) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Time (s)"
	p.Y.Label.Text = "Bandwidth (MB/s)"
	var args []any
	top := 0.0
	for _, s := range series {
		var xys plotter.XYs
		for i := range min(len(s.TL.End), len(s.TL.BW)) {
			xys = append(xys, plotter.XY{X: s.TL.End[i] / 1e3, Y: s.TL.BW[i]})
			top = max(top, s.TL.BW[i])
		}
		if len(xys) > 0 {
			args = append(args, s.Name, xys)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return err
	}
	for _, e := range events {
		l, err := plotter.NewLine(plotter.XYs{{X: e.Ms / 1e3, Y: 0}, {X: e.Ms / 1e3, Y: top * 1.05}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 110}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(e.Name, l)
	}
	p.Y.Min = 0
	p.Legend.Top = true
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}
