package benchplot_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

func TestResultPNG(t *testing.T) {
	r := &bench.Result{
		Name: "put_bw", Title: "# OSU MPI_Put Bandwidth Test (goarmci)", KeyLabel: "Size", Columns: []string{bench.ColBandwidth},
		Rows: []bench.Row{{Size: 1, Values: []float64{1.234}}, {Size: 2, Values: []float64{2.5}}, {Size: 4194304, Values: []float64{16000.456}}},
	}
	path := filepath.Join(t.TempDir(), "put_bw.png")
	require.NoError(t, benchplot.Render(bench.PlotRequest{Path: path, Result: r}))
	isPNG(t, path)
	// One small value (a single-size latency test): the log axis still has a positive range.
	one := &bench.Result{Name: "fop_latency", Title: "# x", Columns: []string{bench.ColLatency}, Rows: []bench.Row{{Size: 8, Values: []float64{0.09}}}}
	require.NoError(t, benchplot.WriteResult(one, path))
	isPNG(t, path)
	empty := &bench.Result{Title: "# x", Columns: []string{"a"}}
	assert.ErrorIs(t, benchplot.WriteResult(empty, path), bench.ErrOptions)
	assert.ErrorIs(t, benchplot.Render(bench.PlotRequest{Result: r}), bench.ErrOptions, "no path")
}

func TestTimelinePNG(t *testing.T) {
	tl := bench.Timeline{End: []float64{10, 20, 30}, BW: []float64{5, 6, 7}}
	path := filepath.Join(t.TempDir(), "tl.png")
	req := bench.TimelinePlot(path, "t", []bench.Series{{Name: "x", TL: tl}}, []bench.Event{{Name: "cut", Ms: 15}})
	require.NoError(t, benchplot.Render(req))
	isPNG(t, path)
	assert.ErrorIs(t, benchplot.WriteTimeline(path, "t", nil, nil), bench.ErrOptions)
}
