package bench_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/bench/progress"
)

func fixed(vals ...[2]float64) func(context.Context) (*bench.Result, error) {
	return func(context.Context) (*bench.Result, error) {
		r := &bench.Result{Columns: []string{bench.ColLatency}}
		for _, v := range vals {
			r.Rows = append(r.Rows, bench.Row{Size: int(v[0]), Values: []float64{v[1]}})
		}
		return r, nil
	}
}

func TestCompareMediansRatiosAndAlternation(t *testing.T) {
	var order []string
	seq := []float64{3, 1, 2, 10, 5}
	k := 0
	systems := []bench.System{
		{Name: "goarmci", Run: func(ctx context.Context) (*bench.Result, error) {
			order = append(order, "g")
			v := seq[k]
			k++
			return fixed([2]float64{8, v}, [2]float64{16, 2 * v})(ctx)
		}},
		{Name: "mpi", Run: func(ctx context.Context) (*bench.Result, error) {
			order = append(order, "m")
			return fixed([2]float64{8, 2}, [2]float64{16, 8})(ctx)
		}},
		{Name: "broken", Run: func(context.Context) (*bench.Result, error) {
			order = append(order, "b")
			return nil, errors.New("boom")
		}},
	}
	var log, lines bytes.Buffer
	now := time.Unix(0, 0)
	prog := progress.New(&lines, "goarmci: bench compare put_latency", "runs", 5*len(systems),
		progress.WithClock(func() time.Time { now = now.Add(time.Second); return now }))
	res, err := bench.Compare(context.Background(), "put_latency", systems, 5, &log, prog)
	require.NoError(t, err)
	prog.End()
	assert.Contains(t, log.String(), "broken left out")
	// One plain line per run; the broken system's 4 runs it will not make leave the total.
	got := strings.Split(strings.TrimSuffix(lines.String(), "\n"), "\n")
	require.Len(t, got, 11, lines.String())
	assert.Equal(t, []string{
		"goarmci: bench compare put_latency: run 1/5 goarmci done (1/15 runs, 1.0s)",
		"goarmci: bench compare put_latency: run 1/5 mpi done (2/15 runs, 2.0s)",
		"goarmci: bench compare put_latency: run 1/5 broken failed, left out (3/11 runs, 3.0s)",
		"goarmci: bench compare put_latency: run 2/5 mpi done (4/11 runs, 4.0s)",
	}, got[:4])
	assert.Equal(t, "goarmci: bench compare put_latency: run 5/5 goarmci done (11/11 runs, 11.0s)", got[10])
	assert.Equal(t, []string{"goarmci", "goarmci min", "goarmci max", "mpi", "mpi min", "mpi max", "goarmci/mpi"}, res.Columns)
	require.Len(t, res.Rows, 2)
	// median of 3,1,2,10,5 = 3, range 1..10; the ratio is of the medians
	assert.Equal(t, []float64{3, 1, 10, 2, 2, 2, 1.5}, res.Rows[0].Values)
	assert.Equal(t, []float64{6, 2, 20, 8, 8, 8, 0.75}, res.Rows[1].Values)
	assert.Contains(t, res.Header[0], "min and max over the runs")

	// The text, CSV and JSON forms carry the same columns.
	var txt, csvb bytes.Buffer
	require.NoError(t, res.Write(&txt, "text"))
	back, err := bench.ParseOSU(&txt)
	require.NoError(t, err, txt.String())
	assert.Equal(t, res.Columns, back.Columns)
	assert.Equal(t, res.Rows, back.Rows)
	require.NoError(t, res.Write(&csvb, "csv"))
	assert.Contains(t, csvb.String(), "\nsize,goarmci,goarmci min,goarmci max,mpi,mpi min,mpi max,goarmci/mpi\n8,3.000,1.000,10.000,2.000,2.000,2.000,1.500\n")
	// run k starts with system k mod 3; the broken one drops out after its first run
	assert.Equal(t, []string{"g", "m", "b", "m", "g", "g", "m", "g", "m", "m", "g"}, order)

	systems[0].Run = func(context.Context) (*bench.Result, error) { return nil, errors.New("no") }
	_, err = bench.Compare(context.Background(), "put_latency", systems, 1, &log, nil)
	assert.Error(t, err)
}

func TestMedianRangeRatio(t *testing.T) {
	assert.Equal(t, 0.0, bench.Median(nil))
	assert.Equal(t, 2.0, bench.Median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, bench.Median([]float64{4, 1, 2, 3}))
	lo, hi := bench.Range([]float64{4, 1, 7, 3})
	assert.Equal(t, [2]float64{1, 7}, [2]float64{lo, hi})
	lo, hi = bench.Range(nil)
	assert.Equal(t, [2]float64{0, 0}, [2]float64{lo, hi})
	assert.Equal(t, 2.0, bench.Ratio(4, 2))
	assert.Equal(t, 0.0, bench.Ratio(4, 0))
}

// A system's Extra columns (the -baseline limits of goarmci's own runs) become systems of their
// own with medians, ranges and ratios; an absent column is no system.
func TestCompareExtraColumns(t *testing.T) {
	k := 0
	systems := []bench.System{{Name: "goarmci", Run: func(context.Context) (*bench.Result, error) {
		k++
		return &bench.Result{Columns: []string{bench.ColBandwidth, bench.ColTCPStream},
			Rows: []bench.Row{{Size: 1 << 20, Values: []float64{float64(100 * k), float64(200 * k)}}}}, nil
	}, Extra: []bench.ExtraColumn{{Col: bench.ColTCPStream, Name: "socket"}, {Col: bench.ColSocketRTT, Name: "socket RTT"}}}}
	res, err := bench.Compare(context.Background(), "put_bw", systems, 3, io.Discard, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"goarmci", "goarmci min", "goarmci max", "socket", "socket min", "socket max", "goarmci/socket"}, res.Columns)
	require.Len(t, res.Rows, 1)
	assert.Equal(t, []float64{200, 100, 300, 400, 200, 600, 0.5}, res.Rows[0].Values)
}
