package benchplot

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"

	"github.com/goarmci/goarmci/bench"
)

// eventColor is the colour of the events' vertical lines and their names.
var eventColor = color.Gray{Y: 90}

// WriteTimeline plots each series' bandwidth (MB/s, one step per operation, from the previous
// operation's end to its own) against the time since the first operation (s), with a dashed
// vertical line per event named at its top, the
// legend to the right, and saves it (PNG or any extension gonum/plot knows) at 20×11 cm.
// Errors wrap bench.ErrOptions when there is nothing to plot.
func WriteTimeline(path, title string, series []bench.Series, events []bench.Event) error {
	p := plot.New()
	style(p)
	p.Title.Text = title
	p.X.Label.Text = "Time since the first operation (s)"
	p.Y.Label.Text = AxisLabel("MB/s") + ", per operation"
	p.X.Tick.Marker = ValueTicks{}
	p.Y.Tick.Marker = ValueTicks{}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = lightGray, lightGray
	p.Add(grid)
	leg := newLegend()
	n := 0
	top, end := 0.0, 0.0
	for i, s := range series {
		var xys plotter.XYs
		for k := range min(len(s.TL.End), len(s.TL.BW)) {
			xys = append(xys, plotter.XY{X: s.TL.End[k] / 1e3, Y: s.TL.BW[k]})
			top, end = max(top, s.TL.BW[k]), max(end, s.TL.End[k]/1e3)
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		// Each point is an operation's end and its bandwidth over the operation: held back to
		// the previous end, a stall reads as a long low step rather than a slope.
		l.StepStyle = plotter.PreStep
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		l.Width = vg.Points(1.2)
		p.Add(l)
		leg.Add(s.Name, l)
		n++
	}
	if n == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	// Room above the data for the events' names.
	p.Y.Min, p.Y.Max = 0, max(top, 1)*1.15
	var names plotter.XYLabels
	for _, e := range events {
		x := e.Ms / 1e3
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: p.Y.Max}})
		if err != nil {
			return err
		}
		l.Color = eventColor
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		names.XYs = append(names.XYs, plotter.XY{X: x, Y: p.Y.Max})
		names.Labels = append(names.Labels, " "+e.Name)
		end = max(end, x)
	}
	if len(names.Labels) > 0 {
		lb, err := plotter.NewLabels(names)
		if err != nil {
			return err
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Color = eventColor
			lb.TextStyle[i].Font.Size = vg.Points(9)
			lb.TextStyle[i].YAlign = text.YTop
		}
		p.Add(lb)
	}
	p.X.Min, p.X.Max = 0, end
	if n == 1 {
		n = 0
	}
	return save(p, leg, n, path)
}
