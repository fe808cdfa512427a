package benchplot

import (
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// SizeTicks marks a logarithmic axis of message sizes in bytes at the powers of two, labelled
// in binary units ("1 B", "4 KiB", "1 MiB"). When the range holds more than MaxLabels powers
// of two, only every 2nd, 4th, ... power (the exponents divisible by that step: 1 B, 16 B,
// 256 B, 4 KiB with a step of 4) is labelled, and the ends of the range when they are half a
// step and at least two powers from the next label; the others are minor ticks.
type SizeTicks struct {
	MaxLabels int // at most this many labels; 0 means 8
}

// Ticks returns the ticks of [lo, hi] (bytes); a range inside one power of two gets one tick
// at lo.
func (t SizeTicks) Ticks(lo, hi float64) []plot.Tick {
	maxLabels := t.MaxLabels
	if maxLabels <= 0 {
		maxLabels = 8
	}
	if !(lo > 0) || hi < lo {
		return nil
	}
	e0 := int(math.Ceil(math.Log2(lo) - 1e-9))
	e1 := int(math.Floor(math.Log2(hi) + 1e-9))
	if e1 < e0 {
		return []plot.Tick{{Value: lo, Label: FormatBytes(lo)}}
	}
	step := 1
	for (e1-e0)/step+1 > maxLabels {
		step *= 2
	}
	var ticks []plot.Tick
	for e := e0; e <= e1; e++ {
		v := math.Ldexp(1, e)
		tk := plot.Tick{Value: v}
		if e%step == 0 {
			tk.Label = FormatBytes(v)
		}
		ticks = append(ticks, tk)
	}
	// The ends of the range are labelled too when half a step or more from the next label.
	half := max(step/2, 2)
	if ticks[0].Label == "" && (e0+step-1)/step*step-e0 >= half {
		ticks[0].Label = FormatBytes(ticks[0].Value)
	}
	if last := &ticks[len(ticks)-1]; last.Label == "" && e1-e1/step*step >= half {
		last.Label = FormatBytes(last.Value)
	}
	return ticks
}

// FormatBytes writes a byte count with binary units: "512 B", "64 KiB", "1.5 MiB", "4 GiB".
func FormatBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	u := 0
	for math.Abs(v) >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return strconv.FormatFloat(roundTo(v, 4), 'f', -1, 64) + " " + units[u]
}

// roundTo rounds v to n significant digits.
func roundTo(v float64, n int) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	p := math.Pow(10, float64(n-1)-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// ValueTicks marks a value axis (latency, bandwidth) with readable labels whatever its range:
// on a logarithmic axis (Log) the decades, with 3 between them when the range spans fewer than 5
// decades, 2 and 5 when fewer than 2.5 and 2, 3 and 5 when less than one; on a linear axis 4 to 10 steps
// of 1, 2 or 5 × a power of ten. Labels are plain decimals ("0.05", "20", "100000"), never
// exponents.
type ValueTicks struct {
	Log bool
}

// Ticks returns the ticks of [lo, hi].
func (t ValueTicks) Ticks(lo, hi float64) []plot.Tick {
	if math.IsNaN(lo) || math.IsNaN(hi) || hi < lo {
		return nil
	}
	if t.Log {
		return logTicks(lo, hi)
	}
	return linearTicks(lo, hi)
}

func logTicks(lo, hi float64) []plot.Tick {
	if !(lo > 0) {
		return nil
	}
	d0 := int(math.Floor(math.Log10(lo)))
	d1 := int(math.Ceil(math.Log10(hi)))
	span := math.Log10(hi / lo)
	labelled := map[int]bool{1: true}
	switch {
	case span < 1:
		labelled = map[int]bool{1: true, 2: true, 3: true, 5: true}
	case span < 2.5:
		labelled = map[int]bool{1: true, 2: true, 5: true}
	case span < 5:
		labelled = map[int]bool{1: true, 3: true}
	}
	var ticks []plot.Tick
	for d := d0; d <= d1; d++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, float64(d))
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			tk := plot.Tick{Value: v}
			if labelled[m] {
				tk.Label = formatValue(v)
			}
			ticks = append(ticks, tk)
		}
	}
	if labels(ticks) < 2 {
		// A range inside a decade and between its labelled multiples: label every tick.
		for i := range ticks {
			ticks[i].Label = formatValue(ticks[i].Value)
		}
	}
	return ticks
}

func labels(ticks []plot.Tick) int {
	n := 0
	for _, t := range ticks {
		if t.Label != "" {
			n++
		}
	}
	return n
}

func linearTicks(lo, hi float64) []plot.Tick {
	if hi == lo {
		return []plot.Tick{{Value: lo, Label: formatValue(lo)}}
	}
	// The largest step of 1, 2 or 5 × 10^k that gives at least 4 intervals.
	raw := (hi - lo) / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{5, 2, 1} {
		if m*mag <= raw {
			step = m * mag
			break
		}
	}
	var ticks []plot.Tick
	first := math.Ceil(lo/step - 1e-9)
	for i := first; i*step <= hi*(1+1e-12)+1e-300; i++ {
		v := roundTo(i*step, 12)
		ticks = append(ticks, plot.Tick{Value: v, Label: formatValue(v)})
		// A minor tick halfway.
		if h := v + step/2; h <= hi {
			ticks = append(ticks, plot.Tick{Value: h})
		}
	}
	return ticks
}

// formatValue writes a tick value as a plain decimal with at most 6 significant digits.
func formatValue(v float64) string {
	s := strconv.FormatFloat(roundTo(v, 6), 'f', -1, 64)
	if s == "-0" {
		return "0"
	}
	return s
}

// unitOf is the unit in a column name's last parentheses ("Latency (us)" → "us"), "" for none.
func unitOf(col string) string {
	i := strings.LastIndex(col, "(")
	if i < 0 || !strings.HasSuffix(col, ")") {
		return ""
	}
	return col[i+1 : len(col)-1]
}

// stripUnit is the column name without its unit ("memcpy (MB/s)" → "memcpy").
func stripUnit(col string) string {
	if u := unitOf(col); u != "" {
		return strings.TrimSpace(strings.TrimSuffix(col, "("+u+")"))
	}
	return col
}

// AxisLabel is the value axis' label for a unit of the bench tables: "us" → "Latency (µs)",
// "MB/s" → "Bandwidth (MB/s)", "ms" → "Time (ms)"; other units as "Value (unit)".
func AxisLabel(unit string) string {
	switch unit {
	case "us", "µs":
		return "Latency (µs)"
	case "MB/s":
		return "Bandwidth (MB/s)"
	case "ms":
		return "Time (ms)"
	case "s":
		return "Time (s)"
	case "":
		return "Value"
	}
	return "Value (" + unit + ")"
}
