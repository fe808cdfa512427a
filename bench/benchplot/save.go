package benchplot

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Figure size (PNG at gonum/plot's default 96 dpi: 756×416 pixels).
const (
	figWidth  = 20 * vg.Centimeter
	figHeight = 11 * vg.Centimeter
)

var lightGray = color.Gray{Y: 225}

// newLegend is the legend style of every figure: 9 pt, entries top-down from the left.
func newLegend() plot.Legend {
	leg := plot.NewLegend()
	leg.TextStyle.Font.Size = vg.Points(9)
	leg.Top, leg.Left = true, true
	leg.Padding = vg.Points(2)
	return leg
}

// save draws p, with leg (n entries; none when 0) in a column of its own to the right of the
// plot, top-aligned with the data, and writes the file in the format of its extension.
func save(p *plot.Plot, leg plot.Legend, n int, path string) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	c, err := draw.NewFormattedCanvas(figWidth, figHeight, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	plotC := dc
	if n > 0 {
		gap := vg.Points(8)
		lw := leg.Rectangle(dc).Size().X + gap
		plotC = draw.Crop(dc, 0, -lw, 0, 0)
		top := vg.Length(0)
		if p.Title.Text != "" {
			top = p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
		}
		leg.Draw(draw.Crop(dc, figWidth-lw+gap/2, 0, 0, -top-vg.Points(4)))
	}
	p.Draw(plotC)
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(file); err != nil {
		file.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return file.Close()
}
