package benchplot_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/bench/benchplot"
)

func isPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 8)
	assert.Equal(t, "\x89PNG", string(b[:4]))
}

// labels are the tick labels of ticks, without the minor (unlabelled) ones.
func labels(ticks []plot.Tick) []string {
	var out []string
	for _, t := range ticks {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

func TestSizeTicks(t *testing.T) {
	// 1 B .. 4 MiB: 23 powers of two, every 4th labelled, and the end (2 powers past 1 MiB).
	ticks := benchplot.SizeTicks{}.Ticks(1, 4<<20)
	assert.Len(t, ticks, 23)
	assert.Equal(t, []string{"1 B", "16 B", "256 B", "4 KiB", "64 KiB", "1 MiB", "4 MiB"}, labels(ticks))
	// 1 MiB .. 4 MiB: every power.
	assert.Equal(t, []string{"1 MiB", "2 MiB", "4 MiB"}, labels(benchplot.SizeTicks{}.Ticks(1<<20, 4<<20)))
	// 8 B .. 64 KiB: 14 powers, every 2nd labelled; 8 B, one power from 16 B, is not.
	assert.Equal(t, []string{"16 B", "64 B", "256 B", "1 KiB", "4 KiB", "16 KiB", "64 KiB"}, labels(benchplot.SizeTicks{}.Ticks(8, 64<<10)))
	// A range inside one power of two still gets a labelled tick.
	assert.Equal(t, []string{"6 B"}, labels(benchplot.SizeTicks{}.Ticks(6, 7)))
	assert.Equal(t, "1.5 MiB", benchplot.FormatBytes(1.5*(1<<20)))
	assert.Equal(t, "1023 B", benchplot.FormatBytes(1023))
}

func TestValueTicks(t *testing.T) {
	log := benchplot.ValueTicks{Log: true}
	// Four decades: 1 and 3 per decade.
	assert.Equal(t, []string{"0.03", "0.1", "0.3", "1", "3", "10", "30", "100"}, labels(log.Ticks(0.02, 130)))
	// Two decades: 1, 2, 5.
	assert.Equal(t, []string{"20", "50", "100", "200", "500", "1000", "2000"}, labels(log.Ticks(15, 2500)))
	// Six decades: the powers of ten only, never an exponent.
	assert.Equal(t, []string{"10", "100", "1000", "10000", "100000", "1000000", "10000000"}, labels(log.Ticks(5, 1.5e7)))
	// Inside a decade between labelled multiples: every tick is labelled.
	assert.Equal(t, []string{"6", "7", "8"}, labels(log.Ticks(5.5, 8.5)))
	lin := benchplot.ValueTicks{}
	assert.Equal(t, []string{"0", "20", "40", "60", "80", "100"}, labels(lin.Ticks(0, 105)))
	assert.Equal(t, []string{"0", "0.01", "0.02", "0.03", "0.04"}, labels(lin.Ticks(0, 0.045)))
	assert.Equal(t, []string{"47.5"}, labels(lin.Ticks(47.5, 47.5)))
}

func TestAxisLabels(t *testing.T) {
	assert.Equal(t, "Latency (µs)", benchplot.AxisLabel("us"))
	assert.Equal(t, "Bandwidth (MB/s)", benchplot.AxisLabel("MB/s"))
	assert.Equal(t, "Time (ms)", benchplot.AxisLabel("ms"))
	assert.Equal(t, "Value (ops)", benchplot.AxisLabel("ops"))
}

func osuResult() *bench.Result {
	return &bench.Result{
		Name: "put_bw", Title: "# OSU MPI_Put Bandwidth Test (goarmci)", KeyLabel: "Size",
		Columns: []string{bench.ColBandwidth, bench.ColMemcpy},
		Sync:    "flush", Transport: "shm", Ranks: 2,
		Header: []string{"Synchronization: flush (ARMCI_Fence, as MPI_Win_flush)", "Transport: shm, 2 ranks"},
		Rows: []bench.Row{{Size: 1, Values: []float64{1.234, 300}}, {Size: 2, Values: []float64{2.5, 600}},
			{Size: 4194304, Values: []float64{16000.456, 60000}}},
	}
}

func TestResultFigure(t *testing.T) {
	f, err := benchplot.ResultFigure(osuResult())
	require.NoError(t, err)
	assert.Equal(t, "OSU MPI_Put Bandwidth Test (goarmci)\nput_bw, sync flush, shm, 2 ranks", f.Title)
	assert.Equal(t, "Message size", f.XLabel)
	assert.Equal(t, "Bandwidth (MB/s)", f.YLabel)
	assert.True(t, f.SizeAxis)
	assert.True(t, f.LogY, "1.2 .. 60000 MB/s")
	assert.False(t, f.Categorical)
	require.Len(t, f.Series, 2)
	assert.Equal(t, []string{"Bandwidth", "memcpy"}, []string{f.Series[0].Name, f.Series[1].Name})

	// A comparison: medians with ranges, the ratio column left out, the unit and the sync
	// mode from the header lines.
	cmp := &bench.Result{
		Name: "put_latency", Title: "# OSU MPI_Put Latency Test - goarmci vs peers", KeyLabel: "Size",
		Header: []string{"Figure: Latency (us), median of 5 runs per system, runs alternating; min and max over the runs",
			"Transport: shm, 2 ranks, sync lock"},
		Columns: []string{"goarmci", "goarmci min", "goarmci max", "openmpi-sm", "openmpi-sm min", "openmpi-sm max", "goarmci/openmpi-sm"},
		Rows:    []bench.Row{{Size: 8, Values: []float64{0.34, 0.18, 0.46, 0.05, 0.03, 0.07, 6.75}}},
	}
	f, err = benchplot.ResultFigure(cmp)
	require.NoError(t, err)
	assert.Equal(t, "OSU MPI_Put Latency Test - goarmci vs peers\nput_latency, sync lock, shm, 2 ranks, 8 B, median of 5 runs, bars min to max", f.Title)
	assert.Equal(t, "Latency (µs)", f.YLabel)
	assert.True(t, f.Categorical, "one size: a marker per system")
	assert.False(t, f.LogY, "0.03 .. 0.46 µs: linear from 0")
	require.Len(t, f.Series, 2)
	assert.Equal(t, "openmpi-sm", f.Series[1].Name)
	assert.Equal(t, []float64{0.03}, f.Series[1].Lo)
	assert.Equal(t, []float64{0.07}, f.Series[1].Hi)

	// A rails table: configurations as columns, the unit in the title, the testbed in the header.
	rails := &bench.Result{
		Name: "Put (MB/s)", Title: "# goarmci multi-rail Put Bandwidth Test (MB/s)", KeyLabel: "Size", Transport: "tcp", Ranks: 2,
		Header:  []string{"Testbed: 2 hosts (network namespaces), 4 veth rails, tbf 400mbit per rail on each host's egress"},
		Columns: []string{"1 rail", "2 rails auto"},
		Rows:    []bench.Row{{Size: 1 << 20, Values: []float64{47.5, 95}}, {Size: 4 << 20, Values: []float64{47.6, math.NaN()}}},
	}
	f, err = benchplot.ResultFigure(rails)
	require.NoError(t, err)
	assert.Equal(t, "goarmci multi-rail Put Bandwidth Test (MB/s)\ntcp, 2 ranks, testbed of 4 rails at 400mbit each", f.Title)
	assert.Equal(t, "Bandwidth (MB/s)", f.YLabel)
	assert.True(t, f.Categorical)

	// Barrier: keyed by ranks, no sync mode in the title.
	bar := &bench.Result{Name: "barrier", Title: "# OSU-style Barrier Latency Test (goarmci)", KeyLabel: "Ranks", Sync: "fence",
		Transport: "shm", Columns: []string{"dissemination (us)"}, Rows: []bench.Row{{Size: 2, Values: []float64{1}}, {Size: 3, Values: []float64{2}}, {Size: 4, Values: []float64{3}}}}
	f, err = benchplot.ResultFigure(bar)
	require.NoError(t, err)
	assert.Equal(t, "OSU-style Barrier Latency Test (goarmci)\nbarrier, shm", f.Title)
	assert.Equal(t, "Ranks", f.XLabel)
	assert.False(t, f.SizeAxis)

	_, err = benchplot.ResultFigure(&bench.Result{Title: "# x", Columns: []string{"a"}})
	assert.ErrorIs(t, err, bench.ErrOptions)
}

func TestResultPNG(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "put_bw.png")
	require.NoError(t, benchplot.Render(bench.PlotRequest{Path: path, Result: osuResult()}))
	isPNG(t, path)
	// One small value (a single-size latency test) still draws.
	one := &bench.Result{Name: "fop_latency", Title: "# x", Columns: []string{bench.ColLatency}, Rows: []bench.Row{{Size: 8, Values: []float64{0.09}}}}
	require.NoError(t, benchplot.WriteResult(one, path))
	isPNG(t, path)
	require.NoError(t, benchplot.WriteResult(osuResult(), filepath.Join(dir, "put_bw.svg")))
	empty := &bench.Result{Title: "# x", Columns: []string{"a"}}
	assert.ErrorIs(t, benchplot.WriteResult(empty, path), bench.ErrOptions)
	assert.ErrorIs(t, benchplot.Render(bench.PlotRequest{Result: osuResult()}), bench.ErrOptions, "no path")
}

func TestTimelinePNG(t *testing.T) {
	tl := bench.Timeline{End: []float64{10, 20, 30}, BW: []float64{5, 6, 7}}
	path := filepath.Join(t.TempDir(), "tl.png")
	req := bench.TimelinePlot(path, "t", []bench.Series{{Name: "x", TL: tl}, {Name: "y", TL: tl}}, []bench.Event{{Name: "cut", Ms: 15}})
	require.NoError(t, benchplot.Render(req))
	isPNG(t, path)
	assert.ErrorIs(t, benchplot.WriteTimeline(path, "t", nil, nil), bench.ErrOptions)
}
