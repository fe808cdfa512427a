package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSizes(t *testing.T) {
	got, err := ParseSizes("8, 1k,1MiB,4m,65536,2g")
	require.NoError(t, err)
	assert.Equal(t, []int{8, 1 << 10, 1 << 20, 4 << 20, 65536, 2 << 30}, got)
	for _, bad := range []string{"x", "-1", "1q", "4mm", "1MB", "16kb", "2T"} {
		_, err := ParseSizes(bad)
		assert.ErrorIs(t, err, ErrOptions, bad)
	}
	assert.Equal(t, []int{1024, 2048, 4096}, powersOfTwo(1000, 4096))
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"400mbit": 50, "1gbit": 125, "800kbit": 0.1, "50mbps": 50, "8bit": 1e-6} {
		v, err := ParseRate(in)
		require.NoError(t, err, in)
		assert.InDelta(t, want, v, 1e-9, in)
	}
	for _, bad := range []string{"", "fast", "0mbit", "-3mbit", "mbit"} {
		_, err := ParseRate(bad)
		assert.ErrorIs(t, err, ErrOptions, bad)
	}
	r, err := ParseRates("100mbit,300mbit", 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"100mbit", "300mbit"}, r)
	r, err = ParseRates("400mbit", 3)
	require.NoError(t, err)
	assert.Equal(t, []string{"400mbit", "400mbit", "400mbit"}, r)
	r, err = ParseRates("none", 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"", ""}, r)
	_, err = ParseRates("1mbit,2mbit", 3)
	assert.ErrorIs(t, err, ErrOptions)
}

func TestScenarioOptionsCheck(t *testing.T) {
	o, err := ScenarioOptions{}.Check(ScenarioRails)
	require.NoError(t, err)
	assert.Equal(t, []int{1 << 20, 4 << 20}, o.Sizes)
	assert.Equal(t, []int{8, 1 << 20}, o.LatSizes)
	assert.Equal(t, 8, o.Window)
	o, err = ScenarioOptions{}.Check(ScenarioInterleave)
	require.NoError(t, err)
	assert.Equal(t, 1<<10, o.Sizes[0])
	assert.Equal(t, 4<<20, o.Sizes[len(o.Sizes)-1])
	assert.Len(t, o.Sizes, 13)
	_, err = ScenarioOptions{Op: "acc"}.Check(ScenarioFault)
	assert.ErrorIs(t, err, ErrOptions)
	_, err = ScenarioOptions{Sizes: []int{128 << 20}}.Check(ScenarioRails)
	assert.ErrorIs(t, err, ErrOptions)
	_, err = ScenarioOptions{}.Check("nope")
	assert.ErrorIs(t, err, ErrUnknown)
	assert.True(t, IsScenario("fault"))
	assert.False(t, IsScenario("put_bw"))
}

// timeline builds a timeline of operations of dur ms each at the given bandwidths, with stripes
// per rail.
func timeline(bw []float64, dur float64, stripes [][]float64) Timeline {
	var tl Timeline
	t := 0.0
	for _, b := range bw {
		t += dur
		tl.End = append(tl.End, t)
		tl.Dur = append(tl.Dur, dur)
		tl.BW = append(tl.BW, b)
	}
	tl.Stripes = stripes
	return tl
}

