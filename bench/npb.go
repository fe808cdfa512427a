package bench

import (
	"math"
	"strconv"
	"strings"
)

// NPBRun is what a NAS Parallel Benchmarks report says: goarmci's kernels (examples/nas) and
// the NPB 3.4 MPI programs print the same "Key = value" lines.
type NPBRun struct {
	benchmark string  // "CG", "IS" (from " CG Benchmark Completed."), "" when absent
	class     string  // " Class = A"
	Seconds   float64 // " Time in seconds = 1.89"; NaN when absent
	Ranks     int     // " Ranks = 4" (goarmci) or " Total processes = 4" (NPB-MPI); 0 when absent
	Verified  bool    // " Verification = SUCCESSFUL"
	Found     bool    // a "Time in seconds" line was there
}

// ParseNPB reads a NAS report: every line "Key = value", with any spaces around the "="
// (NPB-MPI aligns its values: " Time in seconds =                     1.23",
// " Verification    =               SUCCESSFUL"), launcher "[rank] " prefixes removed. Only
// rank 0's lines count when there are prefixes (the report is rank 0's); the last value of a
// key wins.
func ParseNPB(out string) NPBRun {
	r := NPBRun{Seconds: math.NaN()}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") && !strings.HasPrefix(l, "[0] ") && stripRankPrefix(l) != l {
			continue // another rank's line
		}
		l = strings.TrimSpace(stripRankPrefix(l))
		if b, ok := strings.CutSuffix(l, " Benchmark Completed."); ok {
			r.benchmark = strings.TrimSpace(b)
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		k, v = strings.Join(strings.Fields(k), " "), strings.TrimSpace(v)
		switch k {
		case "Time in seconds":
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				r.Seconds, r.Found = f, true
			}
		case "Class":
			r.class = v
		case "Ranks", "Total processes":
			if n, err := strconv.Atoi(v); err == nil {
				r.Ranks = n
			}
		case "Verification":
			r.Verified = v == "SUCCESSFUL"
		}
	}
	return r
}
