package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/bench"
)

func result(name string) *bench.Result {
	return &bench.Result{Name: name, Title: "# OSU MPI_Put Latency Test (goarmci)", KeyLabel: "Size",
		Columns: []string{bench.ColLatency}, Rows: []bench.Row{{Size: 1, Values: []float64{0.5}}, {Size: 8, Values: []float64{0.7}}}}
}

func pngAt(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(b[:4]), path)
}

func TestResultsFromFilesAndStdin(t *testing.T) {
	dir := t.TempDir()
	var one bytes.Buffer
	require.NoError(t, result("put_latency").WriteJSON(&one))
	in := filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(in, one.Bytes(), 0o644))
	var e bytes.Buffer
	require.Equal(t, 0, run([]string{"-o", filepath.Join(dir, "a.png"), in}, nil, &e), e.String())
	pngAt(t, filepath.Join(dir, "a.png"))

	// Two results on standard input (an object, then an array): one file each, suffixed.
	var two bytes.Buffer
	require.NoError(t, result("ga_put").WriteJSON(&two))
	arr, _ := json.Marshal([]*bench.Result{result("ga_get")})
	two.Write(arr)
	require.Equal(t, 0, run([]string{"-o", filepath.Join(dir, "ga.png")}, &two, &e), e.String())
	pngAt(t, filepath.Join(dir, "ga_ga_put.png"))
	pngAt(t, filepath.Join(dir, "ga_ga_get.png"))
}

// A scenario's JSON: results named after their column ("Put (MB/s)") become file-name tags,
// and its summary tables (text keys) are skipped.
func TestScenarioResultsAndTables(t *testing.T) {
	dir := t.TempDir()
	var in bytes.Buffer
	require.NoError(t, result("Put (MB/s)").WriteJSON(&in))
	require.NoError(t, result("Get (MB/s)").WriteJSON(&in))
	tab := &bench.Table{Name: "rails_ratio", Title: "# x", Key: "Config", Columns: []string{"Put 1 MiB x1rail"},
		Rows: []bench.TableRow{{Key: "2 rails auto", Values: []float64{2}}}}
	require.NoError(t, tab.Write(&in, "json"))
	var e bytes.Buffer
	require.Equal(t, 0, run([]string{"-o", filepath.Join(dir, "rails.png")}, &in, &e), e.String())
	pngAt(t, filepath.Join(dir, "rails_Put_MB_s.png"))
	pngAt(t, filepath.Join(dir, "rails_Get_MB_s.png"))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no file for the table")
	assert.Equal(t, "ga_put", fileTag("ga_put"))
}

func TestRequests(t *testing.T) {
	dir := t.TempDir()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	require.NoError(t, enc.Encode(bench.PlotRequest{Path: filepath.Join(dir, "r.png"), Result: result("put_latency")}))
	require.NoError(t, enc.Encode(bench.TimelinePlot(filepath.Join(dir, "t.png"), "fault",
		[]bench.Series{{Name: "put", TL: bench.Timeline{End: []float64{1, 2}, BW: []float64{3, 4}}}}, []bench.Event{{Name: "down", Ms: 1.5}})))
	var e bytes.Buffer
	require.Equal(t, 0, run([]string{"-requests"}, &in, &e), e.String())
	pngAt(t, filepath.Join(dir, "r.png"))
	pngAt(t, filepath.Join(dir, "t.png"))
}

func TestErrors(t *testing.T) {
	var e bytes.Buffer
	assert.Equal(t, 2, run(nil, strings.NewReader(""), &e), "missing -o")
	assert.Contains(t, e.String(), "missing -o")
	assert.Equal(t, 2, run([]string{"-requests", "-o", "x.png"}, strings.NewReader(""), &e))
	assert.Equal(t, 1, run([]string{"-o", filepath.Join(t.TempDir(), "x.png")}, strings.NewReader(`{"name":"x"}`), &e), "no columns")
	assert.Equal(t, 1, run([]string{"-o", filepath.Join(t.TempDir(), "x.png")}, strings.NewReader(""), &e), "no results")
	assert.Equal(t, 1, run([]string{"-o", "x.png", "/no/such/file.json"}, nil, &e))
}