func TestTimelineRecoveryAndShare(t *testing.T) {
	// 10 ms operations: 100 MB/s, the cut at 50 ms, 3 slow operations, then 90 MB/s.
	bw := []float64{100, 100, 100, 100, 100, 40, 50, 60, 90, 90, 90, 90}
	tl := timeline(bw, 10, [][]float64{
		{2, 2, 2, 2, 2, 2, 2, 1, 0, 0, 0, 0},
		{2, 2, 2, 2, 2, 2, 2, 3, 4, 4, 4, 4},
	})
	ops, after, ok := tl.recovery(50, 85, 3)
	require.True(t, ok)
	assert.Equal(t, 3, ops)
	assert.InDelta(t, 30, after, 1e-9)
	_, _, ok = tl.recovery(50, 95, 3)
	assert.False(t, ok)
	m, n := tl.median(0, 50)
	assert.Equal(t, 4, n) // operations ending at 10..40 ms
	assert.Equal(t, 100.0, m)
	assert.InDelta(t, 0.5, tl.stripeShare(0, 0, 50), 1e-9)
	assert.InDelta(t, 0.0, tl.stripeShare(0, 90, 1000), 1e-9)
	assert.True(t, math.IsNaN(tl.stripeShare(5, 0, 100)))

	row := HotspotRow("bss", tl, 50, 100, 0.85, 0)
	assert.Equal(t, "bss", row.Key)
	assert.Equal(t, 100.0, row.Values[0]) // before
	assert.Equal(t, 90.0, row.Values[1])  // after
	assert.InDelta(t, 90, row.Values[2], 1e-9)
	assert.Equal(t, 3.0, row.Values[3])
	assert.InDelta(t, 50, row.Values[5], 1e-9)
	assert.InDelta(t, 0, row.Values[6], 1e-9)
}

func TestTimelineFault(t *testing.T) {
	// 10 ms operations at 100 MB/s; pulled at 40 ms: one operation takes 300 ms, then 50 MB/s
	// while down; plugged at 600 ms; 100 MB/s again from the third operation after.
	tl := Timeline{}
	add := func(dur, bw float64) {
		end := dur
		if n := len(tl.End); n > 0 {
			end += tl.End[n-1]
		}
		tl.End, tl.Dur, tl.BW = append(tl.End, end), append(tl.Dur, dur), append(tl.BW, bw)
	}
	for i := 0; i < 4; i++ {
		add(10, 100)
	}
	add(300, 3) // 40..340: the stall
	for i := 0; i < 13; i++ {
		add(20, 50) // 340..600
	}
	add(20, 50) // 600..620
	add(20, 50)
	for i := 0; i < 10; i++ {
		add(10, 100)
	}
	st := tl.Fault(40, 600, 0.5)
	assert.Equal(t, 100.0, st.Before)
	// 300 ms at 3 MB/s + 13 × 20 ms at 50 MB/s over the 560 ms down.
	assert.InDelta(t, (300*3+13*20*50)/560.0, st.During, 1e-9)
	assert.Equal(t, 100.0, st.After)
	assert.InDelta(t, 300, st.Detect, 1e-9) // the 300 ms operation ended at 340
	assert.InDelta(t, 290, st.Stall, 1e-9)
	assert.InDelta(t, 40, st.Full, 1e-9)      // the first 100 MB/s operation starts at 640
	assert.InDelta(t, 300, st.Failover, 1e-9) // 50 MB/s from 340 ms
	st = tl.Fault(40, 600, 1)                 // nothing reaches 80 MB/s while down
	assert.True(t, math.IsNaN(st.Failover))
}

func TestTimelineOf(t *testing.T) {
	r := &Result{Columns: []string{colTime, colOpTime, ColBandwidth, colStripes(0), colStripes(1)},
		Rows: []Row{{Size: 0, Values: []float64{10, 10, 5, 1, 2}}, {Size: 1, Values: []float64{20, 10, 6, 3, 4}}}}
	tl, err := TimelineOf(r)
	require.NoError(t, err)
	assert.Equal(t, []float64{10, 20}, tl.End)
	assert.Equal(t, []float64{5, 6}, tl.BW)
	assert.Equal(t, [][]float64{{1, 3}, {2, 4}}, tl.Stripes)
	_, err = TimelineOf(&Result{Columns: []string{ColLatency}})
	assert.ErrorIs(t, err, ErrParse)

	req := TimelinePlot("tl.png", "t", []Series{{Name: "x", TL: Timeline{End: []float64{1, math.NaN(), 3}, BW: []float64{5, 6, math.Inf(1)}, Dur: []float64{1, 2, 3}}}}, nil)
	assert.Equal(t, []Series{{Name: "x", TL: Timeline{End: []float64{1}, BW: []float64{5}}}}, req.Series, "only finite points, no durations")
	_, err = json.Marshal(req)
	assert.NoError(t, err)
}

