package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseScenarioDefaults(t *testing.T) {
	var errOut bytes.Buffer
	f, err := parseScenario(&errOut, []string{"-rails", "3", "rails", "-rate", "100mbit,200mbit,300mbit"})
	require.NoError(t, err)
	assert.Equal(t, "rails", f.name)
	counts, err := f.railCounts()
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, counts)
	o, err := f.rankOptions()
	require.NoError(t, err)
	assert.Equal(t, []int{8, 1 << 20}, o.LatSizes)
	assert.Equal(t, 32<<20, o.Bytes)
	assert.Equal(t, []string{"auto", "even", "adaptive", "bss", "round-robin", "binding"}, f.policyList())

	f, err = parseScenario(&errOut, []string{"fault", "-duration", "3s"})
	require.NoError(t, err)
	assert.Equal(t, "both", f.op)
	assert.Equal(t, time.Second, f.event)
	o, err = f.rankOptions()
	require.NoError(t, err)
	assert.Equal(t, 1<<20, o.Size)
	assert.Equal(t, 1, o.Window)
	args := f.childArgs("get")
	assert.Contains(t, strings.Join(args, " "), "-op get")
	assert.Contains(t, strings.Join(args, " "), "-size 1m")
	assert.Contains(t, strings.Join(args, " "), "-window 1")
	assert.Contains(t, args, childFlag)

	f, err = parseScenario(&errOut, []string{"hotspot", "-rails", "2"})
	require.NoError(t, err)
	assert.Equal(t, 1, f.cutRail)
	assert.Equal(t, "put", f.op)
}

// The progress counts one step per launched job.
func TestScenarioJobs(t *testing.T) {
	for _, c := range []struct {
		args []string
		jobs int
	}{
		{[]string{"rails", "-rails", "3"}, 1 + 2*6}, // one rail once, then 6 policies for 2 and 3
		{[]string{"rails", "-rails", "4", "-counts", "1,4", "-policies", "auto,even"}, 3},
		{[]string{"interleave", "-rails", "2"}, 2},
		{[]string{"hotspot", "-policies", "adaptive,bss:2,even"}, 3},
		{[]string{"fault"}, 4}, // put and get, APM on and off
		{[]string{"fault", "-op", "put", "-apm", "true"}, 1},
		{[]string{"app", "-rails", "2", "-pull", "--", "true"}, 3},
	} {
		f, err := parseScenario(&bytes.Buffer{}, c.args)
		require.NoError(t, err, "%v", c.args)
		assert.Equal(t, c.jobs, f.jobs(), "%v", c.args)
	}
}

func TestParseScenarioErrors(t *testing.T) {
	for _, args := range [][]string{
		{"rails", "-rails", "5"},
		{"rails", "-rate", "1mbit,2mbit,3mbit"},
		{"rails", "-counts", "3"},
		{"rails", "-format", "xml"},
		{"rails", "-sizes", "1q"},
		{"hotspot", "-cut-rail", "2"},
		{"hotspot", "-cut-factor", "1"},
		{"fault", "-op", "acc"},
		{"rails", "interleave"},
	} {
		_, err := parseScenario(&bytes.Buffer{}, args)
		var ee *exitError
		require.ErrorAs(t, err, &ee, "%v", args)
		assert.Equal(t, 2, ee.code, "%v", args)
	}
}

func TestScenarioPaths(t *testing.T) {
	assert.Equal(t, "/x/a_put_bw.png", suffixPath("/x/a.png", "put_bw"))
	assert.Equal(t, "1 rail", configName(1, "auto"))
	assert.Equal(t, "2 rails bss", configName(2, "bss"))
	assert.Equal(t, "1 MiB", sizeName(1<<20))
	assert.Equal(t, "512 KiB", sizeName(512<<10))
	assert.Equal(t, "1000 B", sizeName(1000))
	assert.Equal(t, "2.67 s", seconds(8*time.Second/3))
	assert.Equal(t, "2 s", seconds(2*time.Second))
}

