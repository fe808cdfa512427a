package bench_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/bench"
)

func sample() *bench.Result {
	return &bench.Result{
		Name: "put_bw", Title: "# OSU MPI_Put Bandwidth Test (goarmci)",
		Header:   []string{"Window creation: ARMCI_Malloc", "Synchronization: flush"},
		KeyLabel: "Size", Columns: []string{bench.ColBandwidth},
		Rows: []bench.Row{{Size: 1, Values: []float64{1.234}}, {Size: 2, Values: []float64{2.5}}, {Size: 4194304, Values: []float64{16000.456}}},
	}
}

func TestTextIsOSULayout(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, sample().WriteText(&b))
	want := "# OSU MPI_Put Bandwidth Test (goarmci)\n" +
		"# Window creation: ARMCI_Malloc\n" +
		"# Synchronization: flush\n" +
		"# Size      Bandwidth (MB/s)\n" +
		"1                       1.23\n" +
		"2                       2.50\n" +
		"4194304             16000.46\n"
	assert.Equal(t, want, b.String())
}

func TestParseOSURoundTripAndRealOSU(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, sample().WriteText(&b))
	r, err := bench.ParseOSU(&b)
	require.NoError(t, err)
	assert.Equal(t, "# OSU MPI_Put Bandwidth Test (goarmci)", r.Title)
	assert.Equal(t, []string{"Window creation: ARMCI_Malloc", "Synchronization: flush"}, r.Header)
	assert.Equal(t, "Size", r.KeyLabel)
	assert.Equal(t, []string{bench.ColBandwidth}, r.Columns)
	require.Len(t, r.Rows, 3)
	assert.Equal(t, 4194304, r.Rows[2].Size)
	assert.InDelta(t, 16000.46, r.Rows[2].Values[0], 1e-9)

	// The OSU suite's own output, as printed under a launcher that prefixes ranks.
	osu := "[0] # OSU MPI_Put Latency Test v5.8\n[0] # Window creation: MPI_Win_allocate\n" +
		"[0] # Synchronization: MPI_Win_flush\n[0] # Size          Latency (us)\n" +
		"[0] 1                       0.14\n[0] 8                       0.15\n"
	r, err = bench.ParseOSU(strings.NewReader(osu))
	require.NoError(t, err)
	assert.Equal(t, []string{bench.ColLatency}, r.Columns)
	require.Len(t, r.Rows, 2)
	assert.Equal(t, 8, r.Rows[1].Size)
	assert.InDelta(t, 0.15, r.Rows[1].Values[0], 1e-9)
}

func TestParseOSURejectsMalformed(t *testing.T) {
	for _, in := range []string{
		"",
		"1 0.5\n",
		"# title\n# Size  Latency (us)\nx 0.5\n",
		"# title\n# Size  Latency (us)\n8\n",
		"# title\n# Size  Latency (us)\n8 1.0 2.0\n",
		"# title\n# Size  Latency (us)\n8 1.0\n# late\n",
		"# title\n# Size\n8 1.0\n",
	} {
		_, err := bench.ParseOSU(strings.NewReader(in))
		assert.ErrorIs(t, err, bench.ErrParse, "%q", in)
	}
}

func TestCSVAndJSONShapes(t *testing.T) {
	r := sample()
	r.Columns = append(r.Columns, bench.ColMemcpy)
	for i := range r.Rows {
		r.Rows[i].Values = append(r.Rows[i].Values, 100)
	}
	var b bytes.Buffer
	require.NoError(t, r.Write(&b, "csv"))
	assert.True(t, strings.HasPrefix(b.String(), "# OSU MPI_Put Bandwidth Test (goarmci)\n# Window creation: ARMCI_Malloc\n"), "header lines as comments: %q", b.String())
	cr := csv.NewReader(&b)
	cr.Comment = '#'
	recs, err := cr.ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 4)
	assert.Equal(t, []string{"size", bench.ColBandwidth, bench.ColMemcpy}, recs[0])
	assert.Equal(t, []string{"4194304", "16000.456", "100.000"}, recs[3])

	b.Reset()
	require.NoError(t, r.Write(&b, "json"))
	var back bench.Result
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	assert.Equal(t, *r, back)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &raw))
	for _, k := range []string{"name", "title", "columns", "rows", "key_label"} {
		assert.Contains(t, raw, k)
	}
	assert.ErrorIs(t, r.Write(&b, "xml"), bench.ErrOptions)
}