func railRun(put, get, plat, glat []float64) *Result {
	r := &Result{Name: ScenarioRails, Columns: []string{ColPutBW, ColGetBW, ColPutLat, ColGetLat}}
	for i, size := range []int{8, 1 << 20, 4 << 20} {
		r.Rows = append(r.Rows, Row{Size: size, Values: []float64{put[i], get[i], plat[i], glat[i]}})
	}
	return r
}

func TestMergeAndRatio(t *testing.T) {
	one := railRun([]float64{0, 48, 49}, []float64{0, 47, 48}, []float64{200, 20000, 0}, []float64{210, 21000, 0})
	two := railRun([]float64{0, 96, 97}, []float64{0, 90, 94}, []float64{204, 10500, 0}, []float64{210, 10000, 0})
	runs, names := []*Result{one, two}, []string{"1 rail", "2 rails even"}
	merged := MergeColumns(runs, names, []string{ColPutBW, ColPutLat}, []string{"# put", "# lat"}, []string{"h"})
	require.Len(t, merged, 2)
	assert.Equal(t, names, merged[0].Columns)
	require.Len(t, merged[0].Rows, 2) // 8 B has no bandwidth
	assert.Equal(t, []float64{48, 96}, merged[0].Rows[0].Values)
	require.Len(t, merged[1].Rows, 2) // 4 MiB has no latency
	assert.Equal(t, 8, merged[1].Rows[0].Size)

	tab := RatioTable(runs, names, []int{1, 2}, func(n int) float64 { return 50 * float64(n) })
	col := func(name string) []float64 {
		for i, c := range tab.Columns {
			if c == name {
				return []float64{tab.Rows[0].Values[i], tab.Rows[1].Values[i]}
			}
		}
		t.Fatalf("no column %q in %v", name, tab.Columns)
		return nil
	}
	assert.InDelta(t, 2.0, col("Put 1M x1rail")[1], 1e-9)
	assert.InDelta(t, 96.0, col("Put 1M %rate")[1], 1e-9)
	assert.InDelta(t, 94.0, col("Get 4M %rate")[1], 1e-9)
	assert.InDelta(t, 1.02, col("Put lat 8B /1rail")[1], 1e-9)
	assert.InDelta(t, 0.525, col("Put lat 1M /1rail")[1], 1e-9)

	var buf bytes.Buffer
	require.NoError(t, tab.Write(&buf, "text"))
	assert.Contains(t, buf.String(), "2 rails even")
	buf.Reset()
	require.NoError(t, tab.Write(&buf, "csv"))
	all := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.Equal(t, tab.Title, all[0], "title and header lines first, as comments")
	var lines []string
	for _, l := range all {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	assert.Len(t, lines, 3)
	assert.True(t, strings.HasPrefix(lines[0], "config,"))
	buf.Reset()
	tab.Rows[0].Values[0] = math.NaN()
	require.NoError(t, tab.Write(&buf, "json"))
	var back struct {
		Rows []struct {
			Key    string     `json:"key"`
			Values []*float64 `json:"values"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	assert.Nil(t, back.Rows[0].Values[0])
	assert.ErrorIs(t, tab.Write(&buf, "xml"), ErrOptions)
}

func TestNPBReport(t *testing.T) {
	s, ok := NPBReport("[0]  IS Benchmark Completed.\n Time in seconds = 11.25\n Verification = SUCCESSFUL\n")
	assert.True(t, ok)
	assert.InDelta(t, 11.25, s, 1e-9)
	s, ok = NPBReport(" Verification = UNSUCCESSFUL\n")
	assert.False(t, ok)
	assert.True(t, math.IsNaN(s))
}