// TestBenchRailsSmoke runs one tiny rails scenario on the netns testbed (2 rails, even policy,
// 256 KiB) through the built binary and checks the tables' shape. Root only; not under -short.
func TestBenchRailsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a netns testbed and runs 2 jobs")
	}
	if os.Geteuid() != 0 {
		code, _, errOut := benchCLI(t, "rails", "-rails", "2")
		require.Equal(t, 0, code)
		assert.Contains(t, errOut, "skipped")
		return
	}
	png := filepath.Join(t.TempDir(), "r.png")
	code, out, errOut := benchCLI(t, "rails", "-rails", "2", "-rate", "800mbit", "-policies", "even",
		"-sizes", "256k", "-lat-sizes", "8", "-bytes", "2m", "-format", "csv", "-plot", png)
	require.Equal(t, 0, code, errOut)
	// Several CSV tables one after the other: the put bandwidth table is the first with a
	// 256 KiB row.
	blocks := strings.Split(strings.TrimSpace(out), "\n")
	var puts []string
	for i, l := range blocks {
		if strings.HasPrefix(l, "size,") && i+1 < len(blocks) && strings.HasPrefix(blocks[i+1], "262144,") && puts == nil {
			puts = strings.Split(blocks[i+1], ",")
			assert.Equal(t, "size,1 rail,2 rails even", l)
		}
	}
	require.Len(t, puts, 3, out)
	for _, v := range puts[1:] {
		assert.NotEqual(t, "0.000", v)
	}
	_, err := os.Stat(filepath.Join(filepath.Dir(png), "r_put_bw.png"))
	require.NoError(t, err)
	assert.Contains(t, out, "config,")
	assert.Contains(t, out, "2 rails even,")
}

func TestParseScenarioApp(t *testing.T) {
	f, err := parseScenario(&bytes.Buffer{}, []string{"app", "-rails", "2", "-pull", "--", "true", "-class", "B"})
	require.NoError(t, err)
	assert.True(t, filepath.IsAbs(f.app[0]), f.app[0])
	assert.Equal(t, []string{"-class", "B"}, f.app[1:])
	assert.True(t, f.pull)
	assert.Equal(t, 10*time.Second, f.event)
	for _, args := range [][]string{{"app"}, {"rails", "--", "true"}, {"app", "--", "/no/such/program"}} {
		_, err := parseScenario(&bytes.Buffer{}, args)
		var ee *exitError
		require.ErrorAs(t, err, &ee, "%v", args)
	}
}

// TestBenchHotspotSmoke runs a one-second hotspot timeline (rail 1 cut mid-run) on the netns
// testbed and checks the JSON: the summary table with one row for the policy and the timeline
// with one row per operation. Root only; not under -short.
func TestBenchHotspotSmoke(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root and the netns testbed; not under -short")
	}
	code, out, errOut := benchCLI(t, "hotspot", "-rails", "2", "-rate", "800mbit", "-policies", "adaptive",
		"-size", "1m", "-duration", "1s", "-event", "400ms", "-format", "json")
	require.Equal(t, 0, code, errOut)
	dec := json.NewDecoder(strings.NewReader(out))
	var tl struct {
		Name    string   `json:"name"`
		Columns []string `json:"columns"`
		Rows    []struct {
			Size   int       `json:"size"`
			Values []float64 `json:"values"`
		} `json:"rows"`
	}
	require.NoError(t, dec.Decode(&tl), out)
	assert.Equal(t, "timeline_put", tl.Name)
	assert.Equal(t, []string{"Time (ms)", "Op (ms)", "Bandwidth (MB/s)", "Stripes rail 0", "Stripes rail 1"}, tl.Columns)
	require.NotEmpty(t, tl.Rows)
	for i, r := range tl.Rows {
		assert.Equal(t, i, r.Size)
		assert.Greater(t, r.Values[2], 0.0)
	}
	var tab struct {
		Name string `json:"name"`
		Rows []struct {
			Key    string     `json:"key"`
			Values []*float64 `json:"values"`
		} `json:"rows"`
	}
	require.NoError(t, dec.Decode(&tab), out)
	assert.Equal(t, "hotspot", tab.Name)
	require.Len(t, tab.Rows, 1)
	assert.Equal(t, "adaptive", tab.Rows[0].Key)
	require.NotNil(t, tab.Rows[0].Values[0])
	assert.Greater(t, *tab.Rows[0].Values[0], 0.0)
}
