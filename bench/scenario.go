package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/goarmci/goarmci/internal/config"
)

// Scenario benchmarks run a two-rank job across two hosts of the multi-rail
// testbed (network namespaces joined by veth rails with tbf rates, internal/testutil): rail
// scaling per policy (RunRails, [Vishnu07 ch. 4–8]), a timeline of bandwidth per operation around
// an event (RunTimeline: a rail's rate cut mid-run, a cable pulled, [Vishnu09 Fig. 10/11]), and
// the put/get interleaving of an epoch (RunInterleave, [Vishnu07 §5.3.4]). The launching side
// (`goarmci bench rails|hotspot|fault|interleave`) builds the testbed, fires the events and
// analyses the timelines with the pure functions of timeline.go.

// Scenario names.
const (
	ScenarioRails      = "rails"
	ScenarioHotspot    = "hotspot"
	ScenarioFault      = "fault"
	ScenarioInterleave = "interleave"
	// ScenarioApp runs any goarmci program (NAS CG, IS) as the 2 ranks; launcher only.
	ScenarioApp = "app"
)

// ScenarioNames lists the scenario benchmarks.
func ScenarioNames() []string {
	return []string{ScenarioRails, ScenarioHotspot, ScenarioFault, ScenarioInterleave, ScenarioApp}
}

// IsScenario reports whether name is a scenario benchmark.
func IsScenario(name string) bool { return slices.Contains(ScenarioNames(), name) }

// Column names of the scenario tables.
const (
	ColPutBW      = "Put (MB/s)"
	ColGetBW      = "Get (MB/s)"
	ColPutLat     = "Put (us)"
	ColGetLat     = "Get (us)"
	colTime       = "Time (ms)"
	colOpTime     = "Op (ms)"
	colReorderOff = "Reorder off (MB/s)"
	colReorderOn  = "Reorder on (MB/s)"
	colRatio      = "On/off"
)

// colStripes names the column of the stripes posted on subchannel (rail) sub in a timeline.
func colStripes(sub int) string { return fmt.Sprintf("Stripes rail %d", sub) }

// ScenarioOptions is one rank's part of a scenario run.
type ScenarioOptions struct {
	// Sizes are the message sizes in bytes (bandwidth of RunRails, the sweep of RunInterleave).
	Sizes []int
	// LatSizes are the sizes whose latency RunRails measures (blocking Put + ARMCI_Fence, Get).
	LatSizes []int
	// Bytes is the data budget of one bandwidth point (bytes moved after the warm-up); it sets
	// the iteration counts (at least 2 windows or epochs).
	Bytes int
	// Window is the number of non-blocking operations per completion (RunRails, RunTimeline).
	Window int
	// Op is "put" or "get" (RunTimeline).
	Op string
	// Size is the message size of RunTimeline, bytes.
	Size int
	// DurationMs is how long RunTimeline issues operations, milliseconds.
	DurationMs int
}

// Check validates o for scenario name and fills the defaults. Errors wrap ErrOptions.
func (o ScenarioOptions) Check(name string) (ScenarioOptions, error) {
	if !IsScenario(name) {
		return o, fmt.Errorf("%w %q (scenarios: %s)", ErrUnknown, name, strings.Join(ScenarioNames(), ", "))
	}
	if o.Window == 0 {
		o.Window = 8
	}
	if o.Bytes == 0 {
		o.Bytes = 64 << 20
	}
	if o.Op == "" {
		o.Op = "put"
	}
	if o.Size == 0 {
		o.Size = 4 << 20
	}
	if o.DurationMs == 0 {
		o.DurationMs = 6000
	}
	if len(o.Sizes) == 0 {
		switch name {
		case ScenarioInterleave:
			o.Sizes = powersOfTwo(1<<10, 4<<20)
		default:
			o.Sizes = []int{1 << 20, 4 << 20}
		}
	}
	if name == ScenarioRails && o.LatSizes == nil {
		o.LatSizes = []int{8, 1 << 20}
	}
	if o.Window < 1 || o.Bytes < 1 || o.Size < 1 || o.DurationMs < 1 {
		return o, fmt.Errorf("%w: window %d, bytes %d, size %d, duration %d ms must be positive", ErrOptions, o.Window, o.Bytes, o.Size, o.DurationMs)
	}
	if o.Op != "put" && o.Op != "get" {
		return o, fmt.Errorf("%w: op %q (want put or get)", ErrOptions, o.Op)
	}
	for _, s := range append(slices.Clone(o.Sizes), o.LatSizes...) {
		if s < 1 || s > 64<<20 {
			return o, fmt.Errorf("%w: size %d (want 1 B..64 MiB)", ErrOptions, s)
		}
	}
	return o, nil
}

// powersOfTwo returns the powers of two from lo to hi (bytes), lo rounded up to one.
func powersOfTwo(lo, hi int) []int {
	var out []int
	for s := 1; s <= hi; s *= 2 {
		if s >= lo {
			out = append(out, s)
		}
	}
	return out
}

// ParseSizes reads a comma list of sizes ("8,1MiB,4m,65536"), each as ParseSize. Errors wrap
// ErrOptions.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseSize reads one size in bytes, up to 1 TiB, with goarmci's one convention for byte
// counts (the GOARMCI_* knobs' too): binary units K = KiB, M = MiB, G = GiB; decimal units
// (kB, MB) are rejected. Errors wrap ErrOptions.
func ParseSize(f string) (int, error) {
	n, err := config.ParseBytes(f)
	if err != nil {
		return 0, fmt.Errorf("%w: size %q: %v", ErrOptions, f, err)
	}
	if n > 1<<40 {
		return 0, fmt.Errorf("%w: size %q is above 1TiB", ErrOptions, f)
	}
	return int(n), nil
}

// ParseRate reads a tc rate ("400mbit", "1gbit", "100kbit", "50mbps" = bytes) and returns it in
// MB/s (10^6 bytes per second). Errors wrap ErrOptions.
func ParseRate(s string) (float64, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suf string
		bps float64 // bytes per second per unit
	}{
		{"gbit", 1e9 / 8}, {"mbit", 1e6 / 8}, {"kbit", 1e3 / 8}, {"bit", 1.0 / 8},
		{"gbps", 1e9}, {"mbps", 1e6}, {"kbps", 1e3}, {"bps", 1},
	}
	for _, u := range units {
		if strings.HasSuffix(l, u.suf) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(l, u.suf), 64)
			if err != nil || !(v > 0) {
				break
			}
			return v * u.bps / 1e6, nil
		}
	}
	return 0, fmt.Errorf("%w: rate %q (want e.g. 400mbit, 1gbit)", ErrOptions, s)
}

// ParseRates reads a comma list of tc rates, one per rail; a single rate applies to all rails.
// It returns rails rates (an empty string = no limit). Errors wrap ErrOptions.
func ParseRates(s string, rails int) ([]string, error) {
	if rails < 1 {
		return nil, fmt.Errorf("%w: %d rails", ErrOptions, rails)
	}
	out := make([]string, rails)
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return out, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 1 && len(parts) != rails {
		return nil, fmt.Errorf("%w: %d rates for %d rails", ErrOptions, len(parts), rails)
	}
	for r := range out {
		p := strings.TrimSpace(parts[min(r, len(parts)-1)])
		if _, err := ParseRate(p); err != nil {
			return nil, err
		}
		out[r] = p
	}
	return out, nil
}
