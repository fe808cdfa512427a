package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ByteSizes documents the one convention of every byte count goarmci reads (knobs of type
// bytes, bench sizes); `goarmci info` prints it.
const ByteSizes = "byte counts are binary (IEC): 4096, 16K = 16KiB = 16384, 1M = 1MiB = 1048576, G = GiB, T = TiB " +
	"(case-insensitive, B optional); decimal units (kB, MB, GB, TB) are rejected as ambiguous: write 1MiB or 1000000"

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// decimalUnits are the SI suffixes ParseBytes rejects: "1MB" means 10^6 to some readers and
// 2^20 to others.
var decimalUnits = []string{"kb", "mb", "gb", "tb"}

// ParseBytes parses a byte count: a non-negative integer with an optional binary unit, K, KiB,
// M, MiB, G, GiB, T, TiB (powers of 1024; case-insensitive; B alone = bytes). Decimal units
// (kB, MB, GB, TB) are an error that says how to write the value (ByteSizes).
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for _, d := range decimalUnits {
		if strings.HasSuffix(t, d) {
			num := strings.TrimSpace(strings.TrimSuffix(t, d))
			return 0, fmt.Errorf("%q: decimal unit %s is ambiguous; sizes are binary: write %s%siB (powers of 1024) or the number of bytes",
				s, strings.TrimSpace(s)[len(strings.TrimSpace(s))-2:], num, strings.ToUpper(d[:1]))
		}
	}
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a byte count such as 4096, 16KiB or 1MiB")
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("byte count %q overflows", s)
	}
	return n * mult, nil
}

// FormatBytes renders n with the largest binary unit that divides it exactly ("16KiB", "100").
func FormatBytes(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}