func TestOSUCountsAndSizes(t *testing.T) {
	o, s, err := bench.Options{Name: "put_latency"}.Check()
	require.NoError(t, err)
	assert.Equal(t, bench.SyncFlush, o.Sync)
	assert.Equal(t, 64, o.Window)
	sizes := o.Sizes()
	assert.Len(t, sizes, 23) // 1 B .. 4 MiB
	assert.Equal(t, 4<<20, sizes[len(sizes)-1])
	it, sk := o.Counts(s.Kind, 8192)
	assert.Equal(t, [2]int{10000, 100}, [2]int{it, sk})
	it, sk = o.Counts(s.Kind, 16384)
	assert.Equal(t, [2]int{1000, 10}, [2]int{it, sk})
	it, sk = o.Counts(bench.Bandwidth, 8)
	assert.Equal(t, [2]int{100, 10}, [2]int{it, sk})
	it, sk = o.Counts(bench.Bandwidth, 1<<20)
	assert.Equal(t, [2]int{20, 2}, [2]int{it, sk})
	o.Iterations = 10
	it, sk = o.Counts(bench.Latency, 1)
	assert.Equal(t, [2]int{10, 1}, [2]int{it, sk})

	o, _, err = bench.Options{Name: "acc_latency", MaxSize: 64}.Check()
	require.NoError(t, err)
	assert.Equal(t, []int{8, 16, 32, 64}, o.Sizes())
	o, _, err = bench.Options{Name: "fop_latency"}.Check()
	require.NoError(t, err)
	assert.Equal(t, []int{8}, o.Sizes())
}

func TestPatchShape(t *testing.T) {
	for _, c := range []struct{ elems, bcols, r, c int }{
		{1, 1024, 1, 1}, {2, 1024, 1, 2}, {4, 1024, 2, 2}, {8, 1024, 2, 4},
		{1 << 19, 1024, 512, 1024}, {1 << 19, 512, 1024, 512}, {1 << 10, 16, 64, 16},
	} {
		r, cc := bench.PatchShape(c.elems, c.bcols)
		assert.Equal(t, [2]int{c.r, c.c}, [2]int{r, cc}, "%d elements, %d columns", c.elems, c.bcols)
		assert.Equal(t, c.elems, r*cc)
	}
}

func TestRunInfoInEveryFormat(t *testing.T) {
	r := sample()
	r.Transport, r.Ranks = "shm", 2
	r.Run = &bench.RunInfo{Version: "v1.0.0 revision 0123abcd", GoVersion: "go1.26.8", Host: "node7", Platform: "linux/amd64", CPUs: 2, CPU: "Test CPU", Kernel: "6.1.0"}
	want := []string{
		"# OSU MPI_Put Bandwidth Test (goarmci)",
		"# Window creation: ARMCI_Malloc",
		"# Synchronization: flush",
		"# Transport: shm, 2 ranks",
		"# Version: goarmci v1.0.0 revision 0123abcd, go1.26.8",
		"# Machine: node7, linux/amd64, 2 CPUs, Test CPU, kernel 6.1.0",
	}
	for _, format := range []string{"text", "csv"} {
		var b bytes.Buffer
		require.NoError(t, r.Write(&b, format))
		lines := strings.Split(b.String(), "\n")
		require.Greater(t, len(lines), len(want))
		assert.Equal(t, want, lines[:len(want)], format)
	}
	// A header that names the transport already keeps its own line.
	r2 := sample()
	r2.Transport, r2.Header = "tcp", []string{"Transport: tcp, 4 ranks, sync fence"}
	var b bytes.Buffer
	require.NoError(t, r2.WriteText(&b))
	assert.Equal(t, 1, strings.Count(b.String(), "Transport:"))

	b.Reset()
	require.NoError(t, r.Write(&b, "json"))
	var raw map[string]map[string]any
	var tmp map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &tmp))
	runJSON, _ := json.Marshal(tmp["run"])
	require.NoError(t, json.Unmarshal([]byte(`{"run":`+string(runJSON)+`}`), &raw))
	assert.Equal(t, "v1.0.0 revision 0123abcd", raw["run"]["version"])
	assert.Equal(t, "go1.26.8", raw["run"]["go_version"])
	assert.Equal(t, "node7", raw["run"]["host"])
	assert.Equal(t, "shm", tmp["transport"])
	assert.Equal(t, 2.0, tmp["ranks"])

	// Text read back: the run lines become Run again, not Header lines.
	b.Reset()
	require.NoError(t, r.WriteText(&b))
	back, err := bench.ParseOSU(&b)
	require.NoError(t, err)
	require.NotNil(t, back.Run)
	assert.Equal(t, "v1.0.0 revision 0123abcd", back.Run.Version)
	assert.Equal(t, "go1.26.8", back.Run.GoVersion)
	assert.NotContains(t, strings.Join(back.Header, "|"), "Version:")

	cur := bench.CurrentRun()
	assert.Equal(t, runtime.Version(), cur.GoVersion)
	assert.Equal(t, runtime.NumCPU(), cur.CPUs)
	assert.NotEmpty(t, cur.Version)
}
